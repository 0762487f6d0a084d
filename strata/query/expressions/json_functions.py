"""Druid's JSON expression functions over COMPLEX<json> values (DuckDB's JSON type).

Paths are Druid's JSONPath subset (`$`, `.name`, `['name']`, `[index]`), rewritten as DuckDB
paths. `json_value` yields literals only: null for an object, an array (unless the requested type
is an ARRAY) and a JSON null; with a type it casts as Druid does (a JSON boolean is 1 or 0 as a
number). `json_query` yields the JSON value itself. A STRING given where JSON is expected is the
JSON string holding it (`parse_json` reads its text instead).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from strata.query.duck import quote_str
from strata.query.errors import invalid
from strata.query.expressions.parser import Literal, Node
from strata.query.expressions.typed import (
    ARRAY_DOUBLE,
    ARRAY_JSON,
    ARRAY_LONG,
    ARRAY_STRING,
    DOUBLE,
    JSON,
    LONG,
    NULL,
    STRING,
    Scope,
    Typed,
    as_text,
    cast_to,
    element_kind,
    is_array_kind,
)

FunctionCompiler = Callable[[Scope, tuple[Node, ...]], Typed]
_PART = re.compile(
    r"""\.([^.\[\]'"]+)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*(-?\d+)\s*\]"""
)
VALUE_TYPES = {"LONG": LONG, "DOUBLE": DOUBLE, "FLOAT": DOUBLE, "STRING": STRING, "ARRAY<LONG>": ARRAY_LONG,
               "ARRAY<DOUBLE>": ARRAY_DOUBLE, "ARRAY<STRING>": ARRAY_STRING}  # fmt: skip


def path_parts(path: str) -> list[str | int]:
    """A Druid JSONPath's steps: field names and array indexes; anything else is refused."""
    text = path.strip()
    if not text.startswith("$"):
        raise invalid("JSONPath [%s] must start with '$'", path)
    parts: list[str | int] = []
    pos = 1
    if text[pos:] == ".":  # `$.` is the root, as Druid reads it
        return parts
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None:
            raise invalid(
                "JSONPath [%s] is not supported: Druid's paths use .name, ['name'] and [index]", path
            )
        name, single, double, index = m.groups()
        parts.append(int(index) if index is not None else (name or single or double or ""))
        pos = m.end()
    return parts


def duck_path(parts: list[str | int]) -> str:
    """The DuckDB path of Druid path steps (names quoted, so any character is safe)."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]" if p >= 0 else f"[#{p}]"  # DuckDB counts from the end after `#`
        else:
            out += f'."{_escape(p)}"'
    return quote_str(out)


def canonical_path(parts: list[str | int]) -> str:
    """Druid's normal spelling of a path (`$.a[0].b`), as nested columns name their fields."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.fullmatch(r"[A-Za-z_$][\w$]*", p):
            out += f".{p}"
        else:
            out += "['" + p.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return out


def _escape(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', '\\"')


def _path_arg(name: str, node: Node) -> list[str | int]:
    if not isinstance(node, Literal) or not isinstance(node.value, str):
        raise invalid("Function [%s] needs a JSONPath string literal as its path", name)
    return path_parts(node.value)


def as_json(t: Typed) -> str:
    """A value as JSON (a STRING as the JSON string holding it)."""
    if t.kind == JSON:
        return t.sql
    return cast_to(t, JSON).sql


def _found(scope: Scope, args: tuple[Node, ...], name: str) -> str:
    """The JSON at the path, SQL null where there is none or it is a JSON null."""
    value = scope.compile(args[0])
    found = f"json_extract({as_json(value)}, {duck_path(_path_arg(name, args[1]))})"
    return f"(CASE WHEN json_type({found}) = 'NULL' THEN NULL ELSE {found} END)"


def literal_as(found: str, kind: str) -> Typed:
    """A JSON value (maybe null) as a Druid literal of `kind`: null unless it is a literal (or, for
    an array kind, an array of literals: one holding an array or an object is null)."""
    json_type = f"json_type({found})"
    if is_array_kind(kind):
        element = literal_as('"__j"', element_kind(kind))
        elements = f"CAST({found} AS JSON[])"
        items = f'list_transform({elements}, lambda "__j": {element.sql})'
        nested = f"len(list_filter({elements}, lambda \"__j\": json_type(\"__j\") IN ('OBJECT', 'ARRAY')))"
        return Typed(f"(CASE WHEN {json_type} = 'ARRAY' AND {nested} = 0 THEN {items} END)", kind)
    text = f"json_extract_string({found}, '$')"
    scalar = f"{json_type} NOT IN ('OBJECT', 'ARRAY', 'NULL')"
    if kind == STRING:
        return Typed(f"(CASE WHEN {scalar} THEN {text} END)", STRING)
    boolean = f"CAST({text} = 'true' AS INTEGER)"  # JSON true / false read as numbers: 1 / 0
    number = f"(CASE WHEN {json_type} = 'BOOLEAN' THEN {boolean} ELSE TRY_CAST({text} AS DOUBLE) END)"
    if kind == DOUBLE:
        return Typed(f"(CASE WHEN {scalar} THEN {number} END)", DOUBLE)
    return Typed(f"(CASE WHEN {scalar} THEN CAST(trunc({number}) AS BIGINT) END)", LONG)


def _json_value(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) not in (2, 3):
        raise invalid("Function [json_value] needs 2 or 3 arguments, got %d", len(args))
    kind = STRING
    if len(args) == 3:
        if not isinstance(args[2], Literal) or not isinstance(args[2].value, str):
            raise invalid("Function [json_value] needs a type name literal as its third argument")
        kind = VALUE_TYPES.get(args[2].value.upper(), "")
        if not kind:
            raise invalid("Function [json_value] cannot return type [%s]", args[2].value)
    return literal_as(_found(scope, args, "json_value"), kind)


def _json_query(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) != 2:
        raise invalid("Function [json_query] needs 2 arguments, got %d", len(args))
    return Typed(_found(scope, args, "json_query"), JSON)


def _json_query_array(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) != 2:
        raise invalid("Function [json_query_array] needs 2 arguments, got %d", len(args))
    found = _found(scope, args, "json_query_array")
    text = (
        f"(CASE WHEN {found} IS NULL THEN NULL WHEN json_type({found}) = 'ARRAY' "
        f"THEN CAST({found} AS JSON[]) ELSE [{found}] END)"
    )
    return Typed(text, ARRAY_JSON)


def _json_keys(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) != 2:
        raise invalid("Function [json_keys] needs 2 arguments, got %d", len(args))
    return Typed(keys_of(_found(scope, args, "json_keys")), ARRAY_STRING)


def keys_of(found: str) -> str:
    """Druid's JSON_KEYS of a JSON value: an object's field names, an array's indexes (`["0", "1"]`),
    else null."""
    length = f"CAST(json_array_length({found}) AS BIGINT)"
    indexes = f"list_transform(range({length}), lambda __i: CAST(__i AS VARCHAR))"
    return f"(CASE json_type({found}) WHEN 'OBJECT' THEN json_keys({found}) WHEN 'ARRAY' THEN {indexes} END)"


def _json_paths(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) != 1:
        raise invalid("Function [json_paths] needs 1 argument, got %d", len(args))
    value = as_json(scope.compile(args[0]))
    return Typed(f"strata_json_paths(CAST({value} AS VARCHAR))", ARRAY_STRING)


def _json_object(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) % 2:
        raise invalid("Function [json_object] needs key and value pairs")
    parts = []
    for i in range(0, len(args), 2):
        key = scope.compile(args[i])
        if key.kind != STRING:
            raise invalid("Function [json_object] needs string keys")
        parts += [key.sql, as_json(scope.compile(args[i + 1]))]
    return Typed(f"json_object({', '.join(parts)})", JSON)


def _parse_json(strict: bool) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        name = "parse_json" if strict else "try_parse_json"
        if len(args) != 1:
            raise invalid("Function [%s] needs 1 argument, got %d", name, len(args))
        value = scope.compile(args[0])
        if value.kind == JSON:
            return value
        if value.kind not in (STRING, NULL):
            if strict:
                raise invalid("Function [parse_json] needs a STRING argument")
            return Typed("CAST(NULL AS JSON)", JSON)
        text = as_text(value)
        if strict:
            return Typed(f"json({text})", JSON)
        return Typed(f"(CASE WHEN json_valid({text}) THEN json({text}) END)", JSON)

    return compile_


def _to_json_string(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) != 1:
        raise invalid("Function [to_json_string] needs 1 argument, got %d", len(args))
    value = scope.compile(args[0])
    return Typed(f"CAST({as_json(value)} AS VARCHAR)", STRING)


def _json_merge(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) < 2:
        raise invalid("Function [json_merge] needs at least 2 arguments")
    values = []
    for a in args:
        v = scope.compile(a)
        values.append(f"json({as_text(v)})" if v.kind == STRING else as_json(v))
    merged = values[0]
    for other in values[1:]:
        merged = f"json_merge_patch({merged}, {other})"
    return Typed(merged, JSON)


JSON_FUNCTIONS: dict[str, FunctionCompiler] = {
    "json_value": _json_value,
    "json_query": _json_query,
    "json_query_array": _json_query_array,
    "json_keys": _json_keys,
    "json_paths": _json_paths,
    "json_object": _json_object,
    "parse_json": _parse_json(True),
    "try_parse_json": _parse_json(False),
    "to_json_string": _to_json_string,
    "json_merge": _json_merge,
}
