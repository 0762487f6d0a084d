"""Building DuckDB-dialect sqlglot trees from SQL text, and reading literal arguments.

Rewrites write DuckDB SQL as text around their (already rewritten) arguments and parse it back
with sqlglot's DuckDB dialect, so the result is an ordinary tree the planner can still walk.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlglot
from sqlglot import exp

from strata.query.errors import invalid

TIME = "__time"
_UTC = ("UTC", "Etc/UTC", "Z", "GMT", "Etc/GMT", "UCT", "+00:00", "-00:00")
_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")


def duck(template: str, **args: exp.Expr | str | int | float) -> exp.Expr:
    """`template` with `{name}` holes filled by the arguments' DuckDB SQL, parsed as DuckDB."""
    filled = template.format(**{k: _text(v) for k, v in args.items()}) if args else template
    return _parsed(filled).copy()


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> exp.Expr:
    """Parsing is most of a rewrite's time, and statements repeat."""
    return sqlglot.parse_one(text, read="duckdb")


def _text(value: exp.Expr | str | int | float) -> str:
    if isinstance(value, exp.Expr):
        return f"({value.sql(dialect='duckdb')})"
    return str(value)


def arguments(node: exp.Expr) -> list[exp.Expr]:
    """A call's arguments in order (an Anonymous call's list, else the node's argument slots)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    out: list[exp.Expr] = []
    for key in node.arg_types:
        value = node.args.get(key)
        if isinstance(value, exp.Expr):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, exp.Expr))
    return out


def aggregate_filter(ctx: Any) -> str:
    """` FILTER (WHERE ...)` for an aggregate the rewrite writes, when the call had one."""
    return "" if ctx.filter is None else f" FILTER (WHERE {ctx.filter})"


def top_level(node: exp.Expr) -> bool:
    """Whether `node` is a value the statement returns (a SELECT item), not a function argument."""
    parent = node.parent
    if isinstance(parent, exp.Filter):
        parent = parent.parent
    return isinstance(parent, (exp.Alias, exp.Select))


def sql_of(node: exp.Expr) -> str:
    return f"({node.sql(dialect='duckdb')})"


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def string_value(node: exp.Expr | None, function: str, what: str) -> str | None:
    """A string literal argument (None when absent or NULL); anything else is refused."""
    if node is None or isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    raise invalid("Function [%s] needs a literal string as its %s", function, what)


def number_value(node: exp.Expr | None, function: str, what: str) -> Any:
    if node is None or isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return number_value(node.this, function, what)  # a decimal literal made a DOUBLE
    if isinstance(node, exp.Neg) and isinstance(node.this, (exp.Literal, exp.Cast)):
        value = number_value(node.this, function, what)
        return -value
    if isinstance(node, exp.Literal) and not node.is_string:
        text = str(node.this)
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    raise invalid("Function [%s] needs a literal number as its %s", function, what)


def zone_name(value: str | None, function: str = "sqlTimeZone") -> str | None:
    """A Druid zone (a name or an offset like `-05:00`) as a name zoneinfo and DuckDB share;
    None for UTC."""
    if value is None or value in _UTC:
        return None
    match = _OFFSET.match(value)
    if match:
        sign, hours, minutes = match.groups()
        if minutes != "00":
            raise invalid("Function [%s]: time zone offset [%s] is not whole hours", function, value)
        if int(hours) == 0:
            return None
        return f"Etc/GMT{'-' if sign == '+' else '+'}{int(hours)}"  # POSIX signs are inverted
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid("Function [%s]: unknown time zone [%s]", function, value) from None
    return value


def kind(node: exp.Expr) -> str | None:
    """The node's SQL type family: TIMESTAMP, DATE, VARCHAR, BIGINT, DOUBLE, BOOLEAN, ARRAY or
    None when unknown (from the planner's type annotation, else from the node's shape)."""
    dtype = node.type
    if dtype is not None and not dtype.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        if dtype.is_type(*exp.DataType.TEMPORAL_TYPES):
            return "DATE" if dtype.is_type(exp.DataType.Type.DATE) else "TIMESTAMP"
        if dtype.is_type(*exp.DataType.TEXT_TYPES):
            return "VARCHAR"
        if dtype.is_type(*exp.DataType.INTEGER_TYPES):
            return "BIGINT"
        if dtype.is_type(*exp.DataType.REAL_TYPES):
            return "DOUBLE"
        if dtype.is_type(exp.DataType.Type.BOOLEAN):
            return "BOOLEAN"
        if dtype.is_type(exp.DataType.Type.ARRAY, exp.DataType.Type.LIST):
            return "ARRAY"
    if isinstance(node, exp.Column) and node.name == TIME:
        return "TIMESTAMP"
    if isinstance(node, exp.Literal):
        if node.is_string:
            return "VARCHAR"
        return "DOUBLE" if any(c in str(node.this) for c in ".eE") else "BIGINT"
    if isinstance(node, exp.Boolean):
        return "BOOLEAN"
    if isinstance(node, exp.Cast):
        return kind_of_type(node.to)
    return None


def text_of(node: exp.Expr) -> str:
    """SQL text of `node` as VARCHAR, printed as Druid prints it (a DOUBLE as Java does)."""
    k = kind(node)
    if k == "VARCHAR":
        return sql_of(node)
    if k == "DOUBLE":
        return f"strata_java_double(CAST({sql_of(node)} AS DOUBLE))"
    return f"CAST({sql_of(node)} AS VARCHAR)"


def kind_of_type(dtype: exp.DataType) -> str | None:
    probe = exp.Null()
    probe.type = dtype
    return kind(probe)


def typed(node: exp.Expr, sql_type: str) -> exp.Expr:
    """Marks a rewritten node with its SQL type, so enclosing rewrites read it."""
    node.type = exp.DataType.build(sql_type, dialect="duckdb")
    return node
