"""Sort keys as numpy arrays, so result ordering (topN ranks, groupBy limit specs) is vectorised.

Every key is an int or float array where ascending order is the wanted order; callers combine
keys with `numpy.lexsort`. Strings order by one of Druid's string orderings with nulls first;
numbers order naturally with nulls first (Druid's natural-nulls-first comparators).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from strata.query.aggregators.base import as_array
from strata.query.duck import connection, query_arrow
from strata.query.string_comparators import LEXICOGRAPHIC, sort_key


def ordinal(values: pa.Array | pa.ChunkedArray, ordering: str = LEXICOGRAPHIC) -> np.ndarray:
    """Dense ranks (0 = first) of `values`, nulls first; equal values share a rank."""
    arr = as_array(values)
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        return _array_ordinal(arr)
    is_text = pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
    if not is_text or ordering == LEXICOGRAPHIC:
        if pa.types.is_floating(arr.type):
            arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr)
        ranks = np.asarray(
            pc.rank(arr, "ascending", tiebreaker="dense").to_numpy(zero_copy_only=False), np.int64
        )
        if arr.null_count:
            ranks[np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = 0  # nulls first
        return ranks
    encoded = pc.dictionary_encode(arr)
    distinct = encoded.dictionary.to_pylist()
    order = sorted(range(len(distinct)), key=lambda i: sort_key(ordering)(distinct[i]))
    rank_of = np.empty(len(distinct) + 1, dtype=np.int64)
    rank_of[np.asarray(order, dtype=np.int64)] = np.arange(1, len(distinct) + 1)
    rank_of[len(distinct)] = 0  # null
    # intp: what fancy indexing would convert Arrow's dictionary indices to anyway
    codes = np.asarray(
        pc.fill_null(encoded.indices, len(distinct)).to_numpy(zero_copy_only=False), dtype=np.intp
    )
    return rank_of[codes]


def _array_ordinal(arr: pa.Array) -> np.ndarray:
    """Dense ranks of whole arrays as Druid orders them: element by element, a null element first,
    a prefix before the longer array; a null array first of all.

    Each element becomes its own rank plus one (a null element 1), so no list holds a null and
    DuckDB's list ORDER BY, element-wise with the shorter prefix first, is exactly that order.
    """
    assert isinstance(arr, pa.ListArray | pa.LargeListArray)
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    elements = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    element_codes = ordinal(elements) + 1
    packed = _packed_ranks(arr, offsets - offsets[0], element_codes)
    if packed is not None:
        return packed
    codes = pa.array(element_codes, pa.int64())
    keys = pa.LargeListArray.from_arrays(pa.array(offsets - offsets[0]), codes, mask=arr.is_null())
    table = pa.table({"k": keys, "i": pa.array(np.arange(len(arr), dtype=np.int64))})
    ranked = query_arrow(
        connection(), table, "a", "SELECT i, dense_rank() OVER (ORDER BY k ASC NULLS FIRST) AS r FROM a"
    )
    out = np.empty(len(arr), dtype=np.int64)
    out[ranked.column("i").to_numpy()] = ranked.column("r").to_numpy()
    return out - 1 if arr.null_count else out


def _packed_ranks(arr: pa.Array, offsets: np.ndarray, codes: np.ndarray) -> np.ndarray | None:
    """`_array_ordinal` without DuckDB when every array fits one 63-bit key: each element's code
    (its rank plus one, a null element 1) in a fixed-width slot, the first element highest, 0 past
    the end (a prefix before the longer array); the keys' dense ranks are the arrays'. None when
    the longest array times the code width passes 63 bits."""
    lengths = np.diff(offsets)
    longest = int(lengths.max(initial=0))
    width = int(codes.max(initial=0)).bit_length()
    if longest * width > 63:
        return None
    position = np.arange(len(codes), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    shifted = codes.astype(np.uint64) << ((longest - 1 - position) * width).astype(np.uint64)
    sums = np.concatenate(([0], np.cumsum(shifted, dtype=np.uint64)))
    keys = (sums[offsets[1:]] - sums[offsets[:-1]]).astype(np.int64)  # exact: each key < 2**63
    if arr.null_count:
        keys[np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = -1
    ranks = np.unique(keys, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return ranks if arr.null_count else ranks + 1


def numeric_key(values: pa.Array | pa.ChunkedArray, descending: bool) -> np.ndarray:
    """Float key for numbers: ascending puts nulls first, descending puts them last."""
    arr = pc.cast(as_array(values), pa.float64())
    out = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64).copy()
    nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool) | np.isnan(out)
    if descending:
        out = -out
    out[nulls] = np.inf if descending else -np.inf
    return out


def group_positions(sorted_group_keys: list[np.ndarray]) -> np.ndarray:
    """Position of each row within its group, for rows already sorted by the group keys."""
    n = len(sorted_group_keys[0]) if sorted_group_keys else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in sorted_group_keys:
        change[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(change)
    group_of_row: npt.NDArray[np.intp] = np.cumsum(change) - 1
    group_start = starts[group_of_row]
    return np.arange(n, dtype=np.int64) - group_start


def segment_codes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    encoded = pc.dictionary_encode(as_array(values))
    return np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
