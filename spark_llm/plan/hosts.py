"""Pure: a node as ssh reaches it (address, user, key path, pinned host key, jump host), as the plan builds it.

spark_llm.remote.ssh runs commands on such a host; components.connection turns it into the providers'
connections. Kept here so the plan, and what reads the plan, need no I/O module for the type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SshHost:
    """One node as ssh reaches it: `host` is the address as seen from the operator, or from `via` if set."""

    name: str
    host: str
    port: int
    user: str
    key_path: str
    host_key: str
    via: SshHost | None = None

    @classmethod
    def from_props(cls, props: Mapping) -> SshHost:
        """Rebuild from the plain dict a Pulumi resource stores (see `to_props`)."""
        via = props.get("via")
        return cls(
            name=props["name"],
            host=props["host"],
            port=int(props["port"]),
            user=props["user"],
            key_path=props["key_path"],
            host_key=props["host_key"],
            via=cls.from_props(via) if via else None,
        )

    def to_props(self) -> dict:
        return {
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_path": self.key_path,
            "host_key": self.host_key,
            "via": self.via.to_props() if self.via else None,
        }

    def chain(self) -> list[SshHost]:
        """This host and every jump host before it, outermost first."""
        return (self.via.chain() if self.via else []) + [self]
