"""The router's launcher (sim/router/launch.py) keeps the API key off the command line: it refuses `--api-key`, and
a missing, unreadable or empty key file stops it with an error naming SPARK_LLM_ROUTER_API_KEY_FILE, before smg is
imported; so does a workers file it cannot read. Its readiness wait (`--wait-ready`, the deployment's ready step) is
bounded and says what it waited for."""

from __future__ import annotations

import http.server
import importlib.util
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

LAUNCHER = Path(__file__).resolve().parents[3] / "sim" / "router" / "launch.py"
VARIABLE = "SPARK_LLM_ROUTER_API_KEY_FILE"


def launch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(LAUNCHER), *args], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.parametrize("flag", [["--api-key", "sk-on-argv"], ["--api-key=sk-on-argv"]])
def test_a_key_on_the_command_line_is_refused(tmp_path: Path, flag: list[str]) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-in-file\n")
    result = launch(["--port", "4000", *flag], {VARIABLE: str(key_file)})
    assert result.returncode == 2
    assert "--api-key would put the key on the command line" in result.stderr
    assert VARIABLE in result.stderr


@pytest.mark.parametrize(
    ("key_file", "says"),
    [
        (None, f"{VARIABLE} is not set"),
        ("missing", "cannot read the API key (No such file or directory)"),
        ("empty", "the file is empty"),
    ],
)
def test_without_a_key_in_a_file_the_router_does_not_start(tmp_path: Path, key_file: str | None, says: str) -> None:
    env = {}
    if key_file is not None:
        path = tmp_path / key_file
        if key_file == "empty":
            path.write_text(" \n")
        env[VARIABLE] = str(path)
    result = launch(["--port", "4000"], env)
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr


def test_waiting_for_a_router_that_never_answers_ends_at_its_bound_saying_what_it_waited_for(tmp_path: Path) -> None:
    key_file, workers = tmp_path / "key", tmp_path / "workers.json"
    key_file.write_text("sk-in-file\n")
    workers.write_text('[{"model": "alpha", "url": "http://127.0.0.1:9"}]\n')
    env = {VARIABLE: str(key_file), "SPARK_LLM_ROUTER_WORKERS_FILE": str(workers)}
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = launch(["--wait-ready", "1", "--port", str(port)], env)
    assert result.returncode == 1
    assert result.stderr == "router: not ready after 1 s: the router does not answer GET /workers yet\n"


def test_a_workers_file_that_is_not_a_list_of_models_stops_the_router_naming_its_variable(tmp_path: Path) -> None:
    key_file, workers = tmp_path / "key", tmp_path / "workers.json"
    key_file.write_text("sk-in-file\n")
    workers.write_text('{"alpha": "http://127.0.0.1:9"}\n')
    env = {VARIABLE: str(key_file), "SPARK_LLM_ROUTER_WORKERS_FILE": str(workers)}
    result = launch(["--port", "4000"], env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"spark-llm-router: error: SPARK_LLM_ROUTER_WORKERS_FILE={workers}: not a list of")
    assert "Traceback" not in result.stderr


