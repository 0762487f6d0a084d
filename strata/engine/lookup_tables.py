"""The lookups a query reads, registered on the engine's connection while it runs.

Each named lookup is the node's loaded one, as an Arrow `k`, `v` table under
`strata.query.lookup_refs.lookup_table(name)`; the SQL of `registeredLookup`, the `lookup` dimension
spec and `lookup()` expressions reads it there. A name the node has not loaded is Druid's
"Lookup [name] not found" (400), before any segment is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import duckdb

from strata.lookups.registry import REGISTRY, LookupRegistry
from strata.lookups.rows import loaded
from strata.query.base import Query
from strata.query.lookup_refs import TABLE_PREFIX, referenced_lookups


def query_lookups(query: Query) -> set[str]:
    return referenced_lookups(query.to_json())


@contextlib.contextmanager
def registered_lookups(
    conn: duckdb.DuckDBPyConnection, names: set[str], registry: LookupRegistry = REGISTRY
) -> Iterator[None]:
    tables = {name: loaded(name, registry).table() for name in sorted(names)}
    done: list[str] = []
    try:
        for name, table in tables.items():
            conn.register(TABLE_PREFIX + name, table)
            done.append(TABLE_PREFIX + name)
        yield
    finally:
        for view in done:
            with contextlib.suppress(duckdb.Error):
                conn.unregister(view)
