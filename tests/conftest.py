"""Shared fixtures: a valid stack config to break in tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

# Well-formed ed25519 public keys (made for tests: sha256 of "head" / "worker" as the key body).
HEAD_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ8ubTOjcX7oJjU6QEukYY0a7raHmteTa86O1fRoFJJN"
WORKER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIfrp25/MWRTQEW6ki53cPtYu9FK1zK79bpvEcxWmJ5u"
PLACEHOLDER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"


def dual_spark_raw() -> dict[str, Any]:
    """The seeds' topology: head on its management address, worker only through the head on the fabric."""
    return {
        "sshKeyPath": "~/.ssh/id_ed25519",
        "nodes": [
            {
                "name": "spark-1",
                "role": "head",
                "host": "10.1.230.180",
                "user": "aurora",
                "fabricAddress": "192.168.200.12",
                "hostKey": HEAD_KEY,
            },
            {
                "name": "spark-2",
                "role": "worker",
                "host": "192.168.200.13",
                "user": "aurora",
                "fabricAddress": "192.168.200.13",
                "via": "spark-1",
                "hostKey": WORKER_KEY,
            },
        ],
        "model": {"name": "Qwen/Qwen3.5-122B-A10B-FP8", "path": "/home/aurora/models/Qwen3.5-122B-A10B-FP8"},
        "image": {"ref": "lmsysorg/sglang:spark"},
    }


@pytest.fixture
def raw_config() -> dict[str, Any]:
    return copy.deepcopy(dual_spark_raw())
