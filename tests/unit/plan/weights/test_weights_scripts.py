"""Every rendered weights script (each model source, each step) is valid bash and shellcheck-clean; the
manifest digest line a step prints is read back; a manifest tool that would end the heredoc is refused."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from spark_llm.plan.weights import retention
from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights.fanout import fanout_sources, render_fanout
from tests.unit.plan.weights_runs import HF, TOKEN, TOOL, build

FANOUT = fanout_sources()
TOKENS = {"spark-2": "tok-2"}


def all_scripts() -> list[tuple[str, str]]:
    out = []
    for kind, source in (("huggingface", HF), ("head-same", None), ("head-other", {"kind": "head", "path": "/d/s"})):
        cfg, p = build(source, purge=True)
        out += [
            (f"{kind}/obtain", weights.render_obtain(cfg, p.head, TOOL, TOKEN)),
            (f"{kind}/head-probe", weights.render_probe(cfg, p.head, TOOL)),
            (f"{kind}/fanout", render_fanout(cfg, p.head, list(p.workers), TOOL, FANOUT, TOKENS, "weights")),
            (f"{kind}/worker-probe", weights.render_probe(cfg, p.workers[0], TOOL)),
            (f"{kind}/worker-retention", retention.render_retention(cfg, p.workers[0], TOOL)),
            (f"{kind}/head-retention", retention.render_retention(cfg, p.head, TOOL)),
            (f"{kind}/head-update", weights.head_digest_command(cfg)),
        ]
    cfg, p = build({"kind": "local", "path": "/tmp"})
    out += [("local/upload", weights.render_upload(cfg, p.head, TOOL, "/tmp/model dir", TOKEN))]
    return out


@pytest.mark.parametrize(("name", "script"), all_scripts(), ids=[n for n, _ in all_scripts()])
def test_rendered_script_is_valid_bash(name, script, tmp_path):
    path = tmp_path / "script.sh"
    path.write_text("set -euo pipefail\n" + script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck"):
        # SC2034: shared snippets (fabric_ssh_setup) define variables a check script does not use.
        lint = subprocess.run(["shellcheck", "-s", "bash", "-e", "SC2034", str(path)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout


@pytest.mark.parametrize(
    ("stdout", "digest"),
    [
        (None, ""),
        ("", ""),
        ("copy: sent\nspark-llm-manifest " + "a" * 64 + " 3 10\n", "a" * 64),
        ("spark-llm-manifest " + "a" * 64 + " 1 1\nspark-llm-manifest " + "b" * 64 + " 1 1\n", "b" * 64),
        ("weights: failed\n", ""),
    ],
)
def test_parse_digest_reads_the_last_manifest_line(stdout, digest):
    assert weights.parse_digest(stdout) == digest


def test_tool_with_the_heredoc_delimiter_is_refused():
    cfg, p = build()
    with pytest.raises(ValueError, match="delimiter"):
        weights.render_probe(cfg, p.head, "print(1)\nSPARK_LLM_MANIFEST_PY\n")
