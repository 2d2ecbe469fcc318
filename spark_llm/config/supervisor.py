"""The `supervisor` section: the container on the head that restarts each group in order after a reboot or a crash,
within a budget (components.supervisor, scripts/supervisor.py)."""

from __future__ import annotations

from pydantic import Field

from spark_llm.config.base import ConfigModel, Int


class Supervisor(ConfigModel):
    """The stack's supervisor on the head, which restarts each group in order after a reboot or a crash, and keeps the
    router up.

    On by default: a Spark's owner expects the models back after a power cut with nothing typed. Off only when the
    stack says so (`enabled: false`): then a member stopped by hand stays stopped, and `pulumi preview` reports it."""

    enabled: bool = Field(
        True,
        description=(
            "Run a supervisor container on the head that restarts each model's group in order when a member stops"
            " (a node reboot, a crash), within the budget below (each group its own), and keeps the router up"
        ),
        json_schema_extra={"example": True},
    )
    max_restarts: Int = Field(
        3,
        ge=1,
        le=100,
        description="Group restarts allowed within windowSeconds; past that the group is stopped and left stopped",
        json_schema_extra={"example": 3},
    )
    window_seconds: Int = Field(
        3600,
        ge=60,
        le=7 * 86400,
        description="The window the restarts are counted in",
        json_schema_extra={"example": 3600},
    )
    backoff_seconds: Int = Field(
        10,
        ge=0,
        le=3600,
        description="Wait before a restart that follows another within the window, doubling each time",
        json_schema_extra={"example": 10},
    )
    poll_seconds: Int = Field(
        5, ge=1, le=300, description="How often the supervisor reads every member", json_schema_extra={"example": 5}
    )
    wedge_seconds: Int = Field(
        180,
        ge=6,
        le=3600,
        description=(
            "A group whose containers all run but whose rank 0 answers no one-token completion for this long (3 probes"
            " at least; during a start, only while its /health says 200) is wedged: restarted in order within the"
            " budget. The readiness gate holds a start to it too, with or without the supervisor: a start wedged"
            " before its first answer, or after it, is a failed start (rollout.onFailure)"
        ),
        json_schema_extra={"example": 180},
    )
    image: str | None = Field(
        None,
        description="Image the supervisor runs in; it needs python3 and an ssh client (default: the engine image)",
        json_schema_extra={"example": "nvcr.io/nvidia/pytorch:25.09-py3"},
    )
