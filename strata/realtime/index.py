"""The live state of one data source: its sinks, discovered dimensions, producers, applied lsn.

`apply` is the one way rows get in, both for committed pushes and for log replay, so a replayed
node ends in the state the acknowledged pushes left. Mutated on the event loop only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from strata.ingestion.spec import DimensionSpec
from strata.realtime.batch import decode_rows, split_by_chunk
from strata.realtime.producers import Producers
from strata.realtime.sink import Sink
from strata.realtime.spec import RealtimeSpec
from strata.realtime.wal import WalRecord
from timeline import DataSegment, Interval, format_instant, parse_instant

log = logging.getLogger(__name__)


class LiveIndex:
    def __init__(self, spec: RealtimeSpec, version_floor: str | None = None):
        self.spec = spec
        self.sinks: dict[int, Sink] = {}
        self.dimensions: list[DimensionSpec] = list(spec.dimensions.dimensions)
        self.producers = Producers()
        self.applied_lsn = 0
        self.handed_off: dict[str, int] = {}  # segments handed off (id -> bucket start): rows refused
        self.max_event_time: int | None = None
        self.rows_applied = 0
        self._versions: dict[int, str] = {}  # bucket start -> version chosen before the rows are logged
        self.registered: set[int] = set()  # buckets registered as pending segments (strata.realtime.pending)
        self._floor = parse_instant(version_floor) if version_floor else 0

    # -- buckets ------------------------------------------------------------------------------------
    def version_for(self, start: int) -> str:
        """The bucket's version: kept for its whole life (and after handoff), later than any older."""
        sink = self.sinks.get(start)
        if sink is not None:
            return sink.segment.version
        if start not in self._versions:
            now = int(datetime.now(UTC).timestamp() * 1000)
            self._floor = max(now, self._floor + 1)
            self._versions[start] = format_instant(self._floor)
        return self._versions[start]

    def segment_for(self, start: int) -> DataSegment:
        return self._segment(start, self.version_for(start))

    def rebase(self, start: int, above: str) -> None:
        """Give a bucket that holds no rows yet a version later than `above` (a compaction
        committed a newer version over its interval meanwhile)."""
        self._versions.pop(start, None)
        with contextlib.suppress(ValueError):  # a version that is no instant: later by the clock only
            self._floor = max(self._floor, parse_instant(above))

    def refuses(self, start: int) -> str | None:
        """Why rows of this bucket cannot be taken now (None: they can)."""
        sink = self.sinks.get(start)
        if sink is not None and sink.closed:
            return "its segment is being handed off"
        if sink is None and start in self.handed_off.values():
            return "its segment was already handed off"
        return None

    def _segment(self, start: int, version: str) -> DataSegment:
        interval = Interval(start, self.spec.granularity.segment.bucket_end(start))
        return DataSegment(
            data_source=self.spec.data_source,
            interval=interval,
            version=version,
            dimensions=tuple(d.name for d in self.dimensions),
            metrics=tuple(m.name for m in self.spec.metrics),
        )

    def facts(self) -> dict[str, Any]:
        return self.spec.facts(
            [
                {"name": d.name, "type": d.type, "multiValueHandling": d.multi_value_handling}
                for d in self.dimensions
            ]
        )

    def sink_for(self, start: int, version: str) -> tuple[Sink, bool]:
        sink = self.sinks.get(start)
        if sink is not None:
            return sink, False
        sink = Sink(self._segment(start, version), facts=self.facts())
        self.sinks[start] = sink
        self._versions.pop(start, None)
        self._floor = max(self._floor, parse_instant(version))
        return sink, True

    # -- rows ---------------------------------------------------------------------------------------
    def apply(self, record: WalRecord) -> tuple[list[Sink], list[Sink]]:
        """Apply one committed record; returns (sinks touched, sinks created)."""
        header = record.header
        self.applied_lsn = max(self.applied_lsn, record.lsn)
        self._merge_dimensions(header.get("dimensions") or [])
        if header.get("maxTime") is not None:
            self.max_event_time = max(self.max_event_time or header["maxTime"], header["maxTime"])
        touched, created = [], []
        if record.body:
            versions = {int(k): v for k, v in (header.get("buckets") or {}).items()}
            for start, rows in split_by_chunk(decode_rows(record.body)).items():
                version = versions.get(start) or self.version_for(start)
                if start not in self.sinks and self._segment(start, version).id in self.handed_off:
                    continue
                sink, new = self.sink_for(start, version)
                sink.add(rows)
                self.rows_applied += rows.num_rows
                touched.append(sink)
                if new:
                    created.append(sink)
        producer, seq = header.get("producer"), header.get("seq")
        if producer is not None and seq is not None:
            self.producers.applied_now(str(producer), int(seq), header.get("counts") or {})
        return touched, created

    def _merge_dimensions(self, names: Iterable[Any]) -> None:
        known = {d.name for d in self.dimensions}
        for d in names:
            dim = (
                DimensionSpec(
                    d["name"], d.get("type", "string"), d.get("multiValueHandling") or "SORTED_ARRAY"
                )
                if isinstance(d, dict)
                else DimensionSpec(d)
            )
            if dim.name not in known:
                self.dimensions.append(dim)
                known.add(dim.name)
                for sink in self.sinks.values():
                    sink.facts = self.facts()

    # -- memory -------------------------------------------------------------------------------------
    def rows_in_memory(self) -> int:
        return sum(s.rows_in_memory for s in self.sinks.values())

    def bytes_in_memory(self) -> int:
        return sum(s.bytes_in_memory for s in self.sinks.values())

    def status(self) -> dict[str, Any]:
        return {
            "dataSource": self.spec.data_source,
            "appliedLsn": self.applied_lsn,
            "rowsApplied": self.rows_applied,
            "rowsInMemory": self.rows_in_memory(),
            "bytesInMemory": self.bytes_in_memory(),
            "dimensions": [d.name for d in self.dimensions],
            "producers": len(self.producers.applied),
            "segments": [
                {
                    "id": s.segment.id,
                    "rowsInMemory": s.rows_in_memory,
                    "persistedParts": len(s.files),
                    "closed": s.closed,
                    "published": s.published,
                }
                for s in self.sinks.values()
            ],
            "handedOff": sorted(self.handed_off),
        }
