"""DruidServerMetadata: what a data server writes into its announcement znode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson


class ServerType(StrEnum):
    HISTORICAL = "historical"
    REALTIME = "realtime"
    BRIDGE = "bridge"
    INDEXER_EXECUTOR = "indexer-executor"
    BROKER = "broker"

    @classmethod
    def parse(cls, text: str) -> ServerType:
        # Druid writes lower case with dashes; Java enum names (INDEXER_EXECUTOR) appear in old data
        try:
            return cls(text.strip().lower().replace("_", "-"))
        except ValueError:
            raise ValueError(f"unknown server type {text!r}") from None


DEFAULT_TIER = "_default_tier"
# Druid's ServerType.isSegmentReplicationTarget(): only these hold immutable, published segments.
REPLICATION_TARGET_TYPES = frozenset({ServerType.HISTORICAL, ServerType.BRIDGE})


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    name: str  # host:port, also the znode name
    host: str
    type: ServerType = ServerType.HISTORICAL
    tier: str = DEFAULT_TIER
    priority: int = 0
    max_size: int = 0
    host_and_tls_port: str | None = None

    @property
    def is_historical(self) -> bool:
        """Historicals serve immutable segments: a broker prefers them and caches only their partials.
        Compared by identity first: an enum member's hash runs in Python, and a broker asks this
        of every replica it absorbs."""
        kind = self.type
        return kind is ServerType.HISTORICAL or kind is ServerType.BRIDGE or kind in REPLICATION_TARGET_TYPES

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "hostAndTlsPort": self.host_and_tls_port,
            "maxSize": self.max_size,
            "type": self.type.value,
            "tier": self.tier,
            "priority": self.priority,
        }

    def to_bytes(self) -> bytes:
        return orjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ServerMetadata:
        if not isinstance(obj, Mapping):
            raise ValueError("server metadata is not a JSON object")
        name = obj.get("name") or obj.get("host")
        if not isinstance(name, str) or not name:
            raise ValueError("server metadata lacks [name]")
        try:
            return cls(
                name=name,
                host=str(obj.get("host") or name),
                type=ServerType.parse(str(obj.get("type") or "historical")),
                tier=str(obj.get("tier") or DEFAULT_TIER),
                priority=int(obj.get("priority") or 0),
                max_size=int(obj.get("maxSize") or 0),
                host_and_tls_port=obj.get("hostAndTlsPort"),
            )
        except (TypeError, ValueError) as e:
            raise ValueError(f"bad server metadata {dict(obj)!r}: {e}") from None

    @classmethod
    def from_bytes(cls, data: bytes) -> ServerMetadata:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"server metadata is not JSON: {e}") from None
        return cls.from_json(obj)
