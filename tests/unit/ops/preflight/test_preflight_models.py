"""`spark-llm preflight` on a stack of several models checks each model on each of its nodes (issue 40: it checked
the first model's ports, disk, image and memory and said "pass" for a second model whose port was taken).

User story: an operator adds a small second model on the head and runs `spark-llm preflight`: its port held by
another program, and a disk too small for its weights, each fail naming the second model and its own key; once both
fit, every check passes.
"""

from __future__ import annotations

from spark_llm.ops.preflight import command as preflight
from spark_llm.ops.preflight.checks import Limits
from spark_llm.ops.render import FAIL, PASS
from tests.unit.ops.node_facts import GB, LIMITS, TWINS, healthy_head, healthy_worker, ok_run
from tests.unit.ops.several_models import BIG, SMALL, two_models

# The small model's own sections on the head (spark_llm.ops.preflight.script.group_suffix): `NAME@embed`.
SMALL_FITS = {
    "disk@embed": (0, "400000000000 3900000000000 /home\n0"),
    "memory@embed": (0, "mem-info\tMemTotal=127600000 MemFree=123000000 MemAvailable=124500000\nmem-gpu\t!none"),
    "engine@embed": (0, 'engine\t{"status": "absent"}'),
    "image@embed": (0, "sha256:aaaa1111 linux/arm64"),
}


# The small model's weights: 2 GB (it shares the head with the big one's 100 GB).
SMALL_LIMITS = Limits(2 * GB, "test", 10 * GB, 1.0)


def checks(raw_config, head_sections: dict, small_limits: Limits = SMALL_LIMITS) -> dict[tuple[str, str], object]:
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "roceDevices": TWINS, "mtu": 9000}  # as the others
    stack = two_models(raw_config)
    runs = {
        "spark-1": ok_run("spark-1", healthy_head(**{**SMALL_FITS, **head_sections})),
        "spark-2": ok_run("spark-2", healthy_worker()),
    }
    limits = {BIG: LIMITS, SMALL: small_limits}
    return {(c.node, c.check): c for c in preflight.judge(stack, runs, {}, limits)}


def test_both_models_that_fit_pass_each_check_named_with_its_model(raw_config):
    got = checks(raw_config, {})
    assert {c.status for c in got.values()} == {PASS}, [c for c in got.values() if c.status != PASS]
    for check in ("disk", "memory", "ports", "image"):
        assert ("spark-1", f"{check} ({BIG})") in got and ("spark-1", f"{check} ({SMALL})") in got
    # The small model runs on the head alone: nothing of it is checked on the worker.
    assert not [key for key in got if key[0] == "spark-2" and SMALL in key[1]]
    assert ("spark-2", f"disk ({BIG})") in got and ("spark-1", "ssh") in got and ("spark-2", "fabric") in got


def test_the_second_models_taken_port_fails_naming_its_key(raw_config):
    # 30001 is the small model's engine.port; something else listens there (no engine of ours runs).
    got = checks(raw_config, {"ports": (0, "LISTEN 0 128 0.0.0.0:22 0.0.0.0:*\nLISTEN 0 4096 0.0.0.0:30001 0.0.0.0:*")})
    small = got["spark-1", f"ports ({SMALL})"]
    assert small.status == FAIL
    assert small.detail == "in use by something other than our engine: 30001 (models[1].engine.port)"
    assert small.fix.endswith("or choose other spark-llm:models[1].engine ports")
    assert got["spark-1", f"ports ({BIG})"].status == PASS


def test_the_second_models_disk_too_small_for_its_weights_fails_naming_its_key(raw_config):
    # 50 GB free where the small model's 100 GB of weights (and the 10 GB margin) go.
    small_disk = {"disk@embed": (0, "50000000000 3900000000000 /home\n0")}
    got = checks(raw_config, small_disk, Limits(100 * GB, "test", 10 * GB, 1.0))
    disk = got["spark-1", f"disk ({SMALL})"]
    assert disk.status == FAIL and "needs 100.0 GB + margin 10.0 GB" in disk.detail, disk
    assert disk.fix.endswith("or set spark-llm:models[1].path to a larger file system")
    assert got["spark-1", f"disk ({BIG})"].status == PASS
