"""The engine image head -> worker-1 on the sim: the project's step (registry on the head) against docker save | load.

`measure(on)` runs the worker's image step exactly as EngineImage renders it (spark_llm.plan.image), on the head over
the sim's ssh, and returns the `image` section of bench/transfer_bench.py's result:
- full: worker-1 with no image and no layers, the head's registry storage empty (a first deploy): the step's
  time, as MB/s of the image's unpacked size; then the same with `docker-registry` moved away on the head (the
  step's fallback, `docker save | docker load`), side by side;
- changed: an image built on the head FROM the stand-in plus one 20 MiB layer of random bytes: the bytes worker-1's
  fabric interface received during the step (`moved_bytes`) against the layer's size.
Leaves worker-1 with the stand-in image and removes the images it built.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable

import yaml

from bench.simbench import STACK_FILE
from spark_llm import config
from spark_llm.plan import deployment as plan
from spark_llm.plan import image

STANDIN = "spark-llm/standin-engine:sim"
CHANGED = "spark-llm/standin-engine:bench-layer"
LAYER_BYTES = 20 * 1024 * 1024
REGISTRY = "/usr/bin/docker-registry"

On = Callable[..., subprocess.CompletedProcess[str]]


def worker_step(ref: str, head_id: str) -> str:
    """worker-1's image step for `ref`, as the EngineImage component runs it on the head."""
    raw = yaml.safe_load(STACK_FILE.read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("spark-llm:")}
    values["image"] = dict(values["image"], ref=ref, mode="transfer", source="head")
    p = plan.build_plan(config.parse(values), plan.TEMPLATE_PATH.read_text())
    step = next(s for s in image.image_steps(p) if s.node == "worker-1")
    return image.with_head_id(step.script, head_id)


def facts(on: On, node: str, ref: str, fmt: str) -> str:
    return on(node, f"docker image inspect --format '{fmt}' {ref}").stdout.strip()


def rx_bytes(on: On) -> int:
    return int(on("worker-1", "cat /sys/class/net/eth0/statistics/rx_bytes").stdout)


def cold_worker(on: On) -> None:
    """worker-1 without any image or layer; the head's registry storage empty."""
    on("worker-1", "docker rm -f spark-llm-engine >/dev/null 2>&1 || true; docker image prune -af >/dev/null")
    on("head", "rm -rf ~/.cache/spark-llm/registry")


def timed_step(on: On, ref: str) -> tuple[float, str]:
    script = worker_step(ref, facts(on, "head", ref, "{{.Id}}"))
    start = time.perf_counter()
    out = on("head", script).stdout
    return time.perf_counter() - start, out


def measure(on: On) -> dict:
    """`on(node, script)` runs a bash script on a sim node (and fails the bench if it fails)."""
    size = int(facts(on, "head", STANDIN, "{{.Size}}"))
    cold_worker(on)
    registry_s, registry_out = timed_step(on, STANDIN)
    received = re.search(r"received (\d+) bytes", registry_out)
    cold_worker(on)
    on("head", f"mv {REGISTRY} {REGISTRY}.off")
    try:
        save_load_s, _ = timed_step(on, STANDIN)
    finally:
        on("head", f"mv {REGISTRY}.off {REGISTRY}")
    # worker-1 has the stand-in by docker load: bring it by pull, so that its layers are known by their digests.
    cold_worker(on)
    timed_step(on, STANDIN)

    on(
        "head",
        "docker rm -f spark-llm-bench-layer >/dev/null 2>&1 || true\n"
        f"docker run --name spark-llm-bench-layer {STANDIN} sh -c 'head -c {LAYER_BYTES} /dev/urandom > /opt/new.bin'\n"
        f"docker commit spark-llm-bench-layer {CHANGED} >/dev/null && docker rm spark-llm-bench-layer >/dev/null\n",
    )
    before = rx_bytes(on)
    changed_s, changed_out = timed_step(on, CHANGED)
    moved = rx_bytes(on) - before
    served = re.search(r"received (\d+) bytes", changed_out)
    for node in ("head", "worker-1"):
        on(node, f"docker rmi {CHANGED} >/dev/null")
    return {
        "ref": STANDIN,
        "unpacked_bytes": size,
        "full_mb_s": round(size / 1e6 / registry_s, 1),
        "full_s": round(registry_s, 2),
        "full_received_bytes": int(received.group(1)) if received else None,
        "save_load_full_mb_s": round(size / 1e6 / save_load_s, 1),
        "save_load_full_s": round(save_load_s, 2),
        "changed_layer_bytes": LAYER_BYTES,
        "moved_bytes": moved,
        "moved_ratio": round(moved / LAYER_BYTES, 3),
        "registry_served_bytes": int(served.group(1)) if served else None,
        "changed_s": round(changed_s, 2),
        "note": "MB/s of the unpacked image size; moved_bytes: worker-1's fabric interface (rx) during the step",
    }
