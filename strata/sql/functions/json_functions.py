"""Druid's JSON functions over DuckDB JSON values.

Strata's segments hold no nested (COMPLEX<json>) columns, but a statement can still build JSON
(PARSE_JSON of a string column, JSON_OBJECT) and read it, and DuckDB's JSON type does that. Paths
are JSONPath as in Druid (`$.a.b`, `$.a[0]`; `$.` is the root). JSON_VALUE yields only literals
(null for an object or array, unless RETURNING an ARRAY type asks for an array of literals), as
in Druid.
"""

from __future__ import annotations

from sqlglot import exp

from strata.query.errors import invalid
from strata.query.expressions.json_functions import keys_of, literal_as
from strata.query.expressions.typed import ARRAY_DOUBLE, ARRAY_LONG, ARRAY_STRING, DOUBLE, LONG, STRING
from strata.sql.functions.fragments import arguments, duck, kind_of_type, quote, sql_of, string_value, typed
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs


def _path(node: exp.Expr, function: str) -> str:
    """A JSONPath argument as DuckDB SQL text."""
    if isinstance(node, exp.JSONPath):
        text = node.sql(dialect="duckdb").strip("'")
    else:
        text = string_value(node, function, "path") or "$"
    if not text.startswith("$"):
        raise invalid("Function [%s]: path [%s] is not a JSONPath", function, text)
    return quote("$" if text in ("$", "$.") else text)


def _json_value(node: exp.Expr, ctx: Context) -> exp.Expr:
    """As the data nodes read it (`literal_as`): a literal of the RETURNING type, an ARRAY type
    taking an array of literals (UNNEST reads it), VARCHAR when none is given."""
    found = f"json_extract({sql_of(node.this)}, {_path(node.args['path'], 'JSON_VALUE')})"
    found = f"(CASE WHEN json_type({found}) = 'NULL' THEN NULL ELSE {found} END)"
    returning = node.args.get("returning")
    kind = _value_kind(returning) if isinstance(returning, exp.DataType) else STRING
    value = literal_as(found, kind)
    return typed(duck(value.sql), value.duck_type)


def _value_kind(dtype: exp.DataType) -> str:
    """Druid's kind for a RETURNING type (a BOOLEAN is a LONG, as Druid stores it)."""
    if dtype.is_type(exp.DataType.Type.ARRAY) and dtype.expressions:
        element = _value_kind(dtype.expressions[0])
        return {LONG: ARRAY_LONG, DOUBLE: ARRAY_DOUBLE}.get(element, ARRAY_STRING)
    family = kind_of_type(dtype)
    if family in ("BIGINT", "BOOLEAN"):
        return LONG
    return DOUBLE if family == "DOUBLE" else STRING


def _json_query(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    return typed(duck(f"json_extract({sql_of(args[0])}, {_path(args[1], 'JSON_QUERY')})"), "JSON")


def _json_query_array(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    found = f"json_extract({sql_of(args[0])}, {_path(args[1], 'JSON_QUERY_ARRAY')})"
    text = (
        f"(CASE WHEN {found} IS NULL THEN NULL"
        f" WHEN json_type({found}) = 'ARRAY' THEN CAST({found} AS JSON[]) ELSE [{found}] END)"
    )
    return typed(duck(text), "JSON[]")


def _json_keys(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    found = f"json_extract({sql_of(args[0])}, {_path(args[1], 'JSON_KEYS')})"
    return typed(duck(keys_of(found)), "VARCHAR[]")


def _json_object(node: exp.Expr, ctx: Context) -> exp.Expr:
    pairs = []
    for pair in node.expressions:
        pairs += [sql_of(pair.this), sql_of(pair.expression)]
    return typed(duck(f"json_object({', '.join(pairs)})"), "JSON")


def _json_merge(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    merged = f"json({sql_of(args[0])})"
    for other in args[1:]:
        merged = f"json_merge_patch({merged}, json({sql_of(other)}))"
    return typed(duck(merged), "JSON")


def _call(template: str, result: str) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        return typed(duck(template.format(*(sql_of(a) for a in arguments(node)))), result)

    return rewrite


JSON_REWRITES: dict[str, Rewrite] = {
    "PARSE_JSON": _call("json({0})", "JSON"),
    "TRY_PARSE_JSON": _call("(CASE WHEN json_valid({0}) THEN json({0}) END)", "JSON"),
    "TO_JSON_STRING": _call("CAST(to_json({0}) AS VARCHAR)", "VARCHAR"),
    "JSON_VALUE": _json_value,
    "JSON_QUERY": _json_query,
    "JSON_QUERY_ARRAY": _json_query_array,
    "JSON_KEYS": _json_keys,
    "JSON_OBJECT": _json_object,
    "JSON_MERGE": _json_merge,
    "JSON_PATHS": _call("strata_json_paths(CAST(json({0}) AS VARCHAR))", "VARCHAR[]"),
}


_NATIVE = frozenset({
    "JSON_KEYS", "JSON_MERGE", "JSON_OBJECT", "JSON_PATHS", "JSON_QUERY", "JSON_QUERY_ARRAY", "JSON_VALUE",
    "PARSE_JSON", "TRY_PARSE_JSON", "TO_JSON_STRING",
})  # fmt: skip
JSON_SPECS: list[FunctionSpec] = specs(
    "scalar",
    "JSON",
    {
        "JSON_KEYS": "Field names of a JSON object at a path.",
        "JSON_MERGE": "Merges JSON objects, the rightmost value winning.",
        "JSON_OBJECT": "Builds a JSON object from KEY ... VALUE ... pairs.",
        "JSON_PATHS": "Paths of the literal values of a JSON value.",
        "JSON_QUERY": "The JSON value at a path.",
        "JSON_QUERY_ARRAY": "The JSON values at a path, as an array.",
        "JSON_VALUE": "The literal at a path [RETURNING type].",
        "PARSE_JSON": "Parses a string as JSON (invalid JSON is an error).",
        "TRY_PARSE_JSON": "Parses a string as JSON, null when invalid.",
        "TO_JSON_STRING": "Serializes a value as JSON text.",
    },
    native=_NATIVE,
)
