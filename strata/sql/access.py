"""What a statement reads, for authorization: every datasource and every system table, wherever
it hides (subqueries, CTEs, joins, IN (subquery), set operations, EXPLAIN).

Scope-aware, so a CTE named like a datasource is not mistaken for it, and never less than the
plain walk: a table the scopes do not resolve is required anyway unless a CTE carries its name.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot.expressions as exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from strata.query.errors import QueryError
from strata.sql.planner import parse_statement

SYSTEM_SCHEMAS = ("sys", "information_schema", "lookup")


@dataclass(frozen=True)
class TablesRead:
    datasources: frozenset[str]
    system: frozenset[tuple[str, str]]  # (schema, table), lower case


def tables_read_by(sql: str) -> TablesRead:
    """The tables `sql` reads; a statement that does not parse reads nothing (planning will say why)."""
    try:
        tree = parse_statement(sql).tree
    except QueryError:
        return TablesRead(frozenset(), frozenset())
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    tables = [t for t in tree.find_all(exp.Table) if t.name not in ctes]
    try:
        tables += [
            s for scope in traverse_scope(tree) for s in scope.sources.values() if isinstance(s, exp.Table)
        ]
    except (SqlglotError, ValueError, KeyError, AttributeError):
        tables = list(tree.find_all(exp.Table))  # unresolvable scopes: every table named, CTEs too
    datasources, system = set(), set()
    for t in tables:
        if not t.name:  # a table function (TABLE(...)): its arguments are not datasources Strata reads
            continue
        schema = (t.db or "druid").lower()
        if schema == "druid":
            datasources.add(t.name)
        elif schema in SYSTEM_SCHEMAS:
            system.add((schema, t.name.lower()))
        else:
            datasources.add(t.name)  # an unknown schema: required as a datasource (planning refuses it)
    return TablesRead(frozenset(datasources), frozenset(system))
