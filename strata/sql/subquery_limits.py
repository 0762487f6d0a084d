"""What a statement's subqueries may hand the broker, in all: Druid's `maxSubqueryRows` and
`maxSubqueryBytes`.

Everything the broker materialises for a statement — the rows of every native stage a join, a
window, a set operation or an outer query reads, and of every inner statement its engine
computes — counts against one allowance per statement, as Druid's broker counts every subquery it
inlines against one accumulator. Rows past `maxSubqueryRows` (default 100,000, the broker's
`--max-subquery-rows`) or bytes past `maxSubqueryBytes` end the statement with Druid's 400
"Resource limit exceeded", naming the limit and the context key that raises it. The bytes are
those of the results as they reach the broker (JSON from native stages, or the Arrow columns a
scan stage hands the broker's engine, strata.sql.stage_tables; Arrow from the broker's engine);
the broker's own `--max-subquery-bytes` is a ceiling no context raises, as it is what keeps a
statement from taking the broker's memory. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.errors import ResourceLimitExceeded, invalid

DEFAULT_MAX_SUBQUERY_ROWS = 100_000  # Druid's maxSubqueryRows
ROWS_KEY = "maxSubqueryRows"
BYTES_KEY = "maxSubqueryBytes"
UNBOUNDED_BYTES = ("auto", "disabled", "unlimited")  # Druid's words: here, the broker's ceiling


def max_subquery_rows(context: Mapping[str, Any]) -> int:
    """The context's `maxSubqueryRows` (not positive: the default, as Druid reads it)."""
    value = context.get(ROWS_KEY, DEFAULT_MAX_SUBQUERY_ROWS)
    try:
        rows = int(value)
    except (TypeError, ValueError, OverflowError):
        raise invalid("Context parameter [%s] must be a number, got [%s]", ROWS_KEY, value) from None
    return rows if rows > 0 else DEFAULT_MAX_SUBQUERY_ROWS


def rows_exceeded(limit: int) -> ResourceLimitExceeded:
    return ResourceLimitExceeded(
        f"Cannot issue the query, subqueries generated results beyond maximum[{limit}] rows. Narrow the "
        f"subqueries (filters, a shorter interval) or raise the query context's [{ROWS_KEY}], with care: "
        "what subqueries return is held in the broker's memory"
    )


def _max_bytes(context: Mapping[str, Any], ceiling: int) -> int:
    value = context.get(BYTES_KEY)
    if value is None or (isinstance(value, str) and value.strip().lower() in UNBOUNDED_BYTES):
        return ceiling
    try:
        wanted = int(value)
    except (TypeError, ValueError, OverflowError):
        raise invalid(
            "Context parameter [%s] must be a number of bytes or one of %s, got [%s]",
            BYTES_KEY,
            ", ".join(UNBOUNDED_BYTES),
            value,
        ) from None
    return ceiling if wanted <= 0 else min(wanted, ceiling)


@dataclass
class SubqueryLimits:
    """One statement's allowance and what its subqueries have used of it so far."""

    max_rows: int
    max_bytes: int
    ceiling: int  # the broker's --max-subquery-bytes: the most any context may allow
    rows: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, context: Mapping[str, Any], ceiling: int) -> SubqueryLimits:
        return cls(max_subquery_rows(context), _max_bytes(context, ceiling), ceiling)

    def add(self, rows: int, nbytes: int) -> None:
        """Count rows and bytes handed to the broker; raises past either limit."""
        self.add_bytes(nbytes)
        self.rows += rows
        if self.rows > self.max_rows:
            raise rows_exceeded(self.max_rows)

    def add_bytes(self, nbytes: int) -> None:
        """Count bytes before they are decoded (a result too large is refused before it is held twice)."""
        self.bytes += nbytes
        if self.bytes <= self.max_bytes:
            return
        if self.max_bytes < self.ceiling:
            hint = f"raise the query context's [{BYTES_KEY}] (up to the broker's {self.ceiling})"
        else:
            hint = "this is the broker's own ceiling (its --max-subquery-bytes), which no context raises"
        raise ResourceLimitExceeded(
            f"Cannot issue the query, subqueries generated results beyond maximum[{self.max_bytes}] bytes. "
            f"Narrow the subqueries (filters, a shorter interval, fewer columns) or {hint}"
        )
