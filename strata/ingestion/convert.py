"""Vectorised conversion of raw input columns to the types a segment stores, with a mask of bad rows.

Each conversion tries one Arrow cast over the whole column first; only when that fails does it fall
back to converting each distinct value in Python, which marks exactly the rows that cannot convert.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.storage.segment_layout import is_json
from timeline import parse_instant

ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
}  # fmt: skip


def _no_bad(n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool)


def _by_distinct(arr: pa.Array, fn: Callable[[Any], Any], target: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """Apply `fn` to each distinct non-null value; values where it raises become null and are marked bad."""
    encoded = pc.dictionary_encode(arr)
    converted: list[Any] = []
    failed: list[bool] = []
    for v in encoded.dictionary.to_pylist():
        try:
            converted.append(fn(v))
            failed.append(False)
        except (ValueError, TypeError, OverflowError):
            converted.append(None)
            failed.append(True)
    indices = encoded.indices
    values = pa.array(converted, target).take(indices)
    bad_lookup = np.asarray([*failed, False], dtype=bool)
    idx = indices.fill_null(len(failed)).to_numpy(zero_copy_only=False)
    return values, bad_lookup[idx]


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        raise TypeError("nested or multi-value values are not supported")
    return str(v)


def _to_int(v: Any) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        v = v.strip()
        try:
            return int(v)
        except ValueError:
            pass
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        raise ValueError("not a finite number")
    return int(f)  # Druid truncates like Java's longValue


def _to_float(v: Any) -> float:
    if isinstance(v, (list, dict)):
        raise TypeError("nested value")
    return float(v.strip() if isinstance(v, str) else v)


def convert_column(
    arr: pa.Array | pa.ChunkedArray, kind: str
) -> tuple[pa.Array | pa.ChunkedArray, np.ndarray]:
    """`arr` as the segment type of `kind` (string/long/float/double) and a bad-row mask."""
    target = ARROW_TYPES[kind]
    n = len(arr)
    t = arr.type
    if t == target:
        return arr, _no_bad(n)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(t):
        arr, t = arr.dictionary_decode(), t.value_type
    if t == target:
        return arr, _no_bad(n)
    if pa.types.is_null(t):
        return pa.nulls(n, target), _no_bad(n)
    if is_json(t):  # mixed or nested input: each distinct JSON text read, then converted
        convert = {"string": _text, "long": _to_int}.get(kind, _to_float)
        return _by_distinct(arr.storage, lambda text: convert(orjson.loads(text)), target)
    if pa.types.is_timestamp(t):
        arr, t = pc.cast(arr, pa.timestamp("ms")).cast(pa.int64()), pa.int64()
    if kind == "string":
        if (
            pa.types.is_boolean(t)
            or pa.types.is_integer(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
        ):
            return pc.cast(arr, target), _no_bad(n)
        return _by_distinct(arr, _text, target)
    if pa.types.is_boolean(t):
        arr = pc.cast(arr, pa.int8())
        t = arr.type
    if pa.types.is_integer(t) or (pa.types.is_floating(t) and kind != "long"):
        return pc.cast(arr, target, safe=False), _no_bad(n)
    if pa.types.is_floating(t):  # to long: truncate toward zero; NaN/inf cannot be a long
        bad = pc.fill_null(pc.invert(pc.is_finite(arr)), False).to_numpy(zero_copy_only=False)
        return pc.cast(pc.trunc(pc.if_else(bad, None, arr)), target, safe=False), bad
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            return pc.cast(arr, target), _no_bad(n)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        nulled = pc.if_else(pc.equal(pc.utf8_trim_whitespace(arr), ""), None, arr)  # "" counts as missing
        return _by_distinct(nulled, _to_int if kind == "long" else _to_float, target)
    return _by_distinct(arr, _to_int if kind == "long" else _to_float, target)


# -- timestamps -----------------------------------------------------------------------------------
_SCALE = {"millis": 1.0, "auto": 1.0, "iso": 1.0, "posix": 1000.0, "micro": 1e-3, "nano": 1e-6}


def _numeric_ms(arr: pa.Array, fmt: str) -> tuple[pa.Array, np.ndarray]:
    scale = _SCALE[fmt]
    if pa.types.is_integer(arr.type):
        a = pc.cast(arr, pa.int64())
        if scale >= 1:
            return pc.multiply(a, int(scale)), _no_bad(len(arr))
        nulls = pc.is_null(a).to_numpy(zero_copy_only=False)
        floored = pc.fill_null(a, 0).to_numpy(zero_copy_only=False) // round(1 / scale)
        return pa.array(floored, pa.int64(), mask=nulls), _no_bad(len(arr))
    f = pc.cast(arr, pa.float64())
    bad = pc.fill_null(pc.invert(pc.is_finite(f)), False).to_numpy(zero_copy_only=False)
    scaled = pc.floor(pc.multiply(pc.if_else(bad, None, f), scale))
    return pc.cast(scaled, pa.int64(), safe=False), bad


def _parse_text_instant(fmt: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if fmt != "iso":
            try:
                return math.floor(float(text.strip()) * _SCALE[fmt])
            except ValueError:
                if fmt != "auto":
                    raise
        return parse_instant(text)

    return parse


def parse_timestamps(
    arr: pa.Array | pa.ChunkedArray, fmt: str, missing_ms: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Epoch ms per row and a bad-row mask (unparseable, or null without a missingValue)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr, t = arr.dictionary_decode(), t.value_type
    bad = _no_bad(n)
    ms: pa.Array | None
    if pa.types.is_null(t):
        ms = pa.nulls(n, pa.int64())
    elif pa.types.is_timestamp(t):
        # a naive timestamp is read as UTC: its stored count already is the UTC instant, so cast
        # it as it is (assume_timezone would look up the zone per value for no change)
        ms = pc.cast(pc.cast(arr, pa.timestamp("ms", tz=t.tz)), pa.int64())
    elif pa.types.is_integer(t) or pa.types.is_floating(t):
        ms, bad = _numeric_ms(arr, fmt)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        ms = None
        if fmt in ("iso", "auto"):
            for target in (pa.timestamp("ms", tz="UTC"), pa.timestamp("ms")):
                try:
                    ms = pc.cast(pc.cast(arr, target), pa.int64())
                    break
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue
        elif fmt == "millis":
            with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
                ms = pc.cast(arr, pa.int64())
        if ms is None:
            ms, bad = _by_distinct(arr, _parse_text_instant(fmt), pa.int64())
    else:
        ms, bad = _by_distinct(arr, lambda v: _parse_text_instant(fmt)(_text(v)), pa.int64())
    assert ms is not None
    nulls = pc.is_null(ms).to_numpy(zero_copy_only=False) & ~bad
    if missing_ms is not None:
        ms = pc.fill_null(ms, missing_ms)
    else:
        bad = bad | nulls
    values = pc.fill_null(ms, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return values, bad
