"""Raw input values -> the staged form of string, `auto` and `json` dimensions.

A block's rows are staged (`ingestion.prepare`) before the segments that hold them are known, so
what a column becomes is decided later, per segment (`ingestion.segment_columns`). Staging keeps
what that decision needs and nothing a later block could contradict:

- a `string` dimension is a string column, or a list of strings where the input held lists (a
  multi-value row, its values as strings, ordered by `multiValueHandling`); a row with no value
  (`null`, `[]`, `[null]`) is null;
- an `auto` or `json` dimension is the value as JSON text (Arrow's `arrow.json` type), so a
  segment can still tell `1` from `1.0` and `"1"`, and lists from objects.

Values are converted column-wise (Arrow, DuckDB) where the input is typed; only mixed or nested
inputs are walked value by value in Python, as Druid converts them (`java_string`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.scratch_duck import scratch_connection
from strata.query.java_text import java_double
from strata.storage.segment_layout import JSON_TYPE, is_json

STRING_LIST = pa.list_(pa.string())


def java_string(value: Any) -> str | None:
    """A value as Druid's string conversion spells it (Java's `String.valueOf`)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return "[" + ", ".join("null" if v is None else str(java_string(v)) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{k}={'null' if v is None else java_string(v)}" for k, v in value.items()) + "}"
        )
    return str(value)


def is_nested(value: Any) -> bool:
    """An object, or a list holding lists or objects: what only a COMPLEX<json> column holds."""
    return isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(e, (list, dict)) for e in value)
    )


# -- JSON text ------------------------------------------------------------------------------------
def json_text(value: Any) -> str | None:
    """A Python value as compact JSON text (None stays None)."""
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer past 64 bits
        return orjson.dumps(str(value)).decode()


def json_storage(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A JSON text column's text as a plain string array (Arrow's kernels take no extension types)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    return texts.storage if isinstance(texts, pa.ExtensionArray) else texts


def json_values(texts: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The Python values of a JSON text column (null stays None)."""
    return [None if t is None else orjson.loads(t) for t in json_storage(texts).to_pylist()]


def json_column(values: Sequence[Any]) -> pa.Array:
    """Python values as a JSON text column."""
    return pa.ExtensionArray.from_storage(JSON_TYPE, pa.array([json_text(v) for v in values], pa.string()))


def _duck_column(arr: pa.Array, sql: str, target: pa.DataType, source: str = "block") -> pa.Array:
    """`sql` (over column `v` of `source`, a query over table `block`) evaluated by DuckDB over
    `arr`, as `target`; rows keep their order."""
    with scratch_connection() as con:
        con.register("block", pa.table({"v": arr}))
        out = con.sql(f"SELECT {sql} AS v FROM {source}").to_arrow_table().column("v").combine_chunks()
    if target == JSON_TYPE:
        return pa.ExtensionArray.from_storage(JSON_TYPE, out.cast(pa.string()))
    return out.cast(target)


def stage_json(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """An `auto` / `json` dimension's input as JSON text, typed Arrow input converted by DuckDB."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if is_json(arr.type):
        return arr
    if pa.types.is_null(arr.type):
        return pa.ExtensionArray.from_storage(JSON_TYPE, pa.nulls(len(arr), pa.string()))
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.string())
    return _duck_column(arr, "to_json(v)", JSON_TYPE)


# -- multi-value strings --------------------------------------------------------------------------
_HANDLING_SQL = {
    "SORTED_ARRAY": "list_sort(v, 'ASC', 'NULLS FIRST')",
    "SORTED_SET": (
        "CASE WHEN list_count(v) < len(v) THEN list_prepend(NULL, list_sort(list_distinct(v)))"
        " ELSE list_sort(list_distinct(v)) END"
    ),
    "ARRAY": "v",
}


def _normalized_lists(lists: pa.Array, handling: str) -> pa.Array:
    """Lists of strings in Druid's multi-value form: no value (`[]`, `[null]`) is null, two or more
    values ordered by `handling` (SORTED_ARRAY: sorted, nulls first; SORTED_SET: sorted, distinct;
    ARRAY: as given)."""
    ordered = _HANDLING_SQL[handling]
    source = f"(SELECT CASE WHEN len(v) > 1 THEN {ordered} ELSE v END AS v FROM block)"
    sql = "CASE WHEN len(v) = 0 OR (len(v) = 1 AND v[1] IS NULL) THEN NULL ELSE v END"
    return _duck_column(lists, sql, STRING_LIST, source)


def _primitive(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
        or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)
        or pa.types.is_dictionary(t)
    )  # fmt: skip


def _as_strings(value: Any) -> list[str | None] | str | None:
    if isinstance(value, list):
        return [java_string(v) for v in value]
    return java_string(value)


def stage_multi_value(arr: pa.Array | pa.ChunkedArray, handling: str) -> pa.Array | None:
    """A `string` dimension's input when it holds lists (or values to walk one by one): strings,
    or lists of strings ordered by `handling`; None when the input is a plain scalar column (the
    caller converts it as before)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and _primitive(t.value_type):
        values = arr.values
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        strings = pc.cast(values, pa.string())
        lists = pa.ListArray.from_arrays(pc.cast(arr.offsets, pa.int32()), strings, mask=arr.is_null())
        return _normalized_lists(lists, handling)
    if not (is_json(t) or pa.types.is_nested(t)):
        return None
    raw = json_values(arr) if is_json(t) else arr.to_pylist()
    converted = [_as_strings(v) for v in raw]
    if not any(isinstance(v, list) for v in converted):
        return pa.array(converted, pa.string())
    lists = pa.array([v if v is None or isinstance(v, list) else [v] for v in converted], STRING_LIST)
    return _normalized_lists(lists, handling)


def values_column(values: Sequence[Any]) -> pa.Array:
    """Python values (a parsed JSON field, a flattened path, a transform's output) as a column:
    typed when Arrow can hold them as they are (scalars of one type, lists of such), else JSON
    text, so objects keep exactly their keys and mixed values their types (`1` beside `2.5` too)."""
    kinds: set[type] = set()
    for v in values:
        for e in v if isinstance(v, list) else (v,):
            kinds.add(type(e))
    if not kinds & {dict, list} and not {int, float} <= kinds:
        try:
            arr = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            pass
        else:
            if not pa.types.is_nested(arr.type) or _primitive(arr.type.value_type):
                return arr
    return json_column(values)
