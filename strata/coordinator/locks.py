"""Druid's time-chunk interval locks, as a pure rule: which locks may be held at once.

A task asks for locks on intervals of one data source, all or none. Locks of the same task group
always coexist (Druid shares them within a group); otherwise locks on overlapping intervals
coexist only when their types allow it (Druid's TaskLockbox):

- EXCLUSIVE shares with nothing (the default of every writing task);
- SHARED shares with SHARED;
- APPEND shares with APPEND, and with a REPLACE whose interval encloses it;
- REPLACE shares with the APPENDs it encloses, and nothing else.

So two writers that would replace the same time chunk never run side by side; appends may.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timeline import Interval

LOCK_TYPES = ("EXCLUSIVE", "SHARED", "APPEND", "REPLACE")


@dataclass(frozen=True)
class LockRequest:
    data_source: str
    intervals: tuple[Interval, ...]
    lock_type: str
    group_id: str
    priority: int

    def payloads(self, version: str) -> list[dict[str, Any]]:
        """The locks as Druid's TaskLock JSON (a time-chunk lock per interval)."""
        return [
            {
                "type": "timeChunk",
                "granularity": "timeChunk",
                "lockType": self.lock_type,
                "groupId": self.group_id,
                "dataSource": self.data_source,
                "interval": str(iv),
                "version": version,
                "priority": self.priority,
                "revoked": False,
            }
            for iv in self.intervals
        ]


def coexist(a_type: str, a_interval: Interval, b_type: str, b_interval: Interval) -> bool:
    """Whether two locks of different task groups may be held at once."""
    if not a_interval.overlaps(b_interval):
        return True
    kinds = {a_type, b_type}
    if "EXCLUSIVE" in kinds:
        return False
    if kinds in ({"SHARED"}, {"APPEND"}):
        return True
    if kinds == {"APPEND", "REPLACE"}:
        replace, append = (a_interval, b_interval) if a_type == "REPLACE" else (b_interval, a_interval)
        return replace.contains(append)
    return False


def conflicting(request: LockRequest, held: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The held locks (TaskLock JSON of other tasks on the same data source) in the request's way."""
    out = []
    for lock in held:
        if lock.get("revoked") or lock.get("groupId") == request.group_id:
            continue
        interval = Interval.parse(str(lock["interval"]))
        kind = str(lock.get("lockType", "EXCLUSIVE"))
        if any(not coexist(request.lock_type, iv, kind, interval) for iv in request.intervals):
            out.append(lock)
    return out
