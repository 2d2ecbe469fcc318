"""The operator's Prometheus client (spark_llm.ops.prometheus) against a real Prometheus with a web config on
loopback (Debian's, tools/system-deps.sh): the right password reads, a wrong one is one sentence naming the key and
what to do, a Prometheus that is not there is one sentence too; `spark-llm status`'s alerts line says either."""

from __future__ import annotations

import importlib
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_llm.ops.prometheus import Prometheus, PrometheusError
from spark_llm.ops.status.alerts import AlertsStatus
from tests.unit.sim.standin_group import free_port, http_get, wait_until

PASSWORD = "client-test-password"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus with basic auth (user spark-llm, PASSWORD's bcrypt hash, as the head's web config holds it)."""
    directory = tmp_path_factory.mktemp("prometheus")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (crypt: what the head's python3 hashes with)
        crypt = importlib.import_module("crypt")
        hashed = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    (directory / "web.yml").write_text(f'basic_auth_users:\n  spark-llm: "{hashed}"\n')
    (directory / "prometheus.yml").write_text("global: {scrape_interval: 15s}\n")
    port = free_port()
    argv = [
        "prometheus",
        f"--config.file={directory / 'prometheus.yml'}",
        f"--web.config.file={directory / 'web.yml'}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with (directory / "log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(f"{url}/-/ready")[0] in (200, 401), "Prometheus to listen")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_stacks_password_reads_and_no_password_is_refused(guarded: str) -> None:
    assert Prometheus(guarded, PASSWORD).query("vector(1)")[0].value == 1.0
    assert Prometheus(guarded, PASSWORD).alerts() == []
    assert http_get(f"{guarded}/api/v1/query?query=up")[0] == 401


def test_a_wrong_password_is_one_sentence_naming_the_key(guarded: str) -> None:
    with pytest.raises(PrometheusError) as refused:
        Prometheus(guarded, "not-it").alerts()
    assert str(refused.value) == (
        f"Prometheus at {guarded} refused spark-llm:monitoringPassword (HTTP 401): the head has another password's"
        " hash; `pulumi up` writes this one's"
    )


def test_a_prometheus_that_is_not_there_is_one_sentence_saying_what_to_do(tmp_path: Path) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PrometheusError) as refused:
        Prometheus(gone, PASSWORD, timeout=2).alerts()
    assert str(refused.value).startswith(f"Prometheus at {gone} did not answer (")
    assert str(refused.value).endswith("`pulumi up` starts it; `spark-llm status` says whether the head is up")
    # status says so in its alerts line, and judges nothing by it
    said = AlertsStatus((), str(refused.value))
    assert said.lines() == [f"alerts: unknown: {refused.value}"] and said.firing == ()
