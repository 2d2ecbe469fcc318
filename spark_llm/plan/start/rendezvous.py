"""Pure: how long an engine itself waits for its group to form, and the stall bounds kept below it.

A member that never arrives at the rendezvous makes the others wait until the engine's own timeout, then exit with
an error about waiting (issue 31, 4: with a stall bound above that timeout the gate never named the hung worker, and
the error blamed the head that died of waiting). The engines' timeouts, from their sources and flag catalogs
(spark_llm/config/engine_catalogs):
- SGLang 0.5.5, 0.5.17, 0.5.23: `--dist-timeout` (seconds), default None: torch.distributed's own default.
- vLLM 0.33: `--distributed-timeout-seconds`, default None; 0.11 and 0.16 have no flag: torch's default.
- torch.distributed: ProcessGroupNCCL's default timeout is 10 minutes since torch 2.2 (pytorch/pytorch#110947;
  other backends keep 30 minutes), and the TCP rendezvous of init_process_group waits as long.
So 600 s unless the flag says otherwise. The phases that wait on every member (distributed init, and the KV-cache
profile's first collectives) get a stall bound of at most half of it: the hung member is named while the others
still wait, whatever the learned or default bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_llm.group.flags import flag_values

TORCH_NCCL_TIMEOUT_SECONDS = 600.0
TIMEOUT_FLAGS = {"sglang": "--dist-timeout", "vllm-native": "--distributed-timeout-seconds"}
TIMEOUT_FLAGS["vllm-ray"] = TIMEOUT_FLAGS["vllm-native"]
# Phases in which every member waits for every other: a hung one shows as the others' engine timeout.
WAITING_PHASES = ("dist_init", "kv_cache")
SHARE = 0.5
"""The part of the engine's timeout a waiting phase may stay quiet before the gate names the member it waits for."""


def rendezvous_timeout(profile: str, flags: Sequence[str]) -> tuple[float, str]:
    """Pure: (seconds, where they come from) the engine of `profile` waits for its group, given its engine flags
    (`["--dist-timeout", "60"]` or `["--dist-timeout=60"]`)."""
    flag = TIMEOUT_FLAGS.get(profile)
    for value in flag_values(flags, [flag] if flag else []):
        try:
            if float(value) > 0:
                return float(value), f"{flag} {value}"
        except ValueError:
            pass  # the flag check (spark_llm.config.flag_values) names a bad value before any start
    return TORCH_NCCL_TIMEOUT_SECONDS, "torch.distributed's NCCL default"


def capped_bound(phase: str, bound: float, rendezvous_seconds: float | None) -> float:
    """Pure: `bound` for `phase`, below the engine's own timeout when every member waits in that phase."""
    if rendezvous_seconds and phase in WAITING_PHASES:
        return min(bound, rendezvous_seconds * SHARE)
    return bound
