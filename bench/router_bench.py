#!/usr/bin/env python3
"""Milliseconds the router adds to a request: completions and streamed completions' time to first token, straight
to a stand-in engine and through the router (smg) in front of it, alternating, as JSON.

Usage:   . tools/env.sh && python bench/router_bench.py [--requests N]
Outputs: bench/results/router-<UTC timestamp>.json and a short table on stdout.

On this machine's docker (sim/docker-engine.sh ensure): two stand-in engine containers (models `alpha` as SGLang,
`beta` as vLLM) and the router container with an API key in front of them (bench/router_rig.py), all removed at the
end. Each round sends, for one model in turn, the same request straight to its engine and through the router, in
alternating order, on one kept-alive connection per target, as an OpenAI client's pool would: a completion
(max_tokens 16, whole response) and a streamed one (time until the first SSE `data:` chunk). The added latency is
taken per pair (router minus direct, back to back), so machine noise hits both alike. The same run checks what a
client relies on: /v1/models through the router lists both names, a wrong key gets 401, streamed chunks arrive as
SSE. Absolute numbers depend on the machine (2 shared cores here); compare within one file.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.router_rig import MODELS, RouterRig, listed_models, request, router_rig  # noqa: E402
from bench.simbench import write_result  # noqa: E402

PROMPT = "Say something about the fabric"


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile (p99 of 200 samples is the 198th smallest)."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(fraction * len(ordered)) - 1))]


def summary_ms(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50_ms": round(percentile(samples, 0.50), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
        "mean_ms": round(statistics.fmean(samples), 3),
        "min_ms": round(min(samples), 3),
        "max_ms": round(max(samples), 3),
    }


class Target:
    """One base URL on one kept-alive connection (http.client opens a new one when a response closed it)."""

    def __init__(self, url: str, key: str | None) -> None:
        self.connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def completion_ms(self, model: str) -> float:
        """A whole non-streamed completion, in ms; raises on anything but 200."""
        body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 16})
        start = time.perf_counter()
        self.connection.request("POST", "/v1/completions", body, self.headers)
        response = self.connection.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != 200:
            raise RuntimeError(f"completion answered {response.status}: {payload[:200]!r}")
        return elapsed

    def first_token_ms(self, model: str) -> tuple[float, list[bytes], str]:
        """A streamed completion: (ms until the first `data:` line, every `data:` line, the content type)."""
        body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 16, "stream": True})
        start = time.perf_counter()
        self.connection.request("POST", "/v1/completions", body, self.headers)
        response = self.connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"streamed completion answered {response.status}: {response.read()[:200]!r}")
        first = None
        chunks = []
        while line := response.readline():
            if line.startswith(b"data:"):
                if first is None:
                    first = (time.perf_counter() - start) * 1000
                chunks.append(line.strip())
        if first is None:
            raise RuntimeError("the stream ended without a data: chunk")
        return first, chunks, response.getheader("Content-Type", "")


def client_checks(rig: RouterRig) -> dict:
    """What a client relies on, through the router: both names listed, a wrong key refused, SSE passed through."""
    wrong_key = request(rig.router_url, "POST", "/v1/completions", {"model": "alpha", "prompt": "x"}, key="sk-wrong")
    no_key_models = request(rig.router_url, path="/v1/models")[0]
    _, chunks, content_type = Target(rig.router_url, rig.key).first_token_ms("beta")
    return {
        "models_listed": listed_models(rig.router_url, rig.key),
        "wrong_key_status": wrong_key[0],
        # smg answers /v1/models without a key (it checks the key on the serving and worker paths): recorded, so a
        # change in a later smg shows here.
        "models_without_key_status": no_key_models,
        "stream_content_type": content_type,
        "stream_data_chunks": len(chunks),
        "stream_ends_with_done": bool(chunks) and chunks[-1] == b"data: [DONE]",
    }


def measure(rig: RouterRig, requests: int) -> dict:
    direct = {model: Target(url, None) for model, url in rig.engine_urls.items()}
    routed = Target(rig.router_url, rig.key)
    samples: dict[str, list[float]] = {
        name: [] for name in ("completion_direct", "completion_router", "first_token_direct", "first_token_router")
    }
    added: dict[str, list[float]] = {"completion": [], "first_token": []}
    errors: dict[str, list[str]] = {name: [] for name in samples}
    for index in range(requests):
        model = MODELS[index % len(MODELS)].model
        # Which goes first alternates too, so neither always meets a warm (or a just-busy) engine.
        order = [("direct", direct[model]), ("router", routed)]
        if index % 4 >= 2:
            order.reverse()
        for kind in ("completion", "first_token"):
            pair: dict[str, float] = {}
            for where, target in order:
                name = f"{kind}_{where}"
                try:
                    pair[where] = (
                        target.completion_ms(model) if kind == "completion" else target.first_token_ms(model)[0]
                    )
                    samples[name].append(pair[where])
                except (OSError, RuntimeError, http.client.HTTPException) as error:
                    errors[name].append(f"{model}: {error}")
                    target.connection.close()
            if len(pair) == 2:
                added[kind].append(pair["router"] - pair["direct"])
    return {
        "methods": {name: {**summary_ms(values), "errors": len(errors[name])} for name, values in samples.items()},
        "added_by_router": {kind: summary_ms(values) for kind, values in added.items()},
        "error_samples": {name: messages[:5] for name, messages in errors.items() if messages},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400, help="rounds; each sends 4 requests (default 400)")
    args = ap.parse_args()
    with router_rig() as rig:
        checks = client_checks(rig)
        # A short warm-up (connections, the router's first route), not counted.
        measure(rig, 8)
        load_before = os.getloadavg()[0]
        measured = measure(rig, args.requests)
        # The machine is shared: its 1-minute load around the run says how much the p99s are the machine's.
        load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
        # What the router costs the head in memory (it will count in the head's admission), after the run.
        memory = {"router_mib": rig.memory_mib(rig.router_container)}
        memory.update({f"engine_{model}_mib": rig.memory_mib(name) for model, name in rig.engine_containers.items()})
    out = write_result(
        "router",
        {
            "router": {"name": "smg", "version": rig.router_version, "image": "sim/router/build-image.sh"},
            "engines": {standin.model: standin.engine for standin in MODELS},
            "requests_per_method": args.requests,
            "checks": checks,
            # Registrations each engine took before smg filed it under its name (RouterRig.add_worker).
            "registrations": rig.registrations,
            "memory_after_run": memory,
            "load_average_1min": load,
            **measured,
        },
    )
    print(f"router smg {rig.router_version}; checks: {json.dumps(checks)}; memory: {json.dumps(memory)}")
    for name, row in measured["methods"].items():
        p50, p99 = row.get("p50_ms", "-"), row.get("p99_ms", "-")
        print(f"  {name:20} p50 {p50:>8} ms  p99 {p99:>8} ms  errors {row['errors']}")
    for kind, row in measured["added_by_router"].items():
        print(f"  added ({kind:11})  p50 {row.get('p50_ms', '-'):>8} ms  p99 {row.get('p99_ms', '-'):>8} ms")
    print(out)


if __name__ == "__main__":
    main()
