"""Pure: what the readiness gate reads on stdin (spark_llm.ops.readiness_gate), typed: one writer (`readiness_spec`,
which components.engine_group hands the gate step), one reader (`parse_spec`)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.host_record import host_probe
from spark_llm.plan.stdin_spec import spec_json, spec_object


class GateMember(TypedDict):
    name: str
    role: str
    connection: dict
    """How this machine reaches it (spark_llm.plan.hosts.SshHost.to_props)."""
    script_path: str
    fabric_address: str
    """With Ray a worker's error shows up in the head's log under the worker's fabric address."""


class Rollout(TypedDict):
    on_failure: str
    """spark-llm:rollout.onFailure: print the rollback command (stop) or run it (rollback)."""
    stack: str


class FabricSpec(TypedDict):
    roce_devices: list[str]
    """spark-llm:network.roceDevices: what each rank's NCCL must say it uses (spark_llm.plan.fabric_proof)."""
    on_fallback: str
    """spark-llm:network.fabricProof: `fail` the start or `warn`."""


class ReadinessSpec(TypedDict):
    members: list[GateMember]
    address: str
    """Where the head itself reaches its API."""
    port: int
    model: str
    timeout: float
    api_key: str
    """spark-llm:apiKey ("" without one): the gate's stdin is a secret then."""
    profile: str
    """The engine profile: which log lines mark its start phases."""
    container: str
    revision: str
    stall_seconds: float | None
    rendezvous_seconds: float
    """How long the engine itself waits for its group (spark_llm.plan.start.rendezvous): the waiting phases' stall
    bounds stay below it."""
    rendezvous_source: str
    weights_path: str
    """spark-llm:model.path: at a start that serves, its manifest digest is recorded and the versions every node
    kept for a rollback are dropped (scripts/manifest.py keep)."""
    history_path: str
    rollout: Rollout
    host_probe: NotRequired[str]
    """Read-only bash printing a node's host fields (spark_llm.plan.host_record.host_probe): recorded at a start
    that served, compared with the last record at a failed one."""
    keep_versions: NotRequired[bool]
    """A rollback's start (it pins a kept version: DeploymentPlan.restore_weights): the versions every node kept stay
    when it serves, so a second rollback still finds the good one; only a newer start that serves drops them."""
    wedge_seconds: NotRequired[float]
    """spark-llm:supervisor.wedgeSeconds: rank 0 live (or having answered once) yet answering nothing this long fails
    the start as wedged (spark_llm.group.wedge). Absent from a spec written before the gate watched for wedges."""
    probation_seconds: NotRequired[float]
    """spark-llm:rollout.probationSeconds, when set: after rank 0's first answer the gate keeps watching this long,
    and a member that stops or a wedge within it fails the start (spark_llm.remote.after_answer.probation)."""
    fabric: NotRequired[FabricSpec]
    """Only with roceDevices and more than one node (without them NCCL's sockets are what was asked for)."""


def readiness_spec(plan: DeploymentPlan, stack: str = "") -> ReadinessSpec:
    """What the gate reads (`stack`: this stack's name, for the rollback command)."""
    spec: ReadinessSpec = {
        "members": [
            {
                "name": n.name,
                "role": n.role,
                "connection": n.ssh.to_props(),
                "script_path": n.script_path,
                "fabric_address": n.fabric_address,
            }
            for n in plan.nodes
        ],
        "address": plan.api_address,
        "port": plan.port,
        "model": plan.model_name,
        "timeout": plan.ready_timeout,
        "api_key": plan.api_key or "",
        "profile": plan.profile,
        "container": plan.container,
        "revision": plan.group_revision,
        "stall_seconds": plan.stall_seconds,
        "rendezvous_seconds": plan.rendezvous[0],
        "rendezvous_source": plan.rendezvous[1],
        "weights_path": plan.model_path,
        "history_path": plan.history_path,
        "rollout": {"on_failure": plan.on_failure, "stack": stack},
        "wedge_seconds": plan.wedge_seconds,
    }
    spec["host_probe"] = host_probe(plan)
    if plan.restore_weights:
        spec["keep_versions"] = True
    if plan.probation_seconds:
        # Only when set: the gate's spec (its step's identity) of a stack without it stays what it was.
        spec["probation_seconds"] = plan.probation_seconds
    if plan.roce_devices and len(plan.nodes) > 1:
        spec["fabric"] = {"roce_devices": list(plan.roce_devices), "on_fallback": plan.fabric_proof}
    return spec


def spec_text(spec: ReadinessSpec) -> str:
    """The one way the spec is written (spark_llm.plan.stdin_spec)."""
    return spec_json(spec)


def parse_spec(text: str) -> ReadinessSpec:
    """The gate's stdin -> the spec."""
    return spec_object(text, "the readiness gate")  # type: ignore[return-value]
