"""Druid's `flattenSpec`: fields read from nested input by JSONPath, before anything else reads them.

Fields: `root` (a top-level field, also written as its bare name), `path` (a JSONPath: `$`, `.key`,
`['key']`, `[n]` with `n` from the end when negative, `[*]` / `.*` for every element or value) and
`tree` (`nodes`: the keys from the root). `jq` fields are refused. With `useFieldDiscovery` (the
default) every top-level field stays readable beside the flattened ones, which shadow a top-level
field of the same name; without it only the listed fields are.

A path is evaluated on each row's values in Python, as Druid's flattener walks each record; a
path that finds nothing is null, and a wildcard gives the list of what it found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from strata.ingestion.dimension_values import json_values, values_column
from strata.ingestion.errors import SpecError
from strata.storage.segment_layout import is_json

WILDCARD = "*"
Step = str | int  # a key, an index, or WILDCARD


@dataclass(frozen=True)
class FlattenField:
    name: str
    steps: tuple[Step, ...]  # from the root; the first is a top-level field name


@dataclass(frozen=True)
class FlattenSpec:
    fields: tuple[FlattenField, ...]
    use_field_discovery: bool = True


_TOKEN = re.compile(
    r"""\.\.|\.\*|\.([^.\[\]]+)|\[\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|(-?\d+)|(\*))\s*\]"""
)


def parse_path(expr: str) -> tuple[Step, ...]:
    """A JSONPath of the supported subset as steps; `SpecError` for anything else."""
    text = expr.strip()
    if not text.startswith("$"):
        raise SpecError(f"flattenSpec path {expr!r} must start with '$'")
    steps: list[Step] = []
    pos = 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.group(0) == "..":
            raise SpecError(
                f"flattenSpec path {expr!r}: only '.key', ['key'], [n] and [*] steps are supported"
            )
        key, single, double, index, star = m.groups()
        if m.group(0) == ".*" or star:
            steps.append(WILDCARD)
        elif index is not None:
            steps.append(int(index))
        else:
            raw = key if key is not None else (single if single is not None else double)
            steps.append(re.sub(r"\\(.)", r"\1", raw) if key is None else raw)
        pos = m.end()
    return tuple(steps)


def _field(obj: Any) -> FlattenField:
    if isinstance(obj, str):
        return FlattenField(obj, (obj,))
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise SpecError(f"flattenSpec fields need a 'name': {obj!r}")
    name, kind = obj["name"], obj.get("type", "root")
    if kind == "root":
        return FlattenField(name, (name,))
    if kind == "path":
        if not isinstance(obj.get("expr"), str):
            raise SpecError(f"flattenSpec field {name!r}: a path field needs 'expr'")
        steps = parse_path(obj["expr"])
        if not steps or not isinstance(steps[0], str) or steps[0] == WILDCARD:
            raise SpecError(
                f"flattenSpec field {name!r}: the path must start with a field name ('$.field...')"
            )
        return FlattenField(name, steps)
    if kind == "tree":
        nodes = obj.get("nodes")
        if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
            raise SpecError(f"flattenSpec field {name!r}: a tree field needs 'nodes', a list of keys")
        return FlattenField(name, tuple(nodes))
    if kind == "jq":
        raise SpecError(
            f"flattenSpec field {name!r}: 'jq' fields are not supported; write the field as a 'path'"
        )
    raise SpecError(f"flattenSpec field {name!r}: type {kind!r} is not one of root, path, tree")


def parse_flatten_spec(obj: Any, input_type: str) -> FlattenSpec | None:
    """`inputFormat.flattenSpec` (None when absent or without fields and with discovery on)."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise SpecError("inputFormat.flattenSpec must be a JSON object")
    fields = tuple(_field(f) for f in obj.get("fields") or ())
    discovery = bool(obj.get("useFieldDiscovery", True))
    if not fields and discovery:
        return None
    if input_type not in ("json", "parquet"):
        raise SpecError(
            f"inputFormat.flattenSpec is only supported for json and parquet input, not {input_type}"
        )
    names = [f.name for f in fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"flattenSpec names fields more than once: {', '.join(dupes)}")
    return FlattenSpec(fields, discovery)


def walk(value: Any, steps: tuple[Step, ...]) -> Any:
    """What `steps` find in a parsed JSON value (None: nothing; a wildcard: the list of what it found)."""
    for i, step in enumerate(steps):
        if step == WILDCARD:
            children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
            found = [walk(child, steps[i + 1 :]) for child in children]
            return [f for f in found if f is not None]
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return None
            value = value[step]
        elif isinstance(value, dict):
            value = value.get(step)
        else:
            return None
        if value is None:
            return None
    return value


def python_values(column: pa.ChunkedArray) -> list[Any]:
    """A column's values as parsed JSON values (JSON text decoded)."""
    return json_values(column) if is_json(column.type) else column.to_pylist()


def flatten_table(table: pa.Table, spec: FlattenSpec) -> pa.Table:
    """The block's fields after flattening: each listed field evaluated per row, beside the
    top-level fields when `useFieldDiscovery`."""
    roots: dict[str, list[Any]] = {}
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for field in spec.fields:
        root = str(field.steps[0])
        if root not in table.column_names:
            columns[field.name] = pa.nulls(table.num_rows)
            continue
        if len(field.steps) == 1:
            columns[field.name] = table.column(root)
            continue
        if root not in roots:
            roots[root] = python_values(table.column(root))
        columns[field.name] = values_column([walk(v, field.steps[1:]) for v in roots[root]])
    if spec.use_field_discovery:
        kept = {n: table.column(n) for n in table.column_names if n not in columns}
        columns = {**kept, **columns}
    return pa.table(columns) if columns else table.select([])
