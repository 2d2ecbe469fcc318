"""Start the router (smg, the Shepherd Model Gateway) with its API key read from a file, never from the command line,
and keep the engines of a workers file registered with it.

smg takes its key only as `--api-key KEY`, and a command line is readable by every user of the host (`ps`, /proc)
and recorded by `docker inspect`. This launcher takes smg's own flags, refuses `--api-key`, reads the key from the
file named by SPARK_LLM_ROUTER_API_KEY_FILE (a mounted file, mode 0400 on the host) and hands it to smg's own parser
result, so the key reaches the gateway's memory only.

smg keeps its engines ("workers") in memory only. With SPARK_LLM_ROUTER_WORKERS_FILE set (a JSON list of
{"model": NAME, "url": URL}, spark_llm.plan.router), a process forked before smg starts keeps smg's registrations as
the file says, reading the file every second: an engine of the file is registered (POST /workers) as soon as it
answers, one filed under another model's name (smg 1.13.0 files a vLLM engine under `unknown` in about one
registration of five: bench/router_rig.py; a renamed model) is removed and registered again, and one the file no
longer has is removed (DELETE /workers/ID). So a model added, removed or renamed by `pulumi up` (which rewrites the
file in the mounted directory) changes the running router's list with no restart, and a restarted router container
registers its engines by itself. A process, not a thread: smg's server runs inside its Rust extension, which need
not give Python's lock back.

Usage (in the router image):
  spark-llm-router SMG-FLAGS...                       e.g. --host 0.0.0.0 --port 4000
  spark-llm-router --wait-ready SECONDS --port PORT   exit 0 once smg lists the models of the workers file, each under
                                                      its own name, healthy, and no other; 1 with what differs when
                                                      SECONDS pass
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

KEY_FILE_VARIABLE = "SPARK_LLM_ROUTER_API_KEY_FILE"
WORKERS_FILE_VARIABLE = "SPARK_LLM_ROUTER_WORKERS_FILE"
# How often the registering process reads the workers file, and asks smg while something is not as the file says;
# at rest it asks smg every REST_SECONDS (only a restarted smg or a hand's DELETE changes its list then).
CHECK_SECONDS = 1.0
REST_SECONDS = 10.0
# A registration smg accepted (202) is not posted again for this long while its entry does not show yet: smg adds it
# once its own probe of the engine answered, a moment later. An engine is only posted once it answers (`answers`),
# so a registration that fails is rare and retried soon.
PENDING_SECONDS = 5.0
# A removal smg accepted (202) is not asked again for this long while the entry still shows: smg drains an engine
# before it drops it (5.0 s measured each time, bench/router_rig.py), and a removal asked again meanwhile was carried
# out after the engine's registration under its new name, and took that away (a renamed model answered 404 on and off).
REMOVING_SECONDS = 30.0
# How long the registering process waits for an engine's answer (any HTTP status) before it counts as not there yet.
ANSWER_TIMEOUT_SECONDS = 2.0


class WorkersFileError(Exception):
    """The workers file cannot be read or is not a list of {"model": NAME, "url": URL}."""


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


def read_workers(path: str) -> list[tuple[str, str]]:
    """(model, url) of each engine in the workers file at `path`; WorkersFileError saying what is wrong."""
    try:
        entries = json.loads(Path(path).read_text())
        return [(str(entry["model"]), str(entry["url"])) for entry in entries]
    except OSError as error:
        raise WorkersFileError(f"{WORKERS_FILE_VARIABLE}={path}: cannot read it ({error.strerror})") from None
    except (ValueError, KeyError, TypeError) as error:
        raise WorkersFileError(
            f'{WORKERS_FILE_VARIABLE}={path}: not a list of {{"model": NAME, "url": URL}} ({error})'
        ) from None


def wanted_workers() -> list[tuple[str, str]]:
    """The workers file's engines at start ([] when WORKERS_FILE_VARIABLE is unset or the file is not there yet: the
    registering process takes it on when it comes); exits 2 when the file is there and not a list of models."""
    path = os.environ.get(WORKERS_FILE_VARIABLE, "")
    if not path or not Path(path).exists():
        return []
    try:
        return read_workers(path)
    except WorkersFileError as error:
        fail(str(error))
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


def answers(url: str) -> bool:
    """Whether the engine at `url` is ready to be registered: its /health says 2xx, as smg's own probe at
    registration asks (a refusal for want of a key counts too: smg's probe sends the key). smg retries a
    registration whose probe failed only after 30 s: posted while the engine still loads (/health 503), a model
    brought back by the supervisor after a head's reboot answered through the router 30 s after it served."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=ANSWER_TIMEOUT_SECONDS):
            return True
    except urllib.error.HTTPError as error:
        return error.code in (401, 403)
    except OSError:
        return False


def misfiled(wanted: list[tuple[str, str]], entries: list[dict] | None) -> list[str]:
    """What is not as the workers file says, one phrase each: a model smg lacks, files under another name or finds
    unhealthy, and an engine smg lists that the file does not (a model removed from the stack)."""
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
    urls = {url for _, url in wanted}
    out += [
        f"{entry.get('model_id')} ({entry.get('url')}) still registered, not in the workers file"
        for entry in entries
        if entry.get("url") not in urls
    ]
    return out


def changes(
    wanted: list[tuple[str, str]],
    entries: list[dict],
    posted: dict[str, float],
    removing: dict[str, float],
    now: float,
    answering: Callable[[str], bool],
) -> list[tuple[str, str, str]]:
    """What makes smg's entries the workers file's: ("remove", entry id, why) for an entry the file does not have or
    filed under another model (smg 1.13.0 files a vLLM engine under `unknown` now and then; a renamed model keeps
    its URL), unless smg accepted its removal less than REMOVING_SECONDS ago (`removing`: entry id -> when); and
    ("register", model, url) for each engine of the file smg lists at no entry that answers, unless smg accepted its
    registration less than PENDING_SECONDS ago (`posted`: url -> when)."""
    models = {url: model for model, url in wanted}
    out: list[tuple[str, str, str]] = []
    for entry in entries:
        url, filed = entry.get("url"), entry.get("model_id")
        if now - removing.get(str(entry["id"]), -REMOVING_SECONDS) < REMOVING_SECONDS:
            continue  # draining: its removal is under way
        if url not in models:
            out.append(("remove", str(entry["id"]), f"{filed} ({url}) is no longer in the workers file"))
        elif filed != models[url]:
            out.append(
                ("remove", str(entry["id"]), f"{url} was filed under {filed!r}: registering it as {models[url]}")
            )
    listed = {entry.get("url") for entry in entries}
    for model, url in wanted:
        if url in listed or now - posted.get(url, -PENDING_SECONDS) < PENDING_SECONDS:
            continue
        if answering(url):
            out.append(("register", model, url))
    return out


def keep_registered(gateway: Gateway, path: str, wanted: list[tuple[str, str]], parent: int) -> None:
    """Keep smg's registrations as the workers file at `path` says, reading the file every CHECK_SECONDS, until the
    parent (smg) ends. A file that is missing or unreadable for a while (a `pulumi up` deletes the old one just before
    it writes the new) leaves the registrations as they are."""
    posted: dict[str, float] = {}  # url -> when smg accepted its registration
    removing: dict[str, float] = {}  # entry id -> when smg accepted its removal
    said_file = ""
    in_sync_at = -REST_SECONDS
    while os.getppid() == parent:
        try:
            now_wanted = read_workers(path)
            said_file = ""
        except WorkersFileError as error:
            now_wanted = wanted
            if str(error) != said_file:
                print(f"spark-llm-router: {error}; keeping the engines registered as they are", flush=True)
                said_file = str(error)
        file_changed, wanted = now_wanted != wanted, now_wanted
        if not file_changed and time.monotonic() - in_sync_at < REST_SECONDS:
            time.sleep(CHECK_SECONDS)
            continue
        entries = gateway.entries()
        if entries is None:
            time.sleep(CHECK_SECONDS)
            continue
        for action, first, second in changes(wanted, entries, posted, removing, time.monotonic(), answers):
            try:
                if action == "remove":
                    status, _ = gateway.call("DELETE", f"/workers/{first}")
                    removing[first] = time.monotonic()
                    print(f"spark-llm-router: removed {second} (HTTP {status})", flush=True)
                else:
                    # The engine's own key is the stack's too: smg's probe of the engine (GET /v1/models) sends it.
                    status, _ = gateway.call(
                        "POST", "/workers", {"url": second, "model_id": first, "api_key": gateway.key}
                    )
                    posted[second] = time.monotonic()
                    print(f"spark-llm-router: registered {first} at {second} (HTTP {status})", flush=True)
            except OSError:
                pass  # smg is not answering yet: the next round tries again
        # In sync (nothing to do, each model healthy under its name): smg again only after REST_SECONDS.
        in_sync_at = time.monotonic() if not misfiled(wanted, gateway.entries()) else -REST_SECONDS
        time.sleep(CHECK_SECONDS)


def wait_ready(argv: list[str]) -> None:
    """`--wait-ready SECONDS --port PORT`: exit 0 once every wanted model is listed under its name, healthy."""
    try:
        seconds = float(argv[argv.index("--wait-ready") + 1])
        port = int(argv[argv.index("--port") + 1])
    except (ValueError, IndexError):
        fail("usage: spark-llm-router --wait-ready SECONDS --port PORT")
    gateway = Gateway(port, api_key())
    path = os.environ.get(WORKERS_FILE_VARIABLE, "")
    started = time.monotonic()
    said = started
    while True:
        try:
            wanted = read_workers(path) if path else []
            problems = misfiled(wanted, gateway.entries())
        except WorkersFileError as error:
            wanted, problems = [], [str(error)]
        waited = time.monotonic() - started
        if not problems:
            names = ", ".join(m for m, _ in wanted)
            print(f"router: every model of the workers file listed under its own name, healthy, and no other: {names}"
                  f" ({waited:.0f} s)")  # fmt: skip
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
    path = os.environ.get(WORKERS_FILE_VARIABLE, "")
    if path:
        # Forked before smg starts any thread (its Rust runtime starts them in launch_router).
        parent = os.getpid()
        if os.fork() == 0:
            keep_registered(Gateway(router_args.port, key), path, wanted, parent)
            os._exit(0)
    # smg checks this key on the serving path (a wrong or missing Bearer token answers 401) and sends it on to the
    # engines, which ignore it when they were started without a key of their own.
    router_args.api_key = key
    launch_router(router_args)


if __name__ == "__main__":
    main(sys.argv[1:])
