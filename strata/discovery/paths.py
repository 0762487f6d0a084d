"""Druid's ZooKeeper layout (ZkPathsConfig): everything hangs off one configurable base path."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ZkPaths:
    base: str = "/druid"

    def __post_init__(self) -> None:
        cleaned = "/" + self.base.strip().strip("/")
        if "//" in cleaned or cleaned == "/":
            raise ValueError(f"ZooKeeper base path must be a non-root absolute path, got {self.base!r}")
        object.__setattr__(self, "base", cleaned)

    @property
    def announcements(self) -> str:
        """Parent of the ephemeral `<host:port>` znodes holding each server's metadata."""
        return f"{self.base}/announcements"

    @property
    def segments(self) -> str:
        """Parent of the persistent per-server folders of ephemeral segment batch znodes."""
        return f"{self.base}/segments"

    def announcement(self, server: str) -> str:
        return f"{self.announcements}/{_check_name(server)}"

    def server_segments(self, server: str) -> str:
        return f"{self.segments}/{_check_name(server)}"

    def batch(self, server: str, batch_name: str) -> str:
        return f"{self.server_segments(server)}/{_check_name(batch_name)}"

    def node_role(self, role: str) -> str:
        """Parent of the ephemeral `<host:port>` znodes of one role's nodes (Druid's node discovery:
        `internal-discovery/COORDINATOR`, `.../OVERLORD`), each holding a DiscoveryDruidNode."""
        return f"{self.base}/internal-discovery/{_check_name(role)}"

    def node(self, role: str, server: str) -> str:
        return f"{self.node_role(role)}/{_check_name(server)}"


def _check_name(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a valid znode name: {name!r}")
    return name
