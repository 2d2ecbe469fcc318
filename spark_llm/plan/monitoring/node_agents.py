"""Pure: what spark-llm:monitoring runs on every node, once per node whatever the number of models: the node
exporter, and a small writer of the GPU's readings for it.

- The exporter: the host's network and process namespace, the node's root read-only at /host (its /proc and /sys as
  the node sees them: memory, the weights' disk, hwmon temperatures); on the head's loopback (Prometheus is there),
  on a worker's fabric address (Prometheus reaches it over the fabric, the operator's side does not). Its textfile
  collector reads the node's `~/spark-llm/monitoring/textfile/`: the GPU writer's file on every node, and on the
  head the agent's (spark_llm.group.agent_metrics).
- The GPU writer (scripts/lib/gpu_readings.sh): every scrape interval, the node's own `nvidia-smi
  --query-gpu=power.draw,temperature.gpu,clocks.sm` (run in the node's root with chroot: the node's driver and
  libraries, nothing of them in an image; DCGM's memory fields do not work on GB10's unified memory), written as
  spark_llm.group.agent_metrics' GPU families by a rename.
  With the GPUs given to it (engine.gpus, as the engines get them), a device the container may open; a node without
  (the sim) answers from its own nvidia-smi, the sim's fake. A reading nvidia-smi does not give (`[N/A]`) is left
  out, never written as 0.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from spark_llm.config.monitoring import Monitoring
from spark_llm.group import agent_metrics as agent
from spark_llm.plan.nodes import NodePlan
from spark_llm.plan.scripts import bash_lib

EXPORTER_CONTAINER = "spark-llm-node-exporter"
GPU_CONTAINER = "spark-llm-gpu-readings"
EXPORTER_BIN = "/bin/node_exporter"
CONTAINER_ROOTFS = "/host"
GPU_FILE = "gpu.prom"
LABEL_REVISION = "spark-llm.monitoring.revision"


def _digest(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ExporterPlan:
    """One node's exporter."""

    node: str
    image: str
    listen: str
    """ADDRESS:PORT: the head's loopback, a worker's fabric address."""
    textfile_dir: str
    """The node's textfile directory: the GPU writer's file, and on the head the agent's."""

    @property
    def command(self) -> tuple[str, ...]:
        # The node's /proc and /sys as the node sees them (its own mounts over them included), not the container's.
        return (
            f"--path.rootfs={CONTAINER_ROOTFS}",
            f"--path.procfs={CONTAINER_ROOTFS}/proc",
            f"--path.sysfs={CONTAINER_ROOTFS}/sys",
            f"--web.listen-address={self.listen}",
            f"--collector.textfile.directory={agent.CONTAINER_TEXTFILE_DIR}",
        )

    @property
    def mounts(self) -> tuple[tuple[str, str], ...]:
        """(on the node, in the container), read-only: the root (rslave: a disk mounted later shows too), the
        textfile directory."""
        return (("/", CONTAINER_ROOTFS), (self.textfile_dir, agent.CONTAINER_TEXTFILE_DIR))

    @property
    def revision(self) -> str:
        return _digest({"image": self.image, "command": self.command, "mounts": self.mounts})


@dataclass(frozen=True)
class GpuWriterPlan:
    """One node's GPU writer."""

    node: str
    image: str
    textfile_dir: str
    seconds: int
    gpus: bool
    """Given the node's GPUs (docker's `--gpus all`), as its engines are (spark-llm:engine.gpus)."""
    weights: tuple[str, ...] = ()
    """The weights paths of the models on the node (spark-llm:model.path): the disk of each is read."""

    @property
    def entrypoint(self) -> tuple[str, ...]:
        """`sh -c` of scripts/lib/gpu_readings.sh's functions and its call, with its arguments: the families' names
        are agent_metrics', the one place they are spelled."""
        script = bash_lib("gpu_readings") + 'gpu_readings "$@"\n'
        arguments = (CONTAINER_ROOTFS, agent.CONTAINER_TEXTFILE_DIR, str(self.seconds))
        families = (
            agent.GPU_POWER,
            agent.GPU_TEMPERATURE,
            agent.GPU_SM_CLOCK,
            agent.WEIGHTS_DISK_FREE,
            agent.WEIGHTS_DISK_SIZE,
        )
        return ("/bin/sh", "-c", script, "gpu-readings", *arguments, *families, *self.weights)

    @property
    def mounts(self) -> tuple[tuple[str, str, bool], ...]:
        """(on the node, in the container, read-only): the root (its nvidia-smi and driver), the textfile dir."""
        return (("/", CONTAINER_ROOTFS, True), (self.textfile_dir, agent.CONTAINER_TEXTFILE_DIR, False))

    @property
    def revision(self) -> str:
        return _digest({"image": self.image, "entrypoint": self.entrypoint, "gpus": self.gpus, "mounts": self.mounts})


def exporter(node: NodePlan, monitoring: Monitoring, textfile_dir: str) -> ExporterPlan:
    host = "127.0.0.1" if node.role == "head" else node.fabric_address
    port = monitoring.node_exporter_port
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return ExporterPlan(node=node.name, image=monitoring.node_exporter_image, listen=listen, textfile_dir=textfile_dir)


def gpu_writer(
    node: NodePlan, monitoring: Monitoring, textfile_dir: str, gpus: bool, weights: tuple[str, ...] = ()
) -> GpuWriterPlan:
    return GpuWriterPlan(
        node=node.name,
        image=monitoring.node_exporter_image,
        textfile_dir=textfile_dir,
        seconds=monitoring.scrape_seconds,
        gpus=gpus,
        weights=weights,
    )
