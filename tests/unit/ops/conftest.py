"""The dual-spark plan with its fabric configured, for the ops tests of this folder."""

from __future__ import annotations

import pytest

from tests.unit.ops.node_facts import TWINS, build


@pytest.fixture
def spark_plan(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "roceDevices": TWINS, "mtu": 9000}
    return build(raw_config)
