"""The upload from the operator's machine (model.source kind local): the pinned ssh, and its wrapper handing
rsync's ssh every option exactly."""

from __future__ import annotations

import os

from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights import sync as weights_sync
from tests.unit.plan.weights_runs import TOKEN, TOOL, build, run_bash


def test_upload_reaches_the_head_with_the_pinned_ssh_config_directly():
    cfg, p = build({"kind": "local", "path": "/tmp"})
    script = weights.render_upload(cfg, p.head, TOOL, "/tmp/model dir", TOKEN)
    assert "SRC='/tmp/model dir'" in script
    # The pinned ssh command comes from the environment (components.connection.ssh_command), not the script.
    assert 'mapfile -t SSH <<<"${SPARK_LLM_SSH:?' in script and 'REMOTE=("${SSH[@]}" "$SSH_TARGET")' in script
    assert "eval" not in script
    assert f'RSH_ARGS=(-e "$ssh_wrapper -c {weights_sync.BULK_CIPHER}")' in script and 'DEST="$SSH_TARGET:"' in script
    assert "ProxyJump" not in script and " -J " not in script and "PRIVATE KEY" not in script


def test_upload_ssh_wrapper_passes_every_pinned_option_through_to_ssh(tmp_path):
    """rsync splits -e itself: the wrapper must hand ssh each option exactly, spaces and quotes included."""
    from components.connection import ssh_command

    cfg, p = build({"kind": "local", "path": "/tmp"})
    argv = ssh_command(p.workers[0].ssh)  # the worker's: a ProxyCommand with nested quoting
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$STUB_ARGS"\n')
    (bin_dir / "ssh").chmod(0o755)
    transport = weights_sync.from_operator(p.head)
    script = transport.runner + transport.rsync + '"$ssh_wrapper" aurora@head true\n'
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        STUB_ARGS=str(tmp_path / "args"),
        SPARK_LLM_SSH="\n".join(argv),
        SPARK_LLM_SSH_TARGET="aurora@head",
    )
    run_bash(script, env)
    assert (tmp_path / "args").read_text().splitlines() == [*argv[1:], "aurora@head", "true"]
