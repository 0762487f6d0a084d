"""A data server as the broker sees it: Druid's DruidServerMetadata announcement."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_TIER = "_default_tier"
# Druid's ServerType.isSegmentReplicationTarget(): only these hold immutable, published segments.
REPLICATION_TARGET_TYPES = frozenset({"historical", "bridge"})


@dataclass(frozen=True, slots=True)
class DataServer:
    name: str  # "host:port", the announcement's znode name
    host: str  # "host:port" to send queries to
    type: str = "historical"
    tier: str = DEFAULT_TIER
    priority: int = 0
    max_size: int = 0

    @property
    def is_historical(self) -> bool:
        """Historicals serve immutable segments: preferred for queries and the only ones cached."""
        return self.type in REPLICATION_TARGET_TYPES

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DataServer:
        """Parse DruidServerMetadata JSON (`name`, `host`, `type`, `tier`, `priority`, `maxSize`)."""
        name = obj.get("name") or obj.get("host")
        if not isinstance(name, str) or not name:
            raise ValueError("server announcement lacks [name]/[host]")
        host = obj.get("host") or name
        return cls(
            name=name,
            host=str(host),
            type=str(obj.get("type") or "historical").lower().replace("_", "-"),
            tier=str(obj.get("tier") or DEFAULT_TIER),
            priority=int(obj.get("priority") or 0),
            max_size=int(obj.get("maxSize") or 0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "hostAndTlsPort": None,
            "maxSize": self.max_size,
            "type": self.type,
            "tier": self.tier,
            "priority": self.priority,
        }
