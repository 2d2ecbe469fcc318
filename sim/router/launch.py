"""Start the router (smg, the Shepherd Model Gateway) with its API key read from a file, never from the command line,
and keep the engines of a workers file registered with it.

smg takes its key only as `--api-key KEY`, and a command line is readable by every user of the host (`ps`, /proc)
and recorded by `docker inspect`. This launcher takes smg's own flags, refuses `--api-key`, reads the key from the
file named by SPARK_LLM_ROUTER_API_KEY_FILE (a mounted file, mode 0400 on the host) and hands it to smg's own parser
result, so the key reaches the gateway's memory only.

smg keeps its engines ("workers") in memory only. With SPARK_LLM_ROUTER_WORKERS_FILE set (a JSON list of
{"model": NAME, "url": URL}, spark_llm.plan.router), a process forked before smg starts registers each one
(POST /workers) once smg answers, and keeps checking GET /workers: an engine missing is registered again, one filed
under another model's name is removed and registered again (smg 1.13.0 files a vLLM engine under `unknown` in about
one registration of five: bench/router_rig.py). So a restarted router container registers its engines by itself.
A process, not a thread: smg's server runs inside its Rust extension, which need not give Python's lock back.

Usage (in the router image):
  spark-llm-router SMG-FLAGS...                       e.g. --host 0.0.0.0 --port 4000
  spark-llm-router --wait-ready SECONDS --port PORT   exit 0 once smg lists every model of the workers file under its
                                                      own name, healthy; 1 with what it lists when SECONDS pass
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

KEY_FILE_VARIABLE = "SPARK_LLM_ROUTER_API_KEY_FILE"
WORKERS_FILE_VARIABLE = "SPARK_LLM_ROUTER_WORKERS_FILE"
# How often the registering process checks smg's list: soon while something is missing, then at rest.
CHECK_SECONDS = 2.0
REST_SECONDS = 10.0
# A registration smg accepted is not posted again for this long while its entry does not show yet.
PENDING_SECONDS = 30.0


def fail(message: str) -> None:
    print(f"spark-llm-router: error: {message}", file=sys.stderr)
    sys.exit(2)


def api_key() -> str:
    """The key in the file KEY_FILE_VARIABLE names (surrounding whitespace dropped); exits 2 saying what is wrong."""
    path = os.environ.get(KEY_FILE_VARIABLE, "")
    if not path:
        fail(f"{KEY_FILE_VARIABLE} is not set: name a file holding the router's API key, e.g. /run/secrets/api-key")
    try:
        key = Path(path).read_text().strip()
    except OSError as error:
        fail(f"{KEY_FILE_VARIABLE}={path}: cannot read the API key ({error.strerror})")
    if not key:
        fail(f"{KEY_FILE_VARIABLE}={path}: the file is empty; write the router's API key into it")
    return key


def wanted_workers() -> list[tuple[str, str]]:
    """(model, url) of each engine in the file WORKERS_FILE_VARIABLE names ([] when unset); exits 2 when unreadable."""
    path = os.environ.get(WORKERS_FILE_VARIABLE, "")
    if not path:
        return []
    try:
        entries = json.loads(Path(path).read_text())
        return [(str(entry["model"]), str(entry["url"])) for entry in entries]
    except (OSError, ValueError, KeyError, TypeError) as error:
        fail(f'{WORKERS_FILE_VARIABLE}={path}: not a list of {{"model": NAME, "url": URL}} ({error})')
    return []


class Gateway:
    """smg's worker API on this host, with the key."""

    def __init__(self, port: int, key: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.key = key

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data, method=method)
        request.add_header("Authorization", f"Bearer {self.key}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
                return response.status, json.loads(text) if text.strip() else {}
        except urllib.error.HTTPError as error:
            return error.code, {}

    def entries(self) -> list[dict] | None:
        """GET /workers: smg's entries (None while it does not answer: not the same as none registered)."""
        try:
            status, listed = self.call("GET", "/workers")
        except (OSError, ValueError):
            return None
        return list(listed.get("workers", [])) if status == 200 else None


def misfiled(wanted: list[tuple[str, str]], entries: list[dict] | None) -> list[str]:
    """What is not as wanted, one phrase each: a model smg lacks, files under another name, or finds unhealthy."""
    if entries is None:
        return ["the router does not answer GET /workers yet"]
    out = []
    for model, url in wanted:
        entry = next((e for e in entries if e.get("url") == url), None)
        if entry is None:
            out.append(f"{model} ({url}) not registered")
        elif entry.get("model_id") != model:
            out.append(f"{model} ({url}) filed under {entry.get('model_id')!r}")
        elif not entry.get("is_healthy"):
            out.append(f"{model} ({url}) not healthy yet")
    return out


def keep_registered(gateway: Gateway, wanted: list[tuple[str, str]], parent: int) -> None:
    """Register each wanted engine that smg lacks, and again one filed under another model, until the parent ends."""
    posted: dict[str, float] = {}  # url -> when: smg answers 202 and adds the entry a moment later
    while os.getppid() == parent:
        entries = gateway.entries()
        if entries is None:
            time.sleep(CHECK_SECONDS)
            continue
        changed = False
        for model, url in wanted:
            entry = next((e for e in entries if e.get("url") == url), None)
            try:
                if entry is None and time.monotonic() - posted.get(url, -PENDING_SECONDS) >= PENDING_SECONDS:
                    posted[url] = time.monotonic()
                    # The engine's own key is the stack's too: smg's probe of the engine (GET /v1/models) sends it.
                    status, _ = gateway.call(
                        "POST", "/workers", {"url": url, "model_id": model, "api_key": gateway.key}
                    )
                    print(f"spark-llm-router: registered {model} at {url} (HTTP {status})", flush=True)
                    changed = True
                elif entry is not None and entry.get("model_id") != model:
                    gateway.call("DELETE", f"/workers/{entry['id']}")
                    posted.pop(url, None)  # registered again as soon as the wrong entry is gone
                    print(f"spark-llm-router: {url} was filed under {entry.get('model_id')!r}: registering it"
                          f" again as {model}", flush=True)  # fmt: skip
                    changed = True
            except OSError:
                changed = True  # smg is not answering yet: soon again
        time.sleep(CHECK_SECONDS if changed or misfiled(wanted, entries) else REST_SECONDS)


def wait_ready(argv: list[str]) -> None:
    """`--wait-ready SECONDS --port PORT`: exit 0 once every wanted model is listed under its name, healthy."""
    try:
        seconds = float(argv[argv.index("--wait-ready") + 1])
        port = int(argv[argv.index("--port") + 1])
    except (ValueError, IndexError):
        fail("usage: spark-llm-router --wait-ready SECONDS --port PORT")
    wanted = wanted_workers()
    gateway = Gateway(port, api_key())
    started = time.monotonic()
    said = started
    while True:
        problems = misfiled(wanted, gateway.entries())
        waited = time.monotonic() - started
        if not problems:
            names = ", ".join(m for m, _ in wanted)
            print(f"router: every model listed under its own name, healthy: {names} ({waited:.0f} s)")
            return
        if waited > seconds:
            print(f"router: not ready after {seconds:.0f} s: {'; '.join(problems)}", file=sys.stderr)
            sys.exit(1)
        if time.monotonic() - said >= 10:
            print(f"router: waiting ({waited:.0f} s): {'; '.join(problems)}", flush=True)
            said = time.monotonic()
        time.sleep(1)


def main(argv: list[str]) -> None:
    if any(arg == "--api-key" or arg.startswith("--api-key=") for arg in argv):
        fail(f"--api-key would put the key on the command line; put it in a file and set {KEY_FILE_VARIABLE}")
    if "--wait-ready" in argv:
        wait_ready(argv)
        return
    key = api_key()
    wanted = wanted_workers()
    # Imported after the checks: smg's import loads its 100 MB Rust extension.
    from smg.launch_router import launch_router, parse_router_args

    router_args = parse_router_args(argv)
    if wanted:
        # Forked before smg starts any thread (its Rust runtime starts them in launch_router).
        parent = os.getpid()
        if os.fork() == 0:
            keep_registered(Gateway(router_args.port, key), wanted, parent)
            os._exit(0)
    # smg checks this key on the serving path (a wrong or missing Bearer token answers 401) and sends it on to the
    # engines, which ignore it when they were started without a key of their own.
    router_args.api_key = key
    launch_router(router_args)


if __name__ == "__main__":
    main(sys.argv[1:])
