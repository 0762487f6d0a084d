"""The HTTP change feed's wire shapes (ChangeRequestsSnapshot, DataSegmentChangeRequest)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from timeline import DataSegment

log = logging.getLogger(__name__)

Action = Literal["load", "drop", "noop"]


@dataclass(frozen=True, slots=True)
class ChangeCounter:
    """A position in a server's change history; `hash` tells apart histories of different runs."""

    counter: int
    hash: int

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "hash": self.hash}


@dataclass(frozen=True, slots=True)
class ChangeRequest:
    action: Action
    segment: DataSegment | None = None

    def to_json(self) -> dict[str, Any]:
        if self.segment is None:
            return {"action": self.action}
        return {"action": self.action, **self.segment.to_json()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ChangeRequest | None:
        """None for actions a segment inventory ignores (`schema`, unknown), as Druid's syncer does."""
        action = obj.get("action")
        if action == "noop":
            return cls("noop")
        if action not in ("load", "drop"):
            return None
        return cls(action, DataSegment.from_json({k: v for k, v in obj.items() if k != "action"}))


@dataclass(frozen=True, slots=True)
class ChangeRequestsSnapshot:
    reset_counter: bool
    reset_cause: str | None
    counter: ChangeCounter | None
    requests: tuple[ChangeRequest, ...]

    @classmethod
    def success(cls, counter: ChangeCounter, requests: tuple[ChangeRequest, ...]) -> ChangeRequestsSnapshot:
        return cls(False, None, counter, requests)

    @classmethod
    def fail(cls, cause: str) -> ChangeRequestsSnapshot:
        return cls(True, cause, None, ())

    def to_json(self) -> dict[str, Any]:
        return {
            "resetCounter": self.reset_counter,
            "resetCause": self.reset_cause,
            "counter": self.counter.to_json() if self.counter else None,
            "requests": None if self.reset_counter else [r.to_json() for r in self.requests],
        }

    @classmethod
    def from_json(cls, obj: Any) -> ChangeRequestsSnapshot:
        if not isinstance(obj, Mapping):
            raise ValueError("change feed answer is not a JSON object")
        if obj.get("resetCounter"):
            return cls.fail(str(obj.get("resetCause") or "reset"))
        raw = obj.get("counter")
        if not isinstance(raw, Mapping) or "counter" not in raw:
            raise ValueError("change feed answer lacks [counter]")
        requests = []
        for item in obj.get("requests") or ():
            if not isinstance(item, Mapping):
                raise ValueError("change request is not a JSON object")
            request = ChangeRequest.from_json(item)
            if request is not None:
                requests.append(request)
        return cls.success(ChangeCounter(int(raw["counter"]), int(raw.get("hash") or 0)), tuple(requests))
