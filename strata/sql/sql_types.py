"""The Druid SQL type of an expression, where the native layer cannot tell it.

Native expressions compute timestamps and dates as epoch milliseconds and booleans as 1/0; Druid
SQL types them TIMESTAMP, DATE and BOOLEAN, and prints them so (ISO 8601 in the session zone,
true/false). The native planner asks here which of its outputs are such values. Only what decides
printing is worked out; None means "as the native type says".
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

TIME = "__time"
TIMESTAMP, DATE, BOOLEAN = "TIMESTAMP", "DATE", "BOOLEAN"

# Druid functions whose value is a TIMESTAMP whatever their arguments
_TIMESTAMP_FUNCTIONS = frozenset(
    {
        "TIME_FLOOR",
        "TIME_CEIL",
        "TIME_SHIFT",
        "TIME_PARSE",
        "MILLIS_TO_TIMESTAMP",
        "TIMESTAMPADD",
        "DATE_TRUNC",
        "CURRENT_TIMESTAMP",
        "LATEST_BY",
        "EARLIEST_BY",
    }
)
# Druid functions whose value is a BOOLEAN
_BOOLEAN_FUNCTIONS = frozenset(
    {
        "CONTAINS_STRING",
        "ICONTAINS_STRING",
        "REGEXP_LIKE",
        "TIME_IN_INTERVAL",
        "MV_CONTAINS",
        "MV_OVERLAP",
        "ARRAY_CONTAINS",
        "ARRAY_OVERLAP",
        "IPV4_MATCH",
        "IPV6_MATCH",
    }
)
# aggregates and conditionals whose value has the type of their (first) argument
_SAME_AS_ARGUMENT = frozenset(
    {"MIN", "MAX", "EARLIEST", "LATEST", "ANY_VALUE", "ANYVALUE", "NVL", "COALESCE", "NULLIF"}
)
# array functions whose value is an element of their first argument
_ELEMENT_FUNCTIONS = frozenset({"ARRAY_OFFSET", "ARRAY_ORDINAL"})
_BOOLEAN_NODES = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean, exp.Is, exp.In, exp.Between, exp.Like)


def sql_type(node: exp.Expr, columns: Mapping[str, str] | None = None) -> str | None:
    """TIMESTAMP, DATE or BOOLEAN for an expression Druid SQL types so, else None. `columns` maps
    column names to SQL types (`__time` is TIMESTAMP without it)."""
    while isinstance(node, (exp.Paren, exp.Alias)):
        node = node.this
    if isinstance(node, exp.Column):
        if node.name == TIME:
            return TIMESTAMP
        kind = (columns or {}).get(node.name)
        return kind if kind in (TIMESTAMP, DATE, BOOLEAN) else None
    if isinstance(node, _BOOLEAN_NODES):
        return BOOLEAN
    if isinstance(node, (exp.Cast, exp.TryCast)):
        if node.to.is_type("date"):
            return DATE
        if node.to.is_type("timestamp", "timestamptz"):
            return TIMESTAMP
        if node.to.is_type("boolean"):
            return BOOLEAN
        return None
    if isinstance(node, (exp.CurrentTimestamp, exp.TimestampTrunc, exp.DateTrunc, exp.TimestampAdd)):
        return TIMESTAMP
    if isinstance(node, exp.CurrentDate):
        return DATE
    if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("to") is not None:
        return TIMESTAMP if sql_type(node.this, columns) in (TIMESTAMP, DATE) else None
    if isinstance(node, exp.Case):
        branches = [i.args.get("true") for i in node.args.get("ifs") or []] + [node.args.get("default")]
        kinds = {sql_type(b, columns) for b in branches if b is not None and not isinstance(b, exp.Null)}
        return kinds.pop() if len(kinds) == 1 else None
    name = _function_name(node)
    if name in _ELEMENT_FUNCTIONS:  # an element of a BOOLEAN ARRAY is a BOOLEAN
        argument = first_argument(node)
        return BOOLEAN if argument is not None and is_boolean_array(argument) else None
    if name in _TIMESTAMP_FUNCTIONS:
        return TIMESTAMP
    if name in _BOOLEAN_FUNCTIONS:
        return BOOLEAN
    if name in _SAME_AS_ARGUMENT:
        argument = first_argument(node)
        return None if argument is None else sql_type(argument, columns)
    return None


def is_boolean_array(node: exp.Expr) -> bool:
    """Whether Druid SQL types `node` BOOLEAN ARRAY: `JSON_VALUE(.. RETURNING BOOLEAN ARRAY)`, an
    ARRAY of TRUE/FALSE, a cast to BOOLEAN ARRAY (its native elements are 1/0)."""
    if isinstance(node, exp.Array):
        return bool(node.expressions) and all(isinstance(e, exp.Boolean) for e in node.expressions)
    to = node.args.get("returning") if isinstance(node, exp.JSONValue) else None
    if isinstance(node, exp.Cast):
        to = node.to
    return (
        isinstance(to, exp.DataType)
        and to.is_type("array")
        and bool(to.expressions)
        and to.expressions[0].is_type("boolean")
    )


def unnamed_column(items: list[exp.Expr], index: int) -> str:
    """Calcite's name for the unnamed select item at `index`: `EXPR$n`, n the number of distinct
    names before it (`SELECT a, b, b, SUM(x) OVER ()` names the last `EXPR$2`)."""
    names: set[str] = set()
    for item in items[:index]:
        if isinstance(item, exp.Alias):
            names.add(item.alias)
        elif isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return f"EXPR${index}"  # a * before it: how many names it brings is not known here
        elif isinstance(item, exp.Column):
            names.add(item.name)
        else:
            names.add(f"EXPR${len(names)}")
    return f"EXPR${len(names)}"


def star_name(name: str, used: set[str]) -> str:
    """A column a `*` lists, named as Calcite's validator names it (`SqlValidatorUtil.uniquify`
    with its expression suggester): its own name, or the first of name0, name1, ... that no earlier
    item of the select list has; added to `used`."""
    candidate, n = name, 0
    while candidate in used:
        candidate, n = f"{name}{n}", n + 1
    used.add(candidate)
    return candidate


def _function_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.RegexpLike):
        return "REGEXP_LIKE"
    if isinstance(node, (exp.ArrayContains, exp.ArrayContainsAll)):
        return "ARRAY_CONTAINS"
    if isinstance(node, exp.ArrayOverlaps):
        return "ARRAY_OVERLAP"
    if isinstance(node, exp.Coalesce):
        return "COALESCE"
    if isinstance(node, exp.Nullif):
        return "NULLIF"
    if isinstance(node, (exp.Min, exp.Max, exp.AnyValue)):
        return type(node).__name__.upper()
    return None


def first_argument(node: exp.Expr) -> exp.Expr | None:
    """A call's first argument (None when it has none)."""
    if isinstance(node, exp.Anonymous):
        return node.expressions[0] if node.expressions else None
    argument = node.this
    return argument if isinstance(argument, exp.Expr) else None
