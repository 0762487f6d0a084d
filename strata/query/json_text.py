"""An answer's JSON written from Arrow columns: each value's text made by Arrow kernels, the rows
joined by Arrow kernels, no Python object per row.

A groupBy of millions of groups printed through Python dicts and orjson spends more time making
the dicts than the merge took. Here a column of integers is one cast, of doubles one orjson call
over the numpy array, of strings one regex test (the few values that need escapes go through
orjson one by one), of arrays its elements' texts joined per list. Anything else (floats, whose
spelling follows Druid's rules in `json_values`, binaries, unfinalized intermediates) is printed
value by value by orjson. Either way the bytes are those orjson prints for the Python rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.query.aggregators.base import as_array, json_values

OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS  # numpy values, non-string keys
ROWS_PER_PASS = 1 << 16  # rows joined at once: bounds the texts' memory and their 2 GiB offsets
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'  # what orjson escapes in a string
_NULL = pa.scalar(b"null", pa.binary())
Source = pa.Array | pa.ChunkedArray | Sequence[Any]  # an Arrow column, or Python values as printed


def answer_json(value: Any) -> bytes:
    """The compact JSON of Python values, as every Strata answer is printed."""
    return orjson.dumps(value, option=OPTIONS)


def python_texts(values: Sequence[Any]) -> pa.Array:
    """Each Python value's JSON, as orjson prints it inside a list."""
    return pa.array([orjson.dumps(v, option=OPTIONS) for v in values], pa.binary())


def column_texts(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each value's JSON as `json_values` makes it and orjson prints it (a null: `null`)."""
    arr = as_array(values)
    kind = arr.type
    if pa.types.is_float64(kind):
        return _double_texts(arr)
    if _plain(kind):
        return _element_texts(arr)
    return python_texts(json_values(arr))


def rows_text(
    pieces: Sequence[bytes | pa.Array], rows: int, line_end: bytes | None = None
) -> bytes | memoryview:
    """`rows` rows' text, each row the concatenation of `pieces` (constant texts, and text columns
    of one value a row): comma-separated, or each ended by `line_end`."""
    if rows == 0:
        return b""
    end = b"," if line_end is None else line_end
    merged = _merged_constants([*pieces, end])
    text: bytes | memoryview
    if not any(isinstance(p, pa.Array) for p in merged):
        text = b"".join(p for p in merged if isinstance(p, bytes)) * rows
    else:
        args = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in merged]
        joined = pc.binary_join_element_wise(*args, pa.scalar(b"", pa.binary()))
        first, last = joined.offset, joined.offset + len(joined)
        offsets = np.frombuffer(joined.buffers()[1], np.int32)
        text = memoryview(joined.buffers()[2])[int(offsets[first]) : int(offsets[last])]
    return text if line_end is not None else text[: len(text) - 1]  # the last comma off


def slice_texts(values: pa.Array | list[Any], start: int, rows: int) -> pa.Array:
    """`column_texts` of `rows` values from `start` (Arrow, or Python values as printed)."""
    if isinstance(values, list):
        return python_texts(values[start : start + rows])
    return column_texts(values.slice(start, rows))


def separated(items: Sequence[bytes | pa.Array], separator: bytes) -> list[bytes | pa.Array]:
    """`items` with `separator` between each two."""
    out: list[bytes | pa.Array] = []
    for i, item in enumerate(items):
        out += [separator, item] if i else [item]
    return out


def json_array(texts: Iterable[bytes | memoryview]) -> bytes:
    """One JSON array of the rows of consecutive `rows_text` passes."""
    return b"[" + b",".join(t for t in texts if len(t)) + b"]"


def _merged_constants(pieces: Sequence[bytes | pa.Array]) -> list[bytes | pa.Array]:
    out: list[bytes | pa.Array] = []
    for p in pieces:
        if isinstance(p, bytes) and out and isinstance(out[-1], bytes):
            out[-1] += p
        elif not isinstance(p, bytes) or p:
            out.append(p)
    return out


def _plain(kind: pa.DataType) -> bool:
    """Types whose `to_pylist` values orjson prints as the vectorised texts do."""
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_string(kind):
        return True
    if pa.types.is_large_string(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _plain(kind.value_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _plain(kind.value_type) or pa.types.is_floating(kind.value_type)
    return False


def _element_texts(arr: pa.Array) -> pa.Array:
    """Texts of a `_plain` column, or of list elements (printed as `to_pylist` gives them)."""
    kind = arr.type
    if pa.types.is_integer(kind):
        texts = pc.cast(pc.cast(arr, pa.string()), pa.binary())
    elif pa.types.is_boolean(kind):
        texts = pc.if_else(arr, pa.scalar(b"true", pa.binary()), pa.scalar(b"false", pa.binary()))
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        texts = _string_texts(arr)
    elif pa.types.is_dictionary(kind):
        assert isinstance(arr, pa.DictionaryArray)
        texts = _element_texts(arr.dictionary).take(arr.indices)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        texts = _list_texts(arr)
    else:  # list elements of other types (floats: NaN prints as null there, not as json_values' "NaN")
        return python_texts(arr.to_pylist())
    return pc.fill_null(texts, _NULL)


def _string_texts(arr: pa.Array) -> pa.Array:
    quote, nothing = pa.scalar('"', arr.type), pa.scalar("", arr.type)
    quoted = pc.binary_join_element_wise(quote, arr, quote, nothing)
    escape = pc.fill_null(pc.match_substring_regex(arr, _NEEDS_ESCAPE), False)
    if pc.any(escape).as_py():
        escaped = python_texts(pc.filter(arr, escape).to_pylist())
        quoted = pc.replace_with_mask(quoted, escape, escaped.cast(quoted.type))
    return pc.cast(quoted, pa.binary())


def _list_texts(arr: pa.Array) -> pa.Array:
    assert isinstance(arr, pa.ListArray | pa.LargeListArray)
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
    elements = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    texts = _element_texts(elements)
    lists = pa.LargeListArray.from_arrays(pa.array(offsets - offsets[0]), texts)
    inner = pc.binary_join(lists, pa.scalar(b",", pa.binary()))
    wrapped = pc.binary_join_element_wise(b"[", inner, b"]", b"")
    return pc.if_else(arr.is_null(), _NULL, wrapped)


def _double_texts(arr: pa.Array) -> pa.Array:
    """Doubles as orjson prints Python floats, from one orjson call over the numpy values split at
    its commas (a double's text has none); a column with NaN or an infinity prints value by value
    (`json_values` spells those as Druid does)."""
    if len(arr) == 0:
        return pa.array([], pa.binary())
    filled = np.asarray(pc.fill_null(arr, 0.0).to_numpy(zero_copy_only=False), np.float64)
    if not np.isfinite(filled).all():
        return python_texts(json_values(arr))
    printed = np.frombuffer(orjson.dumps(filled, option=OPTIONS)[1:-1], np.uint8)
    commas = np.flatnonzero(printed == ord(","))
    data = np.delete(printed, commas)
    ends = commas - np.arange(len(commas))
    offsets = np.concatenate(([0], ends, [len(data)])).astype(np.int32)
    texts = pa.Array.from_buffers(pa.binary(), len(filled), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pc.if_else(arr.is_null(), _NULL, texts) if arr.null_count else texts