def launcher_module():
    """sim/router/launch.py as a module (it runs as a script in the router image)."""
    spec = importlib.util.spec_from_file_location("router_launch", LAUNCHER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


A, B, C = ("a", "http://10.0.0.1:30000"), ("b", "http://10.0.0.1:30001"), ("c", "http://10.0.0.1:30002")


def entry(id_: str, model: str, url: str, healthy: bool = True) -> dict:
    return {"id": id_, "model_id": model, "url": url, "is_healthy": healthy}


@pytest.mark.parametrize(
    ("story", "wanted", "entries", "posted", "answering", "expected", "removing"),
    [
        ("in sync: nothing", [A, B], [entry("1", *A), entry("2", *B)], {}, {A[1], B[1]}, [], {}),
        ("a model added: registered", [A, B, C], [entry("1", *A), entry("2", *B)], {}, {C[1]},
         [("register", "c", C[1])], {}),
        ("a model added whose engine does not answer yet: not posted (smg would drop it)", [A, C],
         [entry("1", *A)], {}, set(), [], {}),
        ("a registration smg accepted a moment ago: not posted again", [A, C], [entry("1", *A)], {C[1]: 98.0},
         {C[1]}, [], {}),
        ("one accepted long ago that never showed: posted again", [A, C], [entry("1", *A)], {C[1]: 90.0},
         {C[1]}, [("register", "c", C[1])], {}),
        ("a model removed: its entry goes", [A], [entry("1", *A), entry("2", *B)], {}, {A[1]},
         [("remove", "2", f"b ({B[1]}) is no longer in the workers file")], {}),
        ("a model renamed (same engine URL): removed, then registered under its new name", [A, ("b2", B[1])],
         [entry("1", *A), entry("2", *B)], {}, {A[1], B[1]},
         [("remove", "2", f"{B[1]} was filed under 'b': registering it as b2")], {}),
        ("an engine filed under `unknown` (smg 1.13.0's flaw): removed", [A], [entry("1", "unknown", A[1])], {},
         {A[1]}, [("remove", "1", f"{A[1]} was filed under 'unknown': registering it as a")], {}),
        ("an engine restarting (registered, unhealthy): left registered, smg's health check brings it back",
         [A], [entry("1", *A, healthy=False)], {}, set(), [], {}),
        # Regression: smg drains an entry 5 s before it drops it; removals asked each second meanwhile were carried
        # out after the renamed model's new registration and took it away (404 on and off, on the sim).
        ("a removal under way (the entry drains): not asked again", [A, ("b2", B[1])],
         [entry("1", *A), entry("2", *B)], {}, {A[1], B[1]}, [], {"2": 95.0}),
        ("a removal asked long ago whose entry still shows: asked again", [A], [entry("1", *A), entry("2", *B)],
         {}, {A[1]}, [("remove", "2", f"b ({B[1]}) is no longer in the workers file")], {"2": 60.0}),
    ],
)  # fmt: skip
def test_the_launcher_makes_the_routers_registrations_the_workers_files(
    story: str, wanted: list, entries: list, posted: dict, answering: set, expected: list, removing: dict
) -> None:
    launch_module = launcher_module()
    got = launch_module.changes(wanted, entries, posted, removing, 100.0, lambda url: url in answering)
    assert got == expected, story


def test_the_readiness_wait_names_a_model_still_registered_that_the_file_no_longer_has() -> None:
    launch_module = launcher_module()
    problems = launch_module.misfiled([A], [entry("1", *A), entry("2", *B)])
    assert problems == [f"b ({B[1]}) still registered, not in the workers file"]


def test_a_workers_file_missing_at_start_is_waited_for_not_fatal(tmp_path: Path, monkeypatch) -> None:
    """`pulumi up` deletes the old file just before it writes the new one: a router (re)started in between starts
    smg and registers the models once the file is there."""
    monkeypatch.setenv("SPARK_LLM_ROUTER_WORKERS_FILE", str(tmp_path / "workers.json"))
    assert launcher_module().wanted_workers() == []


@pytest.mark.parametrize(
    ("status", "ready"),
    [(200, True), (503, False), (401, True), (None, False)],
    ids=["serving", "loading (503)", "refuses us for want of its key", "nothing listens"],
)
def test_an_engine_is_registered_only_once_its_health_says_it_serves(status: int | None, ready: bool) -> None:
    """smg probes an engine when it is registered and retries a failed probe only 30 s later: a model the supervisor
    brought back after a head's reboot, posted while it still loaded, answered through the router 30 s late."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(status or 500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    if status is None:
        server.server_close()  # the port, closed: nothing answers
    else:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert launcher_module().answers(url) is ready
    finally:
        if status is not None:
            server.shutdown()
            server.server_close()
