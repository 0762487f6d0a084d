"""The columns an ingestion writes, typed by running its DuckDB statement over empty inputs.

Planning runs the statement the task will run, over empty tables of its sources' signatures: a
statement DuckDB cannot run fails at submission (400) rather than in the task, and the result's
types are the columns' types. Druid stores what SQL computes as its native types: VARCHAR as
string, BIGINT (and BOOLEAN, and a TIMESTAMP other than `__time`, as epoch milliseconds) as long,
DOUBLE and DECIMAL as double, FLOAT as float; anything else cannot be stored yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from strata.query.errors import invalid
from strata.sql.dialect import DIALECT
from strata.sql.engine_errors import engine_error
from strata.sql.functions import install, to_duckdb
from strata.sql.typing_rules import integer_division

TIME = "__time"
ARROW = {"STRING": pa.string(), "LONG": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(),
         "TIMESTAMP": pa.timestamp("us")}  # fmt: skip
SQL_TYPE = {
    "STRING": "VARCHAR",
    "LONG": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "TIMESTAMP": "TIMESTAMP",
}
DRUID_SQL = {"string": "VARCHAR", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE"}

Signature = Sequence[tuple[str, str]]  # (column, STRING | LONG | FLOAT | DOUBLE | TIMESTAMP)


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # string, long, float, double; "timestamp" for __time
    sql_type: str  # what the statement computes (VARCHAR, BIGINT, TIMESTAMP, ...)


def signature_of(source: Mapping[str, Any]) -> Signature:
    """A planned source's columns; an EXTERN `__time` (of longs) reads as a TIMESTAMP, as in Druid."""
    sig = [(str(c["name"]), str(c["type"])) for c in source["signature"]]
    if source["type"] == "external":
        sig = [(n, "TIMESTAMP" if n == TIME else t) for n, t in sig]
    return sig


def schema_of(signature: Signature) -> dict[str, str]:
    return {name: SQL_TYPE[kind] for name, kind in signature}


def duckdb_sql(tree: exp.Expr, tables: Mapping[str, Signature], zone: str | None) -> str:
    """`tree` as the DuckDB statement computing Druid's answer over tables named as in `tables`."""
    arrow = {name: pa.schema([(c, ARROW[k]) for c, k in sig]) for name, sig in tables.items()}
    typed = integer_division(tree, arrow)
    schema = {name: schema_of(sig) for name, sig in tables.items()}
    try:
        return to_duckdb(typed, zone, schema=schema).sql(dialect="duckdb")
    except ValueError as e:
        raise invalid("Cannot plan the statement: %s", e) from None


def result_columns(sql: str, tables: Mapping[str, Signature]) -> list[Column]:
    """The columns `sql` yields over empty `tables`, as Druid stores them."""
    con = duckdb.connect(config={"enable_external_access": False})
    try:
        con.execute("SET TimeZone='UTC'")
        install(con)
        for name, sig in tables.items():
            con.register(name, pa.table({c: pa.array([], ARROW[k]) for c, k in sig}))
        try:
            result = con.sql(f"SELECT * FROM ({sql}) LIMIT 0").to_arrow_table()
        except duckdb.Error as e:
            raise engine_error(e) from None
    finally:
        con.close()
    return [_column(f.name, f.type) for f in result.schema]


def _column(name: str, kind: pa.DataType) -> Column:
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return Column(name, "timestamp" if name == TIME else "long", "TIMESTAMP")
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return Column(name, "string", "VARCHAR")
    if pa.types.is_boolean(kind):
        return Column(name, "long", "BOOLEAN")
    if pa.types.is_integer(kind):
        return Column(name, "long", "BIGINT")
    if pa.types.is_float32(kind):
        return Column(name, "float", "FLOAT")
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return Column(name, "double", "DOUBLE")
    if pa.types.is_null(kind):
        return Column(name, "string", "VARCHAR")
    raise invalid(
        "Column [%s] of type [%s] cannot be stored yet (VARCHAR, BIGINT, DOUBLE, FLOAT)", name, kind
    )


def stored_as_written(sql: str, columns: Sequence[Column], keep: Sequence[str] = ()) -> str:
    """`sql` with every column converted to what the segment stores (BOOLEAN and TIMESTAMPs other
    than `__time` to BIGINT epoch milliseconds, DECIMAL to DOUBLE); `keep` passes untouched."""
    items = []
    changed = False
    for c in columns:
        ref = exp.column(c.name, quoted=True).sql(dialect="duckdb")
        if c.name in keep or c.kind in ("string", "timestamp") or c.sql_type in ("BIGINT", "FLOAT"):
            items.append(ref)
        elif c.sql_type == "TIMESTAMP":
            items.append(f"epoch_ms(CAST({ref} AS TIMESTAMP)) AS {ref}")
            changed = True
        else:
            target = {"long": "BIGINT", "double": "DOUBLE"}[c.kind]
            items.append(f"CAST({ref} AS {target}) AS {ref}")
            changed = True
    return f'SELECT {", ".join(items)} FROM ({sql}) AS "__q"' if changed else sql


def sql_text(node: exp.Expr) -> str:
    return node.sql(dialect=DIALECT)
