"""Druid's SQL ingestion: INSERT and REPLACE statements planned into `query_controller` tasks.

- `is_ingest(sql)`: whether a statement is an INSERT or REPLACE (the SQL API refuses them).
- `access_of(sql)`: what it writes and reads, for authorization before planning; `tables_of(sql)`:
  the data sources a statement reads (their columns must be known to plan it).
- `plan_ingest(sql, catalog, context, query_id=...)`: the task (`IngestPlan.task`) the coordinator
  runs, what it reads and writes (for authorization), and its EXPLAIN rows; Druid's 400s otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from strata.query.errors import QueryError
from strata.sql.dialect import DIALECT
from strata.sql.ingest.clauses import is_ingest, split_statement
from strata.sql.ingest.plan import IngestPlan, plan_ingest

__all__ = ["Access", "IngestPlan", "access_of", "is_ingest", "plan_ingest", "tables_of"]


@dataclass(frozen=True)
class Access:
    """What a statement touches, known before it is planned: its target, the data sources it reads,
    whether it reads external data (a table function)."""

    target: str | None = None
    reads: tuple[str, ...] = ()
    external: bool = False


def access_of(sql: str) -> Access:
    """The statement's `Access`; empty for a statement that does not parse (planning says why)."""
    try:
        st = split_statement(sql)
        tree = sqlglot.parse_one(st.query, read=DIALECT)
    except (QueryError, SqlglotError):
        return Access()
    skip = {cte.alias_or_name for cte in tree.find_all(exp.CTE)} | set(st.externals)
    reads = sorted({t.name for t in tree.find_all(exp.Table) if t.name and t.name not in skip})
    return Access(st.target, tuple(reads), bool(st.externals))


def tables_of(sql: str) -> list[str]:
    """The data sources the statement's SELECT names (table functions and CTEs aside)."""
    return list(access_of(sql).reads)
