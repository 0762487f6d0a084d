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
