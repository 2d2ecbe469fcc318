"""`spark-llm smoke`: one chat completion through the endpoint, then a short concurrent load.

From this machine over HTTP to the head's API (the plan's endpoint, or `--endpoint`, e.g. an ssh tunnel),
with `stream: true` so the time to first token is measured, and the stack's apiKey as `Authorization:
Bearer`. The load is bounded by count (`--requests`, `--concurrency`) and by time (`--duration`: no request
starts after it; each request has `--timeout`). Exit 1 when any request failed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import shlex
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from rich.table import Table

from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.hosts import ssh_option_words

FIRST_PROMPT = "In one sentence: what does a head node do in a multi-node LLM deployment?"
LOAD_PROMPT = "Write a short note to the operator of a two-node DGX Spark cluster. Request {n}."


@dataclass(frozen=True)
class RequestResult:
    """One streamed chat completion as the client saw it."""

    ok: bool
    http_status: int | None
    ttft_s: float | None
    """Seconds from sending the request to the first content token."""
    latency_s: float
    """Seconds from sending the request to the end of the stream."""
    tokens: int
    """Completion tokens: the server's usage count, else the content chunks received."""
    text: str = ""
    error: str = ""

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.latency_s if self.ok and self.latency_s > 0 else None


def parse_sse(lines: Iterable[bytes]) -> Iterator[dict]:
    """Pure: the JSON chunks of a server-sent event stream, until `data: [DONE]`."""
    for raw in lines:
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if isinstance(chunk, dict):
            yield chunk


def chat_request(
    endpoint: str, model: str, api_key: str | None, prompt: str, max_tokens: int, timeout: float
) -> RequestResult:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(f"{endpoint}/v1/chat/completions", json.dumps(body).encode(), headers)
    start = time.perf_counter()
    first: float | None = None
    pieces: list[str] = []
    usage_tokens: int | None = None
    status = None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = response.status
            for chunk in parse_sse(response):
                for choice in chunk.get("choices") or []:
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        first = first if first is not None else time.perf_counter()
                        pieces.append(content)
                usage = chunk.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    usage_tokens = usage["completion_tokens"]
                if time.perf_counter() - start > timeout:
                    raise TimeoutError(f"stream still going after {timeout:.0f} s")
    except urllib.error.HTTPError as err:
        detail = err.read()[:300].decode(errors="replace")
        try:
            detail = json.loads(detail).get("message", detail)
        except (ValueError, AttributeError):
            pass
        return RequestResult(False, err.code, None, time.perf_counter() - start, 0, error=f"HTTP {err.code}: {detail}")
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        reason = getattr(err, "reason", err)
        return RequestResult(
            False, status, None, time.perf_counter() - start, 0, error=f"{type(err).__name__}: {reason}"
        )
    latency = time.perf_counter() - start
    tokens = usage_tokens if usage_tokens is not None else len(pieces)
    if not pieces:
        return RequestResult(False, status, None, latency, tokens, error="the stream carried no content")
    return RequestResult(True, status, (first or latency) - start, latency, tokens, "".join(pieces))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Pure: nearest-rank percentile (q in 0..100) of `values`, None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def summarize(results: Sequence[RequestResult], wall_s: float, concurrency: int) -> dict:
    """Pure: the load's numbers: counts, time to first token and latency percentiles, tokens/s, errors."""
    ok = [r for r in results if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    latency = [r.latency_s for r in ok]
    tokens = sum(r.tokens for r in ok)
    rates = [rate for r in ok if (rate := r.tokens_per_s) is not None]
    return {
        "requests": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "concurrency": concurrency,
        "wall_s": round(wall_s, 3),
        "ttft_ms": {
            "p50": _ms(percentile(ttft, 50)),
            "p95": _ms(percentile(ttft, 95)),
            "max": _ms(max(ttft, default=None)),
        },
        "latency_ms": {"p50": _ms(percentile(latency, 50)), "p95": _ms(percentile(latency, 95))},
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / wall_s, 1) if wall_s > 0 else None,
        "tokens_per_s_per_request": round(sum(rates) / len(rates), 1) if rates else None,
        "error_messages": dict(Counter(r.error for r in results if not r.ok).most_common(5)),
    }


