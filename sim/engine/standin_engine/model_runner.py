"""Stand-in for SGLang's ModelRunner.init_torch_distributed: where the ranks meet, and where the crash knob fires."""

from __future__ import annotations

import os

from standin_engine.knobs import FailureKnobs
from standin_engine.launch_config import LaunchConfig
from standin_engine.logs import EngineLog
from standin_engine.nccl import nccl_lines
from standin_engine.rendezvous import ProcessGroup, process_group


def init_torch_distributed(config: LaunchConfig, knobs: FailureKnobs, log: EngineLog) -> ProcessGroup:
    """Form this node's process group over TCP; raise as a real rank does when its distributed init fails."""
    crash = knobs.claim_crash_at_init(config.node_rank)
    if crash is not None:
        raise RuntimeError(
            f"[spark-llm stand-in] simulated crash of node rank {config.node_rank} in init_torch_distributed: {crash}"
        )
    group = process_group(config, log)
    group.form_group()
    # NCCL's first communicator over the group: its transport lines (with NCCL_DEBUG=INFO), as a real rank's.
    lines, why = nccl_lines(config, os.environ)
    if why:
        log.scheduler(f"Stand-in: NCCL finds no RDMA device: {why}")
    for line in lines:
        log.raw(line)
    return group
