"""Another state's supervisor container holds the name `pulumi up` makes the stack's in: it goes first (issue 41, 7:
status said `pulumi up` starts the supervisor again, and `up` failed on the name)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from spark_llm.plan import supervisor

FAKE_DOCKER = """#!/bin/sh
# ps -aq --filter name=^NAME$ -> the ids in $CONTAINERS; inspect -f FMT ID -> that id's owner ($OWNER_<id>);
# rm -f ID -> recorded.
case "$1" in
  ps) for id in $CONTAINERS; do echo "$id"; done ;;
  inspect) eval "echo \\"\\${OWNER_$4:-}\\"" ;;
  rm) echo "$3" >> "$REMOVED" ;;
esac
"""


def clear(tmp_path: Path, containers: dict[str, str], state_id: str = "mine") -> tuple[list[str], str]:
    """Run the step against a fake docker holding `containers` (id -> owner label, "" for none): (removed, said)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    removed = tmp_path / "removed"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CONTAINERS": " ".join(containers),
        "REMOVED": str(removed),
        **{f"OWNER_{cid}": owner for cid, owner in containers.items()},
    }
    ran = subprocess.run(["bash", "-c", supervisor.clear_command(state_id)], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    return (removed.read_text().split() if removed.exists() else []), ran.stdout


def test_a_supervisor_another_state_made_is_removed_and_said(tmp_path):
    removed, said = clear(tmp_path, {"aaaa1111bbbb2222": "theirs"})
    assert removed == ["aaaa1111bbbb2222"]
    assert "removed supervisor aaaa1111bbbb: made by another state (owner theirs)" in said


def test_this_states_own_and_an_unlabelled_one_are_left_to_pulumi_up(tmp_path):
    removed, said = clear(tmp_path, {"cccc": "mine", "dddd": ""})
    assert removed == [] and said.strip() == "no supervisor of another state left"
