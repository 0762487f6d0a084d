"""What the function registry records about one Druid SQL function.

Each family module (time, strings, numeric, ...) lists its functions as `FunctionSpec`s next to
the rewrites that make DuckDB compute them, so a function's status and its code sit together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

Kind = Literal["scalar", "aggregate", "window"]


@dataclass(frozen=True)
class Context:
    """What a rewrite needs besides the node: the statement's zone and clock."""

    zone: str | None  # a zone name DuckDB and zoneinfo both know; None is UTC
    now_ms: int | None  # CURRENT_TIMESTAMP for the whole statement; None reads DuckDB's clock
    filter: str | None = None  # the FILTER (WHERE ...) condition of the aggregate being rewritten
    approximate_count_distinct: bool = False  # COUNT(DISTINCT) as an HLL estimate, as Druid's default
    has_time: bool = True  # some table read has __time (EARLIEST/LATEST order by it)
    timeless: frozenset[str] = frozenset()  # the statement's UNNEST aliases: tables with no __time


# a rewrite gets the node with its arguments already rewritten (their `.type` kept) and returns
# the DuckDB-dialect replacement
Rewrite = Callable[[exp.Expr, Context], exp.Expr]


@dataclass(frozen=True)
class FunctionSpec:
    """One function of Druid's SQL reference."""

    name: str
    kind: Kind
    family: str  # the reference's grouping: time, string, numeric, sketch, ...
    description: str
    unsupported: str | None = None  # why Strata refuses it (None: it works)
    native: bool = False  # the native planner writes it into a native query

    @property
    def status(self) -> str:
        return "supported" if self.unsupported is None else "unsupported"


def specs(
    kind: Kind,
    family: str,
    rows: dict[str, str],
    *,
    native: frozenset[str] = frozenset(),
    unsupported: dict[str, str] | None = None,
) -> list[FunctionSpec]:
    """Specs for a family: `rows` maps name -> description."""
    refused = unsupported or {}
    return [
        FunctionSpec(name, kind, family, text, refused.get(name), name in native)
        for name, text in rows.items()
    ]
