"""Druid's SQL ingestion: INSERT and REPLACE statements planned into `query_controller` tasks.

- `is_ingest(sql)`: whether a statement is an INSERT or REPLACE (the SQL API refuses them).
- `tables_of(sql)`: the data sources a statement reads (their columns must be known to plan it).
- `plan_ingest(sql, catalog, context, query_id=...)`: the task (`IngestPlan.task`) the coordinator
  runs, what it reads and writes (for authorization), and its EXPLAIN rows; Druid's 400s otherwise.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from strata.query.errors import QueryError
from strata.sql.dialect import DIALECT
from strata.sql.ingest.clauses import is_ingest, split_statement
from strata.sql.ingest.plan import IngestPlan, plan_ingest

__all__ = ["IngestPlan", "is_ingest", "plan_ingest", "tables_of"]


def tables_of(sql: str) -> list[str]:
    """The data sources the statement's SELECT names (table functions and CTEs aside); nothing for
    a statement that does not parse (planning says why)."""
    try:
        st = split_statement(sql)
        tree = sqlglot.parse_one(st.query, read=DIALECT)
    except (QueryError, SqlglotError):
        return []
    skip = {cte.alias_or_name for cte in tree.find_all(exp.CTE)} | set(st.externals)
    return sorted({t.name for t in tree.find_all(exp.Table) if t.name and t.name not in skip})
