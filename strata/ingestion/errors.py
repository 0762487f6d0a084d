"""Errors an ingestion reports to its caller: a bad spec, too many bad rows, anything else failing."""

from __future__ import annotations

from dataclasses import dataclass


class IngestionError(RuntimeError):
    """The ingestion failed; nothing was published."""


class SpecError(IngestionError):
    """The ingestion spec is invalid or asks for something Strata does not support."""


@dataclass(frozen=True, slots=True)
class ParseProblem:
    """One unparseable input row: where it was and why."""

    source: str
    line: int  # 1-based line (row number for Parquet)
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


class TooManyParseExceptions(IngestionError):
    def __init__(self, count: int, limit: int, examples: list[ParseProblem]):
        self.count, self.limit, self.examples = count, limit, examples
        shown = "\n  ".join(str(p) for p in examples[:10])
        super().__init__(
            f"more than maxParseExceptions={limit} unparseable rows ({count} so far); nothing was published."
            f" Set tuningConfig.maxParseExceptions to allow them.\n  {shown}"
        )


class NothingToIngest(IngestionError):
    """No row left to build a segment of (all unparseable, outside the intervals, or none at all)."""


class CannotAppend(IngestionError):
    """An append whose time chunk holds segments of another granularity (Druid's
    `InsertCannotAllocateSegment`): REPLACE, or append with the existing granularity."""


class InsertTimeNull(IngestionError):
    """A row of a SQL ingestion without a timestamp (Druid's `InsertTimeNull` fault): `TIME_PARSE`
    returns null for text it cannot parse, and a row needs a time to go into a segment."""

    def __init__(self, source: str, line: int) -> None:
        super().__init__(
            f"Null timestamp (__time) encountered during INSERT or REPLACE ({source}:{line}); TIME_PARSE "
            "returns null for text it cannot parse, and COALESCE gives such rows a default time"
        )


class InsertTimeOutOfBounds(IngestionError):
    """A REPLACE produced a row outside its OVERWRITE WHERE intervals (Druid's
    `InsertTimeOutOfBounds` fault): nothing is published rather than the row dropped."""

    def __init__(self, interval: str, bounds: list[str]) -> None:
        self.interval, self.bounds = interval, bounds
        super().__init__(
            f"Inserted data contains time chunk[{interval}] outside of bounds specified by OVERWRITE "
            f"WHERE[{', '.join(bounds)}]. If you want to include this data, expand your OVERWRITE WHERE. "
            "If you do not want to include this data, use SELECT ... WHERE to filter it from your "
            "inserted data."
        )
