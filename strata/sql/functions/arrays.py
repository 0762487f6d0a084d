"""Druid's ARRAY and multi-value string functions over DuckDB lists.

A multi-value string is a list of VARCHAR here, and a plain string is a multi-value string of one
value, so each MV_ function is its ARRAY_ counterpart with Druid's multi-value rules: a null row
contains nothing and overlaps nothing, no values is null. A multi-value result the statement
returns prints as Druid prints it: its one value as a string, several as a JSON array. Offsets
are 0-based, ordinals 1-based, as in Druid.
"""

from __future__ import annotations

from sqlglot import exp

from strata.sql.functions.fragments import arguments, duck, kind, sql_of, top_level, typed
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs


def _call(template: str, result: str = "VARCHAR[]") -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        return typed(duck(template.format(*(sql_of(a) for a in arguments(node)))), result)

    return rewrite


def _as_values(node: exp.Expr) -> str:
    """A multi-value argument as a list: a plain string is one value."""
    if kind(node) == "VARCHAR":
        return f"(CASE WHEN {sql_of(node)} IS NULL THEN NULL ELSE [{sql_of(node)}] END)"
    return sql_of(node)


def _mv(template: str, result: str = "MV", positions: tuple[int, ...] = (0,)) -> Rewrite:
    """A multi-value function: arguments at `positions` are multi-value strings; a result "MV" is
    a multi-value string (a list, printed as Druid prints it when the statement returns it)."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        texts = [_as_values(a) if i in positions else sql_of(a) for i, a in enumerate(args)]
        text = template.format(*texts)
        if result != "MV":
            return typed(duck(text), result)
        if top_level(node):
            printed = (
                f"(CASE WHEN {text} IS NULL OR len({text}) = 0 THEN NULL"
                f" WHEN len({text}) = 1 THEN {text}[1] ELSE CAST(to_json({text}) AS VARCHAR) END)"
            )
            return typed(duck(printed), "VARCHAR")
        return typed(duck(text), "VARCHAR[]")

    return rewrite


_SLICE = (
    "(CASE WHEN {0} IS NULL OR {1} < 0 OR {1} > len({0}) OR {1} > {2} THEN NULL"
    " ELSE list_transform(range({1}, {2}), lambda i: list_extract({0}, i + 1)) END)"
)
_OVERLAP = (
    "(CASE WHEN {0} IS NULL OR {1} IS NULL THEN NULL ELSE list_has_any({0}, {1})"
    " OR (list_count({0}) < len({0}) AND list_count({1}) < len({1})) END)"
)
# Druid's ArrayToStringFunction: a null element prints as 'null', but one null element alone is null
_TO_STRING = (
    "(CASE WHEN {0} = [NULL] THEN NULL"
    " ELSE array_to_string(list_transform({0}, lambda v: coalesce(CAST(v AS VARCHAR), 'null')), {1}) END)"
)


def _array(node: exp.Expr, ctx: Context) -> exp.Expr:
    """`ARRAY[...]`: a TIMESTAMP element is Druid's LONG (epoch milliseconds), as ARRAY_AGG's are, so
    `ARRAY_CONTAINS(ARRAY_AGG(__time), ARRAY[TIMESTAMP '...'])` compares like with like."""
    elements = list(node.expressions)
    if not any(kind(e) == "TIMESTAMP" for e in elements):
        return node
    items = [f"epoch_ms({sql_of(e)})" if kind(e) == "TIMESTAMP" else sql_of(e) for e in elements]
    return typed(duck(f"[{', '.join(items)}]"), "BIGINT[]")


ARRAYS: dict[str, Rewrite] = {
    "ARRAY": _array,
    "ARRAY_LENGTH": _call("len({0})", "BIGINT"),
    "ARRAY_OFFSET": _call("list_extract({0}, {1} + 1)", "VARCHAR"),
    "ARRAY_ORDINAL": _call("list_extract({0}, {1})", "VARCHAR"),
    "ARRAY_OFFSET_OF": lambda node, ctx: _position_of(node, "(list_position({0}, {1}) - 1)"),
    "ARRAY_ORDINAL_OF": lambda node, ctx: _position_of(node, "list_position({0}, {1})"),
    "ARRAY_CONTAINS": lambda node, ctx: _contains(node),
    "ARRAY_OVERLAP": _call(_OVERLAP, "BOOLEAN"),
    "SCALAR_IN_ARRAY": _call("(CASE WHEN {0} IS NULL THEN NULL ELSE list_contains({1}, {0}) END)", "BOOLEAN"),
    "ARRAY_APPEND": _call("(CASE WHEN {0} IS NULL THEN NULL ELSE list_append({0}, {1}) END)"),
    "ARRAY_PREPEND": _call("(CASE WHEN {1} IS NULL THEN NULL ELSE list_prepend({0}, {1}) END)"),
    "ARRAY_CONCAT": _call("(CASE WHEN {0} IS NULL OR {1} IS NULL THEN NULL ELSE list_concat({0}, {1}) END)"),
    "ARRAY_SLICE": _call(_SLICE),
    "ARRAY_TO_STRING": lambda node, ctx: _to_string(node),
    "STRING_TO_ARRAY": _call("regexp_split_to_array({0}, {1})"),
    "ARRAY_TO_MV": _call("CAST({0} AS VARCHAR[])"),
    "MV_TO_ARRAY": _mv("{0}", "VARCHAR[]"),
    "MV_APPEND": _mv("list_append(coalesce({0}, []), {1})"),
    "MV_PREPEND": _mv("list_prepend({0}, coalesce({1}, []))", positions=(1,)),
    "MV_CONCAT": _mv("list_concat(coalesce({0}, []), coalesce({1}, []))", positions=(0, 1)),
    "MV_CONTAINS": lambda node, ctx: _contains(node, multi=True),
    "MV_OVERLAP": _mv("coalesce(list_has_any({0}, {1}), false)", "BOOLEAN"),
    "MV_LENGTH": _mv("len({0})", "BIGINT"),
    "MV_OFFSET": _mv("list_extract({0}, {1} + 1)", "VARCHAR"),
    "MV_ORDINAL": _mv("list_extract({0}, {1})", "VARCHAR"),
    "MV_OFFSET_OF": _mv("(list_position({0}, {1}) - 1)", "BIGINT"),
    "MV_ORDINAL_OF": _mv("list_position({0}, {1})", "BIGINT"),
    "MV_SLICE": _mv(_SLICE),
    "MV_TO_STRING": _mv("array_to_string({0}, {1})", "VARCHAR"),
    "STRING_TO_MV": _mv("regexp_split_to_array({0}, {1})", positions=()),
    # a multi-value string with no values is null
    "MV_FILTER_ONLY": _mv("nullif(list_filter({0}, lambda v: list_contains({1}, v)), [])"),
    "MV_FILTER_NONE": _mv("nullif(list_filter({0}, lambda v: NOT list_contains({1}, v)), [])"),
    "MV_FILTER_REGEX": _mv("nullif(list_filter({0}, lambda v: regexp_matches(v, {1})), [])"),
    "MV_FILTER_PREFIX": _mv("nullif(list_filter({0}, lambda v: starts_with(v, {1})), [])"),
}


def _position_of(node: exp.Expr, template: str) -> exp.Expr:
    """ARRAY_OFFSET_OF / ARRAY_ORDINAL_OF: a TIMESTAMP sought in an array of LONGs (ARRAY_AGG of
    `__time`) is its epoch milliseconds, as Druid compares them."""
    arr, value = arguments(node)
    sought = sql_of(value)
    if kind(value) == "TIMESTAMP" and kind(arr) != "TIMESTAMP":
        sought = f"epoch_ms({sought})"
    return typed(duck(template.format(sql_of(arr), sought)), "BIGINT")


def _to_string(node: exp.Expr) -> exp.Expr:
    """ARRAY_TO_STRING; a string is the array of its one value, as Druid reads a scalar there."""
    arr, separator = arguments(node)
    return typed(duck(_TO_STRING.format(_as_values(arr), sql_of(separator))), "VARCHAR")


def _contains(node: exp.Expr, multi: bool = False) -> exp.Expr:
    """ARRAY_CONTAINS / MV_CONTAINS; ARRAY_CONTAINS reads a string as the array of its one value,
    a null one as [null] (as Druid's `array_contains` does: it contains nothing but null)."""
    arr, value = arguments(node)
    is_array = isinstance(value, exp.Array) or (
        value.type is not None and value.type.is_type("array", "list")
    )
    test = "list_has_all({0}, {1})" if is_array else "list_contains({0}, {1})"
    if not multi and kind(arr) == "VARCHAR" and not is_array:
        found = f"(list_position([{sql_of(arr)}], {sql_of(value)}) IS NOT NULL)"
        return typed(duck(found), "BOOLEAN")
    text = test.format(_as_values(arr) if multi else sql_of(arr), sql_of(value))
    if multi:
        text = f"coalesce({text}, false)"
    return typed(duck(text), "BOOLEAN")


_NATIVE = frozenset({
    "ARRAY", "ARRAY_LENGTH", "ARRAY_OFFSET", "ARRAY_ORDINAL", "ARRAY_OFFSET_OF", "ARRAY_ORDINAL_OF",
    "ARRAY_CONTAINS", "ARRAY_OVERLAP", "SCALAR_IN_ARRAY", "ARRAY_APPEND", "ARRAY_PREPEND",
    "ARRAY_CONCAT", "ARRAY_SLICE", "ARRAY_TO_STRING", "STRING_TO_ARRAY", "ARRAY_TO_MV", "MV_TO_ARRAY",
    "MV_APPEND", "MV_PREPEND", "MV_CONCAT", "MV_CONTAINS", "MV_OVERLAP", "MV_LENGTH", "MV_OFFSET",
    "MV_ORDINAL", "MV_OFFSET_OF", "MV_ORDINAL_OF", "MV_SLICE", "MV_TO_STRING", "STRING_TO_MV",
    "MV_FILTER_ONLY", "MV_FILTER_NONE", "MV_FILTER_REGEX", "MV_FILTER_PREFIX",
})  # fmt: skip
ARRAY_SPECS: list[FunctionSpec] = [
    *specs(
        "scalar",
        "array",
        {
            "ARRAY": "ARRAY[expr, ...]: an array literal.",
            "ARRAY_LENGTH": "Number of elements.",
            "ARRAY_OFFSET": "Element at a 0-based index.",
            "ARRAY_ORDINAL": "Element at a 1-based index.",
            "ARRAY_OFFSET_OF": "0-based index of a value, null when absent.",
            "ARRAY_ORDINAL_OF": "1-based index of a value, null when absent.",
            "ARRAY_CONTAINS": "Whether an array holds a value (or every element of an array).",
            "ARRAY_OVERLAP": "Whether two arrays share an element (null counts as an element).",
            "SCALAR_IN_ARRAY": "Whether a value is in an array.",
            "ARRAY_APPEND": "Appends a value.",
            "ARRAY_PREPEND": "Prepends a value.",
            "ARRAY_CONCAT": "Concatenates two arrays.",
            "ARRAY_SLICE": "Elements from a 0-based start to an exclusive end.",
            "ARRAY_TO_STRING": "Joins elements with a delimiter (null prints as null).",
            "STRING_TO_ARRAY": "Splits a string on a regular expression.",
            "ARRAY_TO_MV": "An array as a multi-value string.",
        },
        native=_NATIVE,
    ),
    *specs(
        "scalar",
        "multi-value string",
        {
            "MV_TO_ARRAY": "A multi-value string as an array.",
            "MV_APPEND": "Appends a value.",
            "MV_PREPEND": "Prepends a value.",
            "MV_CONCAT": "Concatenates two multi-value strings.",
            "MV_CONTAINS": "Whether it holds a value (or all values of an array).",
            "MV_OVERLAP": "Whether it shares a value with an array.",
            "MV_LENGTH": "Number of values.",
            "MV_OFFSET": "Value at a 0-based index.",
            "MV_ORDINAL": "Value at a 1-based index.",
            "MV_OFFSET_OF": "0-based index of a value.",
            "MV_ORDINAL_OF": "1-based index of a value.",
            "MV_SLICE": "Values from a 0-based start to an exclusive end.",
            "MV_TO_STRING": "Joins the values with a delimiter.",
            "STRING_TO_MV": "Splits a string on a regular expression.",
            "MV_FILTER_ONLY": "Keeps the values in an array.",
            "MV_FILTER_NONE": "Drops the values in an array.",
            "MV_FILTER_REGEX": "Keeps the values matching a regular expression.",
            "MV_FILTER_PREFIX": "Keeps the values starting with a prefix.",
        },
        native=_NATIVE,
    ),
]
