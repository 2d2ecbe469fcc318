"""`make deploy-tools` on a workstation without ssh or rsync: it names the package and the apt-get command, installs
nothing, and stops before the venv (tools/deploy-deps.sh; issue 14, item 8).

User story: an operator without root runs `make deploy-tools`; a program deploying needs is missing; they read which
package to ask for, and nothing was put on their machine in the meantime.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What the check and make themselves run: bash (the Makefile's SHELL is /bin/bash), make, env (the shebang).
BASE = ("bash", "env", "make")


def _path_with(tmp_path: Path, *programs: str) -> str:
    """A PATH of one directory holding only `programs` (links to this machine's), as on a workstation that
    lacks the others."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in (*BASE, *programs):
        # The interpreter itself, not a launcher (pyenv's shim is a script that needs more of PATH).
        found = sys._base_executable if name == "python3" else shutil.which(name)
        assert found, f"{name} is needed to run this test"
        (bin_dir / name).symlink_to(found)
    return str(bin_dir)


def _deploy_deps(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(REPO / "tools" / "deploy-deps.sh")],
        env={"PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("present", "package"),
    [
        (("python3", "ssh"), "rsync"),
        (("python3", "rsync"), "openssh-client"),
        (("ssh", "rsync"), "python3 python3-venv"),
    ],
)
def test_a_missing_program_is_named_with_the_apt_command_and_nothing_is_installed(tmp_path, present, package):
    result = _deploy_deps(_path_with(tmp_path, *present))
    assert result.returncode == 1
    assert f"missing {package} (nothing was installed)" in result.stderr, result.stderr
    assert f"sudo apt-get install {package}\n" in result.stderr, result.stderr


def test_a_workstation_with_ssh_rsync_and_python_passes_silently(tmp_path):
    result = _deploy_deps(_path_with(tmp_path, "python3", "ssh", "rsync"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_make_deploy_tools_stops_at_the_missing_rsync_before_creating_the_venv(tmp_path):
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "deploy-tools", f"VENV={venv}"],
        env={"PATH": _path_with(tmp_path, "python3", "ssh")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "sudo apt-get install rsync" in result.stderr, result.stderr
    assert not venv.exists()


def test_without_a_pulumi_cli_or_go_the_error_points_to_the_official_cli(tmp_path):
    """tools/build-pulumi.sh (make deploy-tools' CLI step) on a workstation with neither: what to install."""
    result = subprocess.run(
        ["/bin/bash", str(REPO / "tools" / "build-pulumi.sh")],
        env={"PATH": _path_with(tmp_path, "dirname"), "SPARK_LLM_CACHE": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "no pulumi >= v" in result.stderr and "Install the official Pulumi CLI" in result.stderr, result.stderr
    assert "no root, into ~/.pulumi/bin" in result.stderr, result.stderr
    assert not (tmp_path / "cache").exists()  # nothing was built or staged
