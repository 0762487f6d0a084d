"""What an ingestion did, for the terminal summary and for programs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from strata.ingestion.errors import ParseProblem
from timeline import DataSegment


class Progress(Protocol):
    """Receives progress; the CLI shows it as a rich progress bar, programs may ignore it."""

    def start(self, total_bytes: int) -> None: ...

    def advance(self, nbytes: int, rows: int) -> None: ...

    def phase(self, name: str) -> None: ...


class NoProgress:
    def start(self, total_bytes: int) -> None:
        pass

    def advance(self, nbytes: int, rows: int) -> None:
        pass

    def phase(self, name: str) -> None:
        pass


def human_size(n: float) -> str:
    """Bytes as B / KiB / MiB / GiB with one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@dataclass(frozen=True)
class SegmentWritten:
    segment: DataSegment
    rows: int


@dataclass
class IngestionSummary:
    data_source: str
    engine: str = "local"  # which engine ran it (local or spark)
    engine_reason: str = ""  # why, when `auto` chose it
    version: str = ""
    rows_read: int = 0  # input rows, including unparseable and thrown-away ones
    rows_ingested: int = 0  # rows stored in segments (after rollup)
    rows_rolled_up: int = 0  # input rows merged into another row by rollup
    rows_thrown_away: int = 0  # outside granularitySpec.intervals, or dropped by a row stage's WHERE
    parse_errors: int = 0
    problems: list[ParseProblem] = field(default_factory=list)
    segments: list[SegmentWritten] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "dataSource": self.data_source,
            "engine": self.engine,
            **({"engineReason": self.engine_reason} if self.engine_reason else {}),
            "version": self.version,
            "rowsRead": self.rows_read,
            "rowsIngested": self.rows_ingested,
            "rowsRolledUp": self.rows_rolled_up,
            "rowsThrownAway": self.rows_thrown_away,
            "parseErrors": self.parse_errors,
            "parseErrorExamples": [str(p) for p in self.problems[:20]],
            "segments": [
                {
                    "id": s.segment.id,
                    "interval": str(s.segment.interval),
                    "rows": s.rows,
                    "size": s.segment.size,
                }
                for s in self.segments
            ],
            "seconds": round(self.seconds, 3),
        }
