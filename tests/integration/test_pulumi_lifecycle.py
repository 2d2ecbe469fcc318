"""The project's own Pulumi CLI and plugins: the pinned build, the pinned providers, Pulumi's own Python language
host. (Its preview, up, second up and destroy on the sim are test_rollout.py's first and last tests: one deployment
for the story from nothing to teardown.)
"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.conftest import REPO, run

pytestmark = pytest.mark.integration


def _pinned_version() -> str:
    text = (REPO / "tools" / "versions.env").read_text()
    return re.search(r"^PULUMI_VERSION=(\S+)$", text, re.M).group(1)


def test_pulumi_cli_is_the_pinned_build():
    assert run(["pulumi", "version"]).stdout.strip() == f"v{_pinned_version()}"


def test_pulumi_lists_the_pinned_providers_and_its_own_python_language_host():
    text = (REPO / "tools" / "versions.env").read_text()
    pins = {k: re.search(rf"^{k}=(\S+)$", text, re.M).group(1) for k in ("COMMAND_VERSION", "DOCKER_VERSION")}
    plugins = json.loads(run(["pulumi", "plugin", "ls", "--json"]).stdout)
    listed = {(p["kind"], p["name"], p["version"]) for p in plugins}
    assert ("resource", "command", pins["COMMAND_VERSION"]) in listed
    assert ("resource", "docker", pins["DOCKER_VERSION"]) in listed
    about = run(["pulumi", "about"], cwd=REPO).stdout
    assert re.search(r"^language +python +3\.\d+\.\d+$", about, re.M), about
    assert re.search(r"^pulumi-command +" + re.escape(pins["COMMAND_VERSION"]) + "$", about, re.M), about
    # No file of the project speaks Pulumi's language-host protocol: the CLI runs Pulumi's own.
    assert not (REPO / "tools" / "langhost").exists()
