"""Exactly-once per producer: a batch whose sequence number was already applied is not applied again.

As Druid's `X-Firehose-Producer-Seq`: each producer numbers its batches in increasing order; a
batch at or below the highest applied number is a retry (its acknowledgement was lost) and is
acknowledged again with the first answer's counts. A retry arriving while the first attempt is
still being written waits for that attempt and shares its outcome. The applied numbers are part
of every log record and checkpoint, so this holds across a crash.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Producers:
    applied: dict[str, int] = field(default_factory=dict)  # producer -> highest applied seq
    answers: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # last seq -> counts
    _inflight: dict[tuple[str, int], asyncio.Future[Any]] = field(default_factory=dict)

    def seen(self, producer: str, seq: int) -> bool:
        return seq <= self.applied.get(producer, -1)

    def answer(self, producer: str, seq: int) -> dict[str, Any] | None:
        last = self.answers.get(producer)
        return dict(last[1]) if last is not None and last[0] == seq else None

    def inflight(self, producer: str, seq: int) -> asyncio.Future[Any] | None:
        return self._inflight.get((producer, seq))

    def begin(self, producer: str, seq: int, future: asyncio.Future[Any]) -> None:
        self._inflight[(producer, seq)] = future

    def end(self, producer: str, seq: int) -> None:
        self._inflight.pop((producer, seq), None)

    def applied_now(self, producer: str, seq: int, counts: Mapping[str, Any]) -> None:
        if seq > self.applied.get(producer, -1):
            self.applied[producer] = seq
            self.answers[producer] = (seq, dict(counts))

    def to_json(self) -> dict[str, Any]:
        return {p: {"seq": s, "answer": self.answers.get(p, (s, {}))[1]} for p, s in self.applied.items()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Producers:
        out = cls()
        for p, entry in obj.items():
            out.applied[p] = int(entry["seq"])
            out.answers[p] = (int(entry["seq"]), dict(entry.get("answer") or {}))
        return out
