"""Druid SQL's typing rules that the broker's engine does not share, applied to the statement
it runs: integer division.

Druid (Calcite, then Java arithmetic) divides two integers as integers, truncating toward zero:
`SUM(added) / COUNT(*)` is a BIGINT. DuckDB's `/` always divides as reals, so a division whose
operands are both integers becomes DuckDB's `//`, which truncates toward zero as Java does.
Types come from sqlglot's annotation over the tables the statement reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from strata.sql.dialect import DIALECT

_INTEGERS = (
    exp.DType.BIGINT,
    exp.DType.INT,
    exp.DType.SMALLINT,
    exp.DType.TINYINT,
)


def sql_type(kind: pa.DataType) -> str:
    """The SQL type a column of `kind` has in the broker's engine."""
    if pa.types.is_integer(kind):
        return "BIGINT"
    if pa.types.is_floating(kind):
        return "DOUBLE"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP"
    if pa.types.is_date(kind):
        return "DATE"
    if pa.types.is_boolean(kind):
        return "BOOLEAN"
    return "VARCHAR"


def integer_division(tree: exp.Expr, tables: Mapping[str, pa.Schema]) -> exp.Expr:
    """A copy of `tree` where integer / integer is integer division; `tree` itself when its types
    cannot be worked out (a name the schema lacks): DuckDB then reports what is wrong."""
    if tree.find(exp.Div) is None:
        return tree
    schema: dict[str, object] = {
        name: {f.name: sql_type(f.type) for f in table} for name, table in tables.items()
    }
    try:
        qualified = qualify(tree.copy(), schema=schema, dialect=DIALECT)
        typed = annotate_types(qualified, schema=schema, dialect=DIALECT)
    except SqlglotError:
        return tree
    for div in list(typed.find_all(exp.Div)):
        left, right = div.this.type, div.expression.type
        if left is not None and right is not None and left.is_type(*_INTEGERS) and right.is_type(*_INTEGERS):
            div.replace(exp.IntDiv(this=div.this, expression=div.expression))
    return typed
