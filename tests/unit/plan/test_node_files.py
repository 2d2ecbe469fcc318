"""spark_llm.plan.node_files: the file steps' scripts and probe, run with bash on a temporary directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spark_llm.plan import node_files
from spark_llm.plan.drift import record_token_script, step_token
from spark_llm.plan.observation import parse_probe

CONTENT = "#!/bin/bash\necho launch\n"


def bash(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True)


def write(tmp_path: Path, path: Path, content: str = CONTENT) -> subprocess.CompletedProcess[str]:
    step = node_files.drift_step(str(path))
    record = record_token_script(str(tmp_path), step, "tok-1", node_files.sha256_text(content))
    return bash(node_files.file_script(str(path), content, "0755", record))


def observed(tmp_path: Path, path: Path):
    out = bash(node_files.probe([str(path)])).stdout
    tokens = {
        f.name: f.read_text().strip() for f in (tmp_path / "state").glob("*")
    }  # what spark_llm.remote.observe reads back
    seen = parse_probe("head", out)
    return type(seen)(node="head", facts=seen.facts, tokens=tokens)


def test_written_file_has_its_content_mode_and_a_token_that_stays_unchanged(tmp_path):
    path = tmp_path / "launch.sh"
    result = write(tmp_path, path)
    assert result.returncode == 0, result.stderr
    assert path.read_text() == CONTENT and oct(path.stat().st_mode & 0o777) == "0o755"
    seen = observed(tmp_path, path)
    live = node_files.live_value(seen.facts, str(path))
    assert live == node_files.sha256_text(CONTENT)
    assert step_token(seen, node_files.drift_step(str(path)), live) == ("tok-1", None)


def test_a_removed_or_edited_file_is_drift(tmp_path):
    path = tmp_path / "launch.sh"
    write(tmp_path, path)
    step = node_files.drift_step(str(path))
    path.write_text("edited by hand\n")
    seen = observed(tmp_path, path)
    token, why = step_token(seen, step, node_files.live_value(seen.facts, str(path)))
    assert token.startswith("repair-") and "now " in why
    path.unlink()
    seen = observed(tmp_path, path)
    assert node_files.live_value(seen.facts, str(path)) is None
    assert step_token(seen, step, None)[0].startswith("repair-")


def test_the_empty_directory_docker_leaves_for_a_missing_bind_file_is_replaced_by_the_file(tmp_path):
    path = tmp_path / "launch.sh"
    path.mkdir()  # what `docker run -v launch.sh:...` makes when launch.sh is missing
    (path / ".spark-llm.Ab12Cd").write_text(CONTENT)  # an older spark-llm's `mv` put its temp file in there
    assert node_files.live_value(observed(tmp_path, path).facts, str(path)) == node_files.DIRECTORY
    result = write(tmp_path, path)
    assert result.returncode == 0, result.stderr
    assert path.is_file() and path.read_text() == CONTENT


def test_a_directory_with_content_is_left_alone_with_what_to_do(tmp_path):
    path = tmp_path / "launch.sh"
    path.mkdir()
    (path / "notes.txt").write_text("keep me\n")
    result = write(tmp_path, path)
    assert result.returncode != 0
    assert f"{path} is a directory that is not empty" in result.stderr
    assert "Move it away, then run `pulumi up` again." in result.stderr
    assert (path / "notes.txt").read_text() == "keep me\n"


def test_delete_removes_the_file_and_its_token(tmp_path):
    path = tmp_path / "engine.env"
    write(tmp_path, path)
    token = tmp_path / "state" / node_files.drift_step(str(path))
    assert token.exists()
    assert bash(node_files.remove_file_command(str(path), str(tmp_path))).returncode == 0
    assert not path.exists() and not token.exists()


def test_a_directory_holding_files_is_probed_as_such(tmp_path):
    path = tmp_path / "launch.sh"
    path.mkdir()
    (path / "notes.txt").write_text("keep me\n")
    assert node_files.live_value(observed(tmp_path, path).facts, str(path)) == node_files.NONEMPTY_DIRECTORY


def test_delete_never_fails_on_a_directory_and_keeps_one_that_holds_files(tmp_path):
    empty, full = tmp_path / "launch.sh", tmp_path / "engine.env"
    empty.mkdir()
    full.mkdir()
    (full / "notes.txt").write_text("keep me\n")
    for path in (empty, full):
        result = bash(node_files.remove_file_command(str(path), str(tmp_path)))
        assert result.returncode == 0, result.stderr
    assert not empty.exists()
    assert (full / "notes.txt").read_text() == "keep me\n"
    assert f"left {full} in place" in bash(node_files.remove_file_command(str(full))).stderr


TRICKY = [
    "#!/bin/bash\necho launch\n",
    "SPARK_LLM_EOF\nSPARK_LLM_EOF_\nthe heredoc's own delimiters, as lines\n",
    "echo \"$HOME\" `id` $(touch /tmp/spark-llm-never) \\\n'quoted' \\\\ \t tab\n",
    "no final newline",
    "trailing newlines\n\n\n",
    "",
    "caf\u00e9 \u2014 non-ASCII\r\nCRLF line\r\n",
]


def test_any_content_lands_byte_for_byte_and_nothing_in_it_is_expanded(tmp_path):
    for i, content in enumerate(TRICKY):
        path = tmp_path / f"file-{i}"
        result = write(tmp_path, path, content)
        assert result.returncode == 0, (content, result.stderr)
        assert path.read_bytes() == content.encode(), content
    assert not Path("/tmp/spark-llm-never").exists()


def test_a_text_file_travels_as_its_own_lines():
    """`pulumi preview --diff` shows a changed line of the launch script as that line: the step's script holds
    the file's text, line for line (it was one base64 line, shown truncated)."""
    content = "#!/usr/bin/env bash\nset -euo pipefail\nexec python3 -m sglang.launch_server --port 30000\n"
    script = node_files.file_script("/root/spark-llm/launch.sh", content, "0755")
    assert "\n" + content + "SPARK_LLM_EOF\n" in script
    assert node_files.heredoc_delimiter("a\nSPARK_LLM_EOF\nSPARK_LLM_EOF_\n") == "SPARK_LLM_EOF__"
