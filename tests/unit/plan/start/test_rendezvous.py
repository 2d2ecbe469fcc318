"""The engines' own wait for their group, and the stall bounds kept below it (issue 31, 4)."""

from __future__ import annotations

import pytest

from spark_llm.plan.start.rendezvous import TORCH_NCCL_TIMEOUT_SECONDS, capped_bound, rendezvous_timeout
from spark_llm.remote.start_watch import stall_bound


@pytest.mark.parametrize(
    ("profile", "flags", "expected"),
    [
        ("sglang", [], (600.0, "torch.distributed's NCCL default")),
        ("sglang", ["--mem-fraction-static", "0.8", "--dist-timeout", "60"], (60.0, "--dist-timeout 60")),
        ("sglang", ["--dist-timeout=90"], (90.0, "--dist-timeout 90")),
        ("vllm-native", ["--distributed-timeout-seconds", "120"], (120.0, "--distributed-timeout-seconds 120")),
        ("vllm-ray", ["--distributed-timeout-seconds=45"], (45.0, "--distributed-timeout-seconds 45")),
        # Another engine's flag says nothing of this one's timeout.
        ("vllm-native", ["--dist-timeout", "60"], (600.0, "torch.distributed's NCCL default")),
    ],
)
def test_the_engines_timeout_is_its_flag_or_torchs_default(profile, flags, expected):
    assert rendezvous_timeout(profile, flags) == expected


def test_torchs_nccl_default_is_ten_minutes():
    assert TORCH_NCCL_TIMEOUT_SECONDS == 600.0


def test_a_waiting_phase_is_bounded_below_the_engines_timeout_whatever_the_default_or_the_history():
    # The default distributed-init bound (600 s) used to equal torch's timeout, and the stand-in's 300 s was below it.
    assert stall_bound("sglang", "dist_init", head=False, override=None, history=[], rendezvous=600.0) == 300.0
    assert stall_bound("sglang", "dist_init", head=False, override=None, history=[], rendezvous=40.0) == 20.0
    learned = [{"dist_init": 500.0}]
    assert stall_bound("sglang", "dist_init", head=False, override=None, history=learned, rendezvous=600.0) == 300.0
    assert stall_bound("vllm-native", "kv_cache", head=True, override=None, history=[], rendezvous=100.0) == 50.0
    # Phases where no member waits for another keep their bounds; the stack's own bound is the user's word.
    assert stall_bound("sglang", "weights", head=True, override=None, history=[], rendezvous=40.0) == 1800.0
    assert stall_bound("sglang", "dist_init", head=True, override=90, history=[], rendezvous=40.0) == 90.0
    assert capped_bound("graph", 1800.0, 600.0) == 1800.0