def smoke_table(first: RequestResult, load: dict) -> Table:
    def value(v: object, unit: str = "") -> str:
        return "-" if v is None else f"{v}{unit}"

    rows = [
        ["first completion", "ok" if first.ok else "FAILED", first.error or repr(first.text[:80])],
        ["  time to first token", value(_ms(first.ttft_s), " ms"), ""],
        ["  tokens, tokens/s", f"{first.tokens}, {value(first.tokens_per_s and round(first.tokens_per_s, 1))}", ""],
    ]
    if not first.ok:
        # No load follows a failed first completion: "errors 0" beside "FAILED" would read as a clean run.
        rows.append(["load", "not sent", "the first completion failed"])
        return render.table(None, ["smoke", "value", "detail"], rows)
    rows += [
        ["load: requests ok/sent", f"{load['ok']}/{load['requests']}", f"concurrency {load['concurrency']}"],
        ["  wall time", value(load["wall_s"], " s"), ""],
        [
            "  time to first token",
            value(load["ttft_ms"]["p50"], " ms") + " p50",
            f"p95 {value(load['ttft_ms']['p95'], ' ms')}, max {value(load['ttft_ms']['max'], ' ms')}",
        ],
        [
            "  latency",
            value(load["latency_ms"]["p50"], " ms") + " p50",
            f"p95 {value(load['latency_ms']['p95'], ' ms')}",
        ],
        ["  tokens/s (all requests)", value(load["tokens_per_s"]), f"{load['completion_tokens']} completion tokens"],
        ["  tokens/s (per request)", value(load["tokens_per_s_per_request"]), "mean of tokens / latency"],
        ["  errors", str(load["errors"]), "; ".join(f"{n}x {m}" for m, n in load["error_messages"].items())],
    ]
    return render.table(None, ["smoke", "value", "detail"], rows)


def run_load(
    endpoint: str, model: str, api_key: str | None, args: argparse.Namespace, update: Callable[[str], None]
) -> tuple[list[RequestResult], float]:
    """`args.requests` requests over `args.concurrency` connections; none starts after `args.duration`."""
    results: list[RequestResult] = []
    lock = threading.Lock()
    tickets = iter(range(args.requests))
    start = time.monotonic()
    deadline = start + args.duration

    def client() -> None:
        while time.monotonic() < deadline:
            with lock:
                n = next(tickets, None)
            if n is None:
                return
            result = chat_request(endpoint, model, api_key, LOAD_PROMPT.format(n=n), args.max_tokens, args.timeout)
            with lock:
                results.append(result)
                update(f"smoke: {len(results)}/{args.requests} requests done")

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for _ in range(args.concurrency):
            pool.submit(client)
    return results, time.monotonic() - start


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", help="API base URL (default: the plan's, http://HEAD:PORT)")
    parser.add_argument("--requests", type=int, default=8, help="requests in the load (8)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests at once (4)")
    parser.add_argument("--max-tokens", type=int, default=64, help="completion tokens per request (64)")
    parser.add_argument("--duration", type=float, default=60.0, help="no request starts after this many seconds (60)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request (120)")


def run(pulumi: PulumiCli, plan: DeploymentPlan, args: argparse.Namespace) -> int:
    if not args.endpoint and ipaddress.ip_address(plan.api_host).is_loopback:
        head = plan.head.ssh
        # Pinned as every ssh of ours (the stack's key and hostKey): a bare `ssh` would trust whatever answers.
        forward = f"{plan.port}:{plan.api_address}:{plan.port}"
        tunnel = ["ssh", "-N", "-L", forward, *ssh_option_words(head), "-p", str(head.port), f"{head.user}@{head.host}"]
        sys.stderr.write(
            f"spark-llm smoke: spark-llm:engine.host is {plan.api_host}: the API answers on the head only."
            f" Open a tunnel (`{shlex.join(tunnel)}`) and run again with --endpoint http://127.0.0.1:{plan.port}\n"
        )
        return 2
    endpoint = (args.endpoint or plan.endpoint).rstrip("/")
    api_key = plan.api_key
    with render.progress(f"smoke: one completion from {endpoint}", enabled=not args.json) as update:
        first = chat_request(endpoint, plan.model_name, api_key, FIRST_PROMPT, args.max_tokens, args.timeout)
        update(f"smoke: {args.requests} requests, {args.concurrency} at once")
        results, wall = run_load(endpoint, plan.model_name, api_key, args, update) if first.ok else ([], 0.0)
    load = summarize(results, wall, args.concurrency)
    ok = first.ok and load["errors"] == 0 and load["ok"] > 0
    if args.json:
        render.emit_json(
            {
                "ok": ok,
                "endpoint": endpoint,
                "model": plan.model_name,
                "first": asdict(first),
                "load": load if first.ok else None,  # not sent: the first completion failed
            }
        )
    else:
        out = render.console()
        out.print(f"smoke: {plan.model_name} at {endpoint}")
        out.print(smoke_table(first, load))
        if not first.ok:
            out.print("the first completion failed: no load was sent; see `spark-llm status` and `spark-llm logs`")
    return 0 if ok else 1
