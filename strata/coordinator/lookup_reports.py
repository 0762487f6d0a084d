"""The lookup state each node last reported (after each of its polls), by tier and node: what the
coordinator's `/lookups/status` and `/lookups/nodeStatus` answer from. A node silent for
`REPORT_TTL_S` has left its tier's status."""

from __future__ import annotations

import time
from typing import Any

REPORT_TTL_S = 60.0  # a node silent for this long has left its tier's status


class LookupReports:
    """The last LookupsState each node reported, by (tier, host:port)."""

    def __init__(self, ttl_s: float = REPORT_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._states: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}

    def put(self, tier: str, node: str, state: dict[str, Any]) -> None:
        self._states = {k: v for k, v in self._states.items() if k[1] != node}  # a node serves one tier
        self._states[(tier, node)] = (time.monotonic(), state)

    def nodes(self, tier: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        now = time.monotonic()
        self._states = {k: v for k, v in self._states.items() if now - v[0] <= self.ttl_s}
        return {k: s for k, (_, s) in self._states.items() if tier is None or k[0] == tier}

    def tiers(self) -> set[str]:
        return {tier for tier, _ in self.nodes()}
