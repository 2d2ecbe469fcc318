"""The engine image head -> worker-1 on the sim: the project's step against a bare `docker save | docker load`.

`measure(on)` runs the worker's image step exactly as EngineImage renders it (spark_llm.plan.image.steps), on the
head over the sim's ssh, and returns the `image` section of bench/transfer_bench.py's result:
- full: worker-1 with no image and no layers (a first deploy): the step's time, as MB/s of the image's unpacked
  size, against `docker save REF | ssh <worker-1> docker load` run bare on the head over the same fabric ssh (no
  checks, no progress), rounds interleaved (alternating which goes first), medians;
- changed: right after the last full step (worker-1 got the image by `docker load`, so docker holds no registry
  digest for its layers), an image built on the head FROM the stand-in plus one 20 MiB layer of random bytes: the
  bytes worker-1's fabric interface received during the step (`moved_bytes`) against the layer's size.
Leaves worker-1 with the stand-in image and removes the images it built.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from collections.abc import Callable

import yaml

from bench.simbench import STACK_FILE
from spark_llm import config
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.fabric import fabric_ssh_setup
from spark_llm.plan.image import steps as image

STANDIN = "spark-llm/standin-engine:sim"
CHANGED = "spark-llm/standin-engine:bench-layer"
LAYER_BYTES = 20 * 1024 * 1024
ROUNDS = 5  # odd: the last round ends with the project's step

On = Callable[..., subprocess.CompletedProcess[str]]


def _plan(ref: str) -> plan.DeploymentPlan:
    raw = yaml.safe_load(STACK_FILE.read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("spark-llm:")}
    values["image"] = dict(values["image"], ref=ref, mode="transfer", source="head")
    return plan.build_plan(groups(config.parse(values))[0], plan.LAUNCH_TEMPLATE.read_text())


def worker_step(ref: str, head_id: str) -> str:
    """worker-1's image step for `ref`, as the EngineImage component runs it on the head."""
    step = next(s for s in image.image_steps(_plan(ref)) if s.node == "worker-1")
    return image.with_head_id(step.script, head_id)


def bare_save_load(ref: str) -> str:
    """The old way, nothing else: docker save on the head piped into docker load on worker-1, same fabric ssh."""
    p = _plan(ref)
    worker = next(w for w in p.workers if w.name == "worker-1")
    return (
        "set -euo pipefail\n"
        + fabric_ssh_setup(worker, p.config.network.fabric_key_path)
        + f'docker save {ref} | "${{FABRIC_SSH[@]}}" "$FABRIC_TARGET" docker load\n'
    )


def facts(on: On, node: str, ref: str, fmt: str) -> str:
    return on(node, f"docker image inspect --format '{fmt}' {ref}").stdout.strip()


def rx_bytes(on: On) -> int:
    return int(on("worker-1", "cat /sys/class/net/eth0/statistics/rx_bytes").stdout)


def cold_worker(on: On) -> None:
    """worker-1 without any image or layer."""
    on("worker-1", "docker rm -f spark-llm-engine >/dev/null 2>&1 || true; docker image prune -af >/dev/null")


def timed(on: On, script: str) -> tuple[float, str]:
    start = time.perf_counter()
    out = on("head", script).stdout
    return time.perf_counter() - start, out


def measure(on: On) -> dict:
    """`on(node, script)` runs a bash script on a sim node (and fails the bench if it fails)."""
    size = int(facts(on, "head", STANDIN, "{{.Size}}"))
    step = worker_step(STANDIN, facts(on, "head", STANDIN, "{{.Id}}"))
    project_s, bare_s = [], []
    for i in range(ROUNDS):
        # Alternate which goes first: the machine's load drifts (other work shares its cores).
        for method in ("bare", "project") if i % 2 == 0 else ("project", "bare"):
            cold_worker(on)
            if method == "bare":
                bare_s.append(timed(on, bare_save_load(STANDIN))[0])
                continue
            elapsed, full_out = timed(on, step)
            project_s.append(elapsed)
            assert "holds none of the image's" in full_out, full_out
    # The last round ran the project's step last: worker-1 has the stand-in by its docker load.
    # No registry digest for any of worker-1's layers (docker load): the case a registry pull would fetch whole.
    on(
        "head",
        "docker rm -f spark-llm-bench-layer >/dev/null 2>&1 || true\n"
        f"docker run --name spark-llm-bench-layer {STANDIN} sh -c 'head -c {LAYER_BYTES} /dev/urandom > /opt/new.bin'\n"
        f"docker commit spark-llm-bench-layer {CHANGED} >/dev/null && docker rm spark-llm-bench-layer >/dev/null\n",
    )
    before = rx_bytes(on)
    changed_s, changed_out = timed(on, worker_step(CHANGED, facts(on, "head", CHANGED, "{{.Id}}")))
    moved = rx_bytes(on) - before
    sent = re.search(r"worker-1: sent (\d+) bytes", changed_out)
    assert facts(on, "worker-1", CHANGED, "{{.Id}}") == facts(on, "head", CHANGED, "{{.Id}}")
    for node in ("head", "worker-1"):
        on(node, f"docker rmi {CHANGED} >/dev/null")
    full_s, save_load_s = statistics.median(project_s), statistics.median(bare_s)
    return {
        "ref": STANDIN,
        "unpacked_bytes": size,
        "full_mb_s": round(size / 1e6 / full_s, 1),
        "full_s": round(full_s, 2),
        "full_s_rounds": [round(s, 2) for s in project_s],
        "save_load_full_mb_s": round(size / 1e6 / save_load_s, 1),
        "save_load_full_s": round(save_load_s, 2),
        "save_load_full_s_rounds": [round(s, 2) for s in bare_s],
        "changed_layer_bytes": LAYER_BYTES,
        "moved_bytes": moved,
        "moved_ratio": round(moved / LAYER_BYTES, 3),
        "sent_bytes": int(sent.group(1)) if sent else None,
        "changed_s": round(changed_s, 2),
        "changed_after": "docker load (the full step's)",
        "note": "full: the project's whole step (platform check, layer query, transfer, verify) vs bare docker save |"
        " ssh docker load, rounds interleaved, medians; MB/s of the unpacked image size; moved_bytes: worker-1's"
        " fabric interface (rx) during the step; sent_bytes: the archive the step sent (dd)",
    }
