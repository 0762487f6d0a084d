"""Druid SQL's typing rules that the broker's engine does not share, applied to the statement
it runs: integer division, and strings compared with numbers.

Druid (Calcite, then Java arithmetic) divides two integers as integers, truncating toward zero:
`SUM(added) / COUNT(*)` is a BIGINT. DuckDB's `/` always divides as reals, so a division whose
operands are both integers becomes DuckDB's `//`, which truncates toward zero as Java does.
A string compared for equality with a number literal (`c = 999`, `c IN ('a', 999)`) compares
with the number's text, as Druid's native filters do, where DuckDB would cast every string to a
number and fail on the first that is not one; an ordering comparison reads the string as a number
(null when it is not one). A string compared with a numeric expression that is not a literal (a
join's `t1.c_long = t2.c`) is cast to that number type as Druid casts (Calcite's coercion): null
when it is not a number, where DuckDB's cast would fail the statement. Types come from sqlglot's
annotation over the tables the statement reads. An ARRAY orders with its null elements first, as
Druid orders arrays, where DuckDB puts them last (`array_order`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from strata.query.expressions.duck import null_elements_first
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
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"ARRAY<{sql_type(kind.value_type)}>"
    if isinstance(kind, pa.JsonType):
        return "JSON"
    return "VARCHAR"


def sql_schema(tables: Mapping[str, pa.Schema]) -> dict[str, dict[str, str]]:
    """Each table's columns and their SQL types in the broker's engine."""
    return {name: {f.name: sql_type(f.type) for f in table} for name, table in tables.items()}


def integer_division(tree: exp.Expr, tables: Mapping[str, pa.Schema]) -> exp.Expr:
    """A copy of `tree` where integer / integer is integer division and strings compare with
    numbers as in Druid; `tree` itself when its types cannot be worked out (a name the schema
    lacks): DuckDB then reports what is wrong."""
    if tree.find(exp.Div, exp.EQ, exp.NEQ, exp.In, exp.GT, exp.GTE, exp.LT, exp.LTE) is None:
        return tree
    schema: dict[str, object] = dict(sql_schema(tables))
    try:
        qualified = qualify(tree.copy(), schema=schema, dialect=DIALECT)
        unwrapped = _unnested_values(qualified)
        typed = annotate_types(qualified, schema=schema, dialect=DIALECT)
    except SqlglotError:
        return tree
    for stand_in, call in unwrapped:
        stand_in.replace(call or exp.Anonymous(this="MV_TO_ARRAY", expressions=[stand_in.copy()]))
    for div in list(typed.find_all(exp.Div)):
        left, right = div.this.type, div.expression.type
        if left is not None and right is not None and left.is_type(*_INTEGERS) and right.is_type(*_INTEGERS):
            div.replace(exp.IntDiv(this=div.this, expression=div.expression))
    for node in list(typed.find_all(exp.EQ, exp.NEQ, exp.In, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        _string_with_numbers(node)
    return typed


def _unnested_values(tree: exp.Expr) -> list[tuple[exp.Expr, exp.Expr | None]]:
    """Each call of `tree` an UNNEST unnests that sqlglot cannot type, swapped while the types are
    worked out for a stand-in of its type: (stand-in, the call to put back, None for an
    `MV_TO_ARRAY` of the stand-in). sqlglot types the elements of a column's list, not of a call it
    does not know: `MV_TO_ARRAY(x)` unnests `x` itself (an unnested multi-value string is a
    VARCHAR), `JSON_VALUE(.. RETURNING T ARRAY)` a null of `T ARRAY` (its elements are T)."""
    out: list[tuple[exp.Expr, exp.Expr | None]] = []
    for unnest in tree.find_all(exp.Unnest):
        for call in unnest.expressions:
            named = isinstance(call, exp.Anonymous) and str(call.this).upper() == "MV_TO_ARRAY"
            if named and len(call.expressions) == 1:
                out.append((call.expressions[0], None))
                call.replace(call.expressions[0])
            elif isinstance(call, exp.JSONValue) and isinstance(call.args.get("returning"), exp.DataType):
                stand_in = exp.Cast(this=exp.null(), to=call.args["returning"].copy())
                out.append((stand_in, call))
                call.replace(stand_in)
    return out


def _is_text(node: exp.Expr) -> bool:
    return (
        node.type is not None
        and node.type.is_type(*exp.DataType.TEXT_TYPES)
        and not isinstance(node, exp.Literal)
    )


def _number(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string


def _numeric(node: exp.Expr) -> bool:
    """A number-typed expression that is not a literal."""
    return (
        node.type is not None
        and node.type.is_type(*exp.DataType.NUMERIC_TYPES)
        and not isinstance(node, exp.Literal)
    )


def _as_number(text: exp.Expr, number: exp.Expr) -> exp.Expr:
    """`text` cast to `number`'s type, a SQL CAST that `strata.sql.functions` writes with Druid's
    rules (a LONG truncates a decimal; not a number is null)."""
    assert number.type is not None
    target = "BIGINT" if number.type.is_type(*_INTEGERS) else "DOUBLE"
    return exp.Cast(this=text.copy(), to=exp.DataType.build(target))


def _string_with_numbers(node: exp.Expr) -> None:
    if isinstance(node, exp.In):
        if _is_text(node.this):
            node.set(
                "expressions", [exp.Literal.string(v.this) if _number(v) else v for v in node.expressions]
            )
        return
    for text, other in ((node.this, node.expression), (node.expression, node.this)):
        if _is_text(text) and _numeric(other):
            text.replace(_as_number(text, other))
            return
        if not (_is_text(text) and _number(other)):
            continue
        if isinstance(node, (exp.EQ, exp.NEQ)):
            other.replace(exp.Literal.string(other.this))
        else:
            text.replace(exp.TryCast(this=text.copy(), to=exp.DataType.build("DOUBLE")))
        return


def array_order(tree: exp.Expr, names: Sequence[str], kinds: Sequence[str]) -> exp.Expr | None:
    """A copy of the DuckDB statement `tree` whose outer ORDER BY terms that are output columns of
    a list type (`kinds`, DuckDB's types of the `names`) order null elements first; None when none
    is. Each element becomes a (not null, value) pair: DuckDB compares the pairs as Druid compares
    the elements, and DESC still reverses the whole order."""
    order = tree.args.get("order")
    if order is None:
        return None
    lists = {name for name, kind in zip(names, kinds, strict=True) if kind.endswith("]")}
    items = tree.selects if isinstance(tree, exp.Query) else []
    out = tree.copy()
    changed = False
    for ordered in out.args["order"].expressions:
        name = _output_named(ordered.this, items, names)
        if name in lists:
            pairs = null_elements_first(exp.column(name, quoted=True).sql(dialect="duckdb"))
            ordered.set("this", sqlglot.parse_one(pairs, read="duckdb"))
            changed = True
    return out if changed else None


def _output_named(term: exp.Expr, items: Sequence[exp.Expr], names: Sequence[str]) -> str | None:
    """The output column an ORDER BY term names: by name, by position, or as a select item's
    expression."""
    if isinstance(term, exp.Column) and not term.table and term.name in names:
        return term.name
    if isinstance(term, exp.Literal) and term.is_int:
        index = int(term.this) - 1
        return names[index] if 0 <= index < len(names) else None
    for item, name in zip(items, names, strict=False):
        if (item.this if isinstance(item, exp.Alias) else item) == term:
            return name
    return None
