"""The tables the broker answers itself: INFORMATION_SCHEMA (SCHEMATA, TABLES, COLUMNS), sys
(segments, servers) and the `lookup` schema, as Arrow tables built from the broker's catalog and
its loaded lookups for DuckDB to query."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

from strata.lookups.registry import REGISTRY
from strata.sql.column_types import jdbc_type, sql_type_name


class Catalog(Protocol):
    """What the planner needs to know of the cluster."""

    def tables(self) -> Sequence[str]: ...

    def columns(self, table: str) -> Mapping[str, str] | None:
        """Column name -> Druid type (STRING, LONG, DOUBLE, FLOAT, ARRAY<...>, COMPLEX<json>,
        MULTI_VALUE_STRING), `__time` first; None: no such table."""

    def segments(self) -> list[dict[str, Any]]: ...

    def servers(self) -> list[dict[str, Any]]: ...


def system_tables(catalog: Catalog) -> dict[str, pa.Table]:
    tables = list(catalog.tables())
    lookups = REGISTRY.snapshot()
    schemata = [("druid", s) for s in ("druid", "INFORMATION_SCHEMA", "sys", "lookup", "view")]
    table_rows = (
        [("druid", "druid", t, "TABLE", "NO", "NO") for t in tables]
        + [
            ("druid", "INFORMATION_SCHEMA", t, "SYSTEM_TABLE", "NO", "NO")
            for t in ("SCHEMATA", "TABLES", "COLUMNS")
        ]
        + [("druid", "sys", t, "SYSTEM_TABLE", "NO", "NO") for t in ("segments", "servers")]
        + [("druid", "lookup", t, "TABLE", "YES", "YES") for t in lookups]
    )
    column_rows = []
    for t in tables:
        for position, (name, kind) in enumerate((catalog.columns(t) or {}).items(), start=1):
            sql_type = "TIMESTAMP" if name == "__time" else sql_type_name(kind)
            nullable = "NO" if name == "__time" else "YES"
            column_rows.append(
                ("druid", "druid", t, name, position, "", nullable, sql_type, jdbc_type(sql_type))
            )
    for t in lookups:  # Druid's lookup tables: k and v, strings
        column_rows += [
            ("druid", "lookup", t, c, i, "", "YES", "VARCHAR", 12) for i, c in ((1, "k"), (2, "v"))
        ]
    names = {
        "SCHEMATA": ["CATALOG_NAME", "SCHEMA_NAME"],
        "TABLES": [
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_TYPE",
            "IS_JOINABLE",
            "IS_BROADCAST",
        ],
        "COLUMNS": [
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "COLUMN_NAME",
            "ORDINAL_POSITION",
            "COLUMN_DEFAULT",
            "IS_NULLABLE",
            "DATA_TYPE",
            "JDBC_TYPE",
        ],
    }
    out = {
        f"information_schema__{k.lower()}": pa.table(
            {n: [r[i] for r in rows] for i, n in enumerate(names[k])}
        )
        if rows
        else pa.table(
            {
                n: pa.array([], pa.int64() if n in ("ORDINAL_POSITION", "JDBC_TYPE") else pa.string())
                for n in names[k]
            }
        )
        for k, rows in (("SCHEMATA", schemata), ("TABLES", table_rows), ("COLUMNS", column_rows))
    }
    out.update({f"lookup__{name.lower()}": lookup.table() for name, lookup in lookups.items()})
    out["sys__segments"] = _rows_table(
        catalog.segments(),
        [
            "segment_id",
            "datasource",
            "start",
            "end",
            "size",
            "version",
            "partition_num",
            "num_replicas",
            "num_rows",
            "is_published",
            "is_available",
            "is_realtime",
            "is_overshadowed",
        ],
    )
    out["sys__servers"] = _rows_table(
        catalog.servers(),
        ["server", "host", "plaintext_port", "tls_port", "server_type", "tier", "curr_size", "max_size"],
    )
    return out


def _rows_table(rows: list[dict[str, Any]], names: list[str]) -> pa.Table:
    if not rows:
        return pa.table({n: pa.array([], pa.string()) for n in names})
    return pa.table({n: [r.get(n) for r in rows] for n in names})
