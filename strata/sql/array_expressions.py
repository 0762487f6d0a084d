"""SQL's ARRAY_, MV_ and JSON_ functions as native expressions, as Druid's planner writes them.

ARRAY_ functions map one to one (`ARRAY_LENGTH` is `array_length`); an MV_ function is its array
counterpart over the column's values, its result a multi-value string again (`array_to_mv`, so a
virtual column of it groups value by value) where Druid types it VARCHAR; MV_FILTER_ONLY / NONE /
REGEX / PREFIX keep values with `filter` (over a column, with a literal list, pattern or prefix, a
row left with no value is null, as Druid's filtered virtual columns give it). JSON_VALUE takes its
RETURNING type as json_value's third argument; the other JSON_ functions keep their names.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from strata.query.errors import QueryUnsupported, invalid

Write = Callable[[exp.Expr], str]

# SQL name -> native function (same arguments)
_SAME = {
    "MV_TO_ARRAY": "mv_to_array",
    "ARRAY_TO_MV": "array_to_mv",
    "ARRAY_LENGTH": "array_length",
    "ARRAY_OFFSET": "array_offset",
    "ARRAY_ORDINAL": "array_ordinal",
    "ARRAY_OFFSET_OF": "array_offset_of",
    "ARRAY_ORDINAL_OF": "array_ordinal_of",
    "ARRAY_CONTAINS": "array_contains",
    "ARRAY_OVERLAP": "array_overlap",
    "SCALAR_IN_ARRAY": "scalar_in_array",
    "ARRAY_APPEND": "array_append",
    "ARRAY_PREPEND": "array_prepend",
    "ARRAY_CONCAT": "array_concat",
    "ARRAY_SLICE": "array_slice",
    "ARRAY_TO_STRING": "array_to_string",
    "STRING_TO_ARRAY": "string_to_array",
    "MV_LENGTH": "array_length",
    "MV_OFFSET": "array_offset",
    "MV_ORDINAL": "array_ordinal",
    "MV_OFFSET_OF": "array_offset_of",
    "MV_ORDINAL_OF": "array_ordinal_of",
    "MV_OVERLAP": "mv_overlap",
    "MV_TO_STRING": "array_to_string",
    "JSON_QUERY": "json_query",
    "JSON_QUERY_ARRAY": "json_query_array",
    "JSON_KEYS": "json_keys",
    "JSON_PATHS": "json_paths",
    "PARSE_JSON": "parse_json",
    "TRY_PARSE_JSON": "try_parse_json",
    "TO_JSON_STRING": "to_json_string",
    "JSON_MERGE": "json_merge",
}
# multi-value results: the array function, then back to a multi-value string
_MULTI_VALUE = {
    "MV_APPEND": "array_append",
    "MV_PREPEND": "array_prepend",
    "MV_CONCAT": "array_concat",
    "MV_SLICE": "array_slice",
    "STRING_TO_MV": "string_to_array",
}
# sqlglot's own nodes for some of them
_NODES: dict[type[exp.Expr], str] = {
    exp.ArraySize: "ARRAY_LENGTH",
    exp.ArrayContains: "ARRAY_CONTAINS",
    exp.ArrayConcat: "ARRAY_CONCAT",
    exp.ArrayToString: "ARRAY_TO_STRING",
    exp.StringToArray: "STRING_TO_ARRAY",
    exp.ArraySlice: "ARRAY_SLICE",
    exp.ArrayAppend: "ARRAY_APPEND",
    exp.ArrayPrepend: "ARRAY_PREPEND",
    exp.ArrayOverlaps: "ARRAY_OVERLAP",
    exp.JSONKeys: "JSON_KEYS",
    exp.ParseJSON: "PARSE_JSON",
}
_RETURNING = {
    "BIGINT": "LONG",
    "INT": "LONG",
    "INTEGER": "LONG",
    "SMALLINT": "LONG",
    "TINYINT": "LONG",
    "BOOLEAN": "LONG",
    "DOUBLE": "DOUBLE",
    "FLOAT": "DOUBLE",
    "REAL": "DOUBLE",
    "DECIMAL": "DOUBLE",
    "VARCHAR": "STRING",
    "CHAR": "STRING",
    "TEXT": "STRING",
}


def function_name(node: exp.Expr) -> str | None:
    """The SQL name of an array, multi-value or JSON function call this module writes."""
    name = node.name.upper() if isinstance(node, exp.Anonymous) else _NODES.get(type(node))
    if isinstance(node, exp.Array):
        return "ARRAY"
    if isinstance(node, exp.JSONValue):
        return "JSON_VALUE"
    if isinstance(node, exp.JSONObject):
        return "JSON_OBJECT"
    if name is None:
        return None
    known = name in _SAME or name in _MULTI_VALUE or name.startswith("MV_FILTER_") or name == "MV_CONTAINS"
    return name if known else None


def arguments(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    if isinstance(node, exp.JSONKeys):
        path = node.expression
        if path is None:
            return [node.this]
        text = path.sql(dialect="duckdb").strip("'") if isinstance(path, exp.JSONPath) else None
        return [node.this, exp.Literal.string(text) if text is not None else path]
    if isinstance(node, exp.ArraySlice):
        return [a for a in (node.this, node.args.get("start"), node.args.get("end")) if a is not None]
    out = [node.this] if isinstance(node.this, exp.Expr) else []
    for key in ("expression", "expressions"):
        value = node.args.get(key)
        if isinstance(value, exp.Expr):
            out.append(value)
        elif isinstance(value, list):
            out.extend(value)
    return out


def write_function(node: exp.Expr, write: Write) -> str:
    """The native expression of an array, multi-value or JSON function call."""
    name = function_name(node)
    if name == "ARRAY":
        return f"array({', '.join(write(e) for e in node.expressions)})"
    if name == "JSON_VALUE":
        return _json_value(node, write)
    if name == "JSON_OBJECT":
        pairs = [f"{write(kv.this)}, {write(kv.expression)}" for kv in node.expressions]
        return f"json_object({', '.join(pairs)})"
    assert name is not None
    args = [write(a) for a in arguments(node)]
    if name in _SAME:
        return f"{_SAME[name]}({', '.join(args)})"
    if name == "MV_CONTAINS":  # a null row contains nothing: false, where array_contains is null
        return f"nvl(array_contains({', '.join(args)}), 0)"
    if name in _MULTI_VALUE:
        return f"array_to_mv({_MULTI_VALUE[name]}({', '.join(args)}))"
    values, listed = [*arguments(node), exp.null(), exp.null()][:2]
    # Druid plans a column's values kept by a literal list, pattern or prefix as a filtered virtual
    # column (ListFilteredVirtualColumn, ...), whose row left with no value is null; an
    # expression's is the empty array
    return _filter(name, args, none_is_null=isinstance(values, exp.Column) and _literal(listed))


def _literal(node: exp.Expr) -> bool:
    """Whether `node` is a literal or an ARRAY of literals (Druid's planner reads it as one)."""
    if isinstance(node, exp.Array):
        return all(isinstance(e, (exp.Literal, exp.Null)) for e in node.expressions)
    return isinstance(node, exp.Literal)


def _filter(name: str, args: list[str], *, none_is_null: bool) -> str:
    if len(args) != 2:
        raise invalid("Function [%s] needs 2 arguments", name)
    values, other = args
    keep = {
        "MV_FILTER_ONLY": f"array_contains({other}, __x)",
        "MV_FILTER_NONE": f"!array_contains({other}, __x)",
        "MV_FILTER_REGEX": f"regexp_like(__x, {other})",
        "MV_FILTER_PREFIX": f"(substring(__x, 0, strlen({other})) == {other})",
    }.get(name)
    if keep is None:
        raise QueryUnsupported(f"Function [{name}] is not supported")
    kept = f"filter((__x) -> {keep}, {values})"
    return f"array_to_mv({f'nullif({kept}, <STRING>[])' if none_is_null else kept})"


def _json_value(node: exp.Expr, write: Write) -> str:
    path = node.args.get("path")
    text = path.sql(dialect="duckdb").strip("'") if isinstance(path, exp.JSONPath) else None
    if text is None and isinstance(path, exp.Literal) and path.is_string:
        text = path.this
    if text is None:
        raise QueryUnsupported("JSON_VALUE needs a literal path")
    args = [write(node.this), "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"]
    returning = node.args.get("returning")
    if isinstance(returning, exp.DataType):
        args.append(f"'{returning_type(returning)}'")
    return f"json_value({', '.join(args)})"


def returning_type(data_type: exp.DataType) -> str:
    """The native type of a RETURNING clause (`BIGINT ARRAY` is ARRAY<LONG>)."""
    if data_type.is_type("array"):
        inner = data_type.expressions[0] if data_type.expressions else None
        return f"ARRAY<{returning_type(inner) if isinstance(inner, exp.DataType) else 'STRING'}>"
    kind = _RETURNING.get(str(getattr(data_type.this, "name", data_type.this)).upper())
    if kind is None:
        raise QueryUnsupported(f"JSON_VALUE ... RETURNING {data_type.sql(dialect='druid')} is not supported")
    return kind
