"""The `network` and `transfer` sections: the fabric between the nodes and how bulk data crosses it."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from spark_llm.config.base import (
    ConfigModel,
    Int,
    KeyedError,
)


class Network(ConfigModel):
    """The fabric between the nodes: interface names for NCCL/Gloo and the key the head uses to reach workers."""

    fabric_interfaces: list[str] = Field(
        default_factory=list,
        description="Fabric interface names, e.g. the Spark's ConnectX-7 port (NCCL/GLOO_SOCKET_IFNAME)",
        json_schema_extra={"example": ["enp1s0f0np0"]},
    )
    roce_devices: list[str] = Field(
        default_factory=list,
        description=(
            "RDMA devices for NCCL_IB_HCA (both RoCE twins of a Spark port), each ACTIVE with an address on every node"
            " (else preview and up refuse, preflight fails)"
        ),
        json_schema_extra={"example": ["rocep1s0f0", "roceP2p1s0f0"]},
    )
    fabric_key_path: str = Field(
        "~/.ssh/id_ed25519",
        description="Key on the head that logs in to the workers over the fabric (weights, images)",
        json_schema_extra={"example": "~/.ssh/id_ed25519"},
    )
    mtu: Int = Field(
        9000,
        ge=576,
        le=9216,
        description="MTU of the fabric interfaces, one on every node (else preview and up refuse, preflight fails)",
        json_schema_extra={"example": 9000},
    )

    fabric_proof: Literal["fail", "warn"] = Field(
        "fail",
        description=(
            "With roceDevices: a rank whose NCCL fell back to sockets (NET/Socket) fails the start (fail) or is"
            " only named (warn)"
        ),
        json_schema_extra={"example": "fail"},
    )
    memlock_bytes: Int = Field(
        -1,
        ge=-1,
        description=(
            "With roceDevices: the containers' memlock limit in bytes (-1: unlimited, what RDMA needs; a host that"
            " withholds CAP_SYS_RESOURCE, like the sim, cannot raise it)"
        ),
        json_schema_extra={"example": -1},
    )

    firewall: Literal["off", "fabric-only"] = Field(
        "off",
        description=(
            "fabric-only: an nftables table of spark-llm's own on each node refuses the group's ports (the rendezvous,"
            " Ray's, the random ports of torch, NCCL and Ray) on every interface but the fabric interfaces"
        ),
        json_schema_extra={"example": "fabric-only"},
    )

    @model_validator(mode="after")
    def _firewall_knows_the_fabric(self) -> Network:
        if self.firewall == "fabric-only" and not self.fabric_interfaces:
            raise KeyedError(
                "network.firewall fabric-only admits the group's ports on the fabric interfaces only: name them",
                ("fabricInterfaces",),
                ["enp1s0f0np0"],
            )
        return self

    @field_validator("fabric_interfaces", "roce_devices")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            if not re.match(r"^[A-Za-z0-9_.:-]{1,15}$", name):
                raise KeyedError(
                    f"{name!r} is not a network interface or device name (1-15 letters, digits, '_', '.', ':' or '-')",
                    (i,),
                )
        return v


class Transfer(ConfigModel):
    """How the weights cross the fabric from the head to the workers (scripts/fanout.py)."""

    streams: Int | None = Field(
        None,
        ge=1,
        le=32,
        description="Parallel rsync streams per sending and per receiving node (default: the head's cores, at most 4)",
        json_schema_extra={"example": 4},
    )
    encrypt: bool = Field(
        False,
        description=(
            "rsync over ssh from the head only (AES-GCM, slower, no worker-to-worker relay); default: rsync daemons"
            " bound to the fabric addresses with a one-time secret, data unencrypted on the direct link"
        ),
        json_schema_extra={"example": False},
    )
