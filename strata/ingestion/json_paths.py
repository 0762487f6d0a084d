"""The typed columns of a nested (COMPLEX<json>) column's literal leaf paths, as Druid's nested
columns keep their fields.

Every non-null literal reachable through objects and arrays is a leaf at its normalized JSONPath
(`$.a.b`, `$.a[0]`, `$['odd.key']`); an array holding only literals (or nulls) is one leaf, an
ARRAY. A path's column in a segment is LONG (integers and booleans), DOUBLE (some fractional),
STRING (some strings; numbers then as text), or ARRAY<LONG|DOUBLE|STRING> by the same rule over the
elements; a path holding both literals and arrays gets no column (queries read it from the JSON
text). Rows without the path are null in its column. At most `MAX_PATHS` paths per column and
segment get columns, the first met in row order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.dimension_values import java_string
from strata.storage.segment_layout import DOUBLE, LONG, STRING, arrow_type, path_column

MAX_PATHS = 128
_SIMPLE_KEY = re.compile(r"[^.\[\]'\" ]+")
Literal = bool | int | float | str


def path_part(key: str) -> str:
    if _SIMPLE_KEY.fullmatch(key):
        return f".{key}"
    return "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _literal(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def leaves(value: Any, path: str = "$") -> Iterator[tuple[str, Any]]:
    """(path, literal or list of literals) of every leaf of a parsed JSON value."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from leaves(child, path + path_part(str(key)))
    elif isinstance(value, list):
        if all(_literal(e) for e in value):
            yield path, value
        else:
            for i, child in enumerate(value):
                yield from leaves(child, f"{path}[{i}]")
    elif value is not None:
        yield path, value


def _kind(v: Literal) -> str:
    if isinstance(v, (bool, int)):
        return LONG
    return DOUBLE if isinstance(v, float) else STRING


def _lub(kinds: set[str]) -> str:
    if kinds <= {LONG}:
        return LONG
    return DOUBLE if kinds <= {LONG, DOUBLE} else STRING


def _convert(v: Any, kind: str) -> Any:
    if v is None:
        return None
    if kind == LONG:
        return int(v)
    return float(v) if kind == DOUBLE else java_string(v)


@dataclass(frozen=True)
class PathColumn:
    path: str
    column_type: str
    values: pa.Array

    def entry(self, column: str) -> dict[str, str]:
        return {"path": self.path, "column": path_column(column, self.path), "type": self.column_type}


def path_columns(values: pa.Array) -> list[PathColumn]:
    """The typed path columns of one segment's JSON text column."""
    storage = values.storage if isinstance(values, pa.ExtensionArray) else values
    encoded = pc.dictionary_encode(storage)
    distinct = [dict(leaves(orjson.loads(t))) for t in encoded.dictionary.to_pylist()]
    indices = encoded.indices.fill_null(len(distinct))
    order: dict[str, None] = {}
    for leaf_values in distinct:
        order.update(dict.fromkeys(leaf_values))
    out = []
    for path in list(order)[:MAX_PATHS]:
        found = [d.get(path) for d in distinct]
        arrays = [v for v in found if isinstance(v, list)]
        scalars = [v for v in found if v is not None and not isinstance(v, list)]
        if arrays and scalars:
            continue
        if arrays:
            elements = {_kind(e) for a in arrays for e in a if e is not None}
            kind = _lub(elements) if elements else (STRING if any(arrays) else LONG)
            column_type = f"ARRAY<{kind}>"
            converted = [None if a is None else [_convert(e, kind) for e in a] for a in found]
        else:
            column_type = kind = _lub({_kind(v) for v in scalars})
            converted = [_convert(v, kind) for v in found]
        by_distinct = pa.array([*converted, None], arrow_type(column_type))
        out.append(PathColumn(path, column_type, by_distinct.take(indices)))
    return out
