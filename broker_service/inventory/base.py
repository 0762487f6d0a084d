"""The interface every segment inventory implements.

An inventory feeds server and segment add/remove events into a `BrokerServerView`, always on the
event loop thread. It never empties the view because its source is unreachable: the last known
view keeps serving (queries then rely on retries), and the outage shows in `status()`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class InventoryStatus:
    kind: str
    connected: bool = False
    initialized: bool = False  # a first complete view has been loaded
    last_error: str | None = None
    outages: int = 0
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "connected": self.connected,
            "initialized": self.initialized,
            "lastError": self.last_error,
            "outages": self.outages,
            "nodes": self.nodes,
        }


class ServerInventory(ABC):
    @abstractmethod
    async def start(self) -> None:
        """Begin following the source; returns once watching started (not necessarily synced)."""

    @abstractmethod
    async def stop(self) -> None: ...

    @abstractmethod
    def status(self) -> InventoryStatus: ...

    async def wait_initialized(self, within_s: float) -> bool:
        """Wait until a first full view is loaded (for readiness); False on timeout."""
        import asyncio

        deadline = asyncio.get_running_loop().time() + within_s
        while not self.status().initialized:
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True
