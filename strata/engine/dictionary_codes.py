"""Dictionary codes of a historical's Arrow copies, in place of the strings they stand for.

A historical's Arrow copies hold string columns dictionary-encoded, one dictionary per segment.
Grouping on a code hashes an integer per row instead of a string. Across a request's copies, each
copy's codes are mapped into one sorted dictionary of all their values (`shared_codes`), so equal
strings get equal codes and code order is string order: a grouping on the shared codes answers as
one on the strings, and only the groups that survive are decoded.

Only copies whose every chunk of a column shares one dictionary without a null or a repeated value
qualify (`whole_coded`): a repeated value would split one group in two.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine.mapped_source import MappedRows, mapped, on_change
from strata.engine.segment_input import SegmentInput, reads_whole
from strata.query.columns import TIME_COLUMN

_lock = threading.Lock()
# per registered copy, by column: its checked dictionary (or None). Weak, so a dropped segment's
# mapped table is not pinned here once the requests reading it end.
_checked: weakref.WeakKeyDictionary[MappedRows, dict[str, pa.Array | None]] = weakref.WeakKeyDictionary()
_KEPT_UNIONS = 8
_ROWS_PER_VALUE = 8
# recent shared dictionaries, by the ids of the copies (kept in the value, so the ids stay theirs)
_Union = tuple[tuple[pa.Table, ...], pa.Array, list[np.ndarray]]
_unions: OrderedDict[tuple[tuple[int, ...], str], _Union] = OrderedDict()


def _forget_unions() -> None:
    with _lock:
        _unions.clear()


on_change(_forget_unions)  # a copy came or went: pin none of the old ones


def whole_coded(
    inputs: Sequence[SegmentInput], wanted: Sequence[str], columns: Sequence[str]
) -> list[MappedRows] | None:
    """The Arrow copies of `inputs` when all are read whole, each once, with the same types for
    `wanted`, and each of `columns` a dictionary of strings with one dictionary per copy; else None."""
    out: list[MappedRows] = []
    ids: set[str] = set()
    layout = None
    for inp in inputs:
        rows = mapped(inp.path)
        if rows is None or not reads_whole(inp) or any(r is rows for r in out) or inp.segment_id in ids:
            return None
        if any(c not in rows.types for c in wanted):
            return None
        mine = tuple(rows.types[c] for c in (TIME_COLUMN, *wanted))
        if layout is not None and mine != layout:
            return None
        layout = mine
        if not all(_coded(rows, column) for column in columns):
            return None
        out.append(rows)
        ids.add(inp.segment_id)
    return out


def codable(rows: Sequence[MappedRows], column: str) -> bool:
    """Whether `column` of every copy of `rows` is a dictionary of strings that `shared_codes` maps."""
    return all(_coded(r, column) for r in rows)


def few_values(rows: Sequence[MappedRows], column: str) -> bool:
    """Whether the copies' dictionaries of `column` (see `codable`) hold at most one value per
    `_ROWS_PER_VALUE` rows in all: their shared dictionary is then cheap to build (sorted once and
    kept) beside the rows it saves comparing, where a column of nearly unique values is not."""
    values: int = sum(len(d) for r in rows if (d := dictionary(r, column)) is not None)
    rows_in_all: int = sum(r.table.num_rows for r in rows)
    return values * _ROWS_PER_VALUE <= rows_in_all


def _coded(rows: MappedRows, column: str) -> bool:
    kind = rows.types.get(column)
    if kind is None or not (pa.types.is_dictionary(kind) and pa.types.is_string(kind.value_type)):
        return False
    return dictionary(rows, column) is not None


def dictionary(rows: MappedRows, column: str) -> pa.Array | None:
    """The one dictionary every chunk of `column` shares (empty when it has no chunk), or None when
    chunks differ or it repeats a value or holds a null (codes would then split a group). Checked
    once per copy."""
    with _lock:
        known = _checked.get(rows, {})
        if column in known:
            return known[column]
    chunks = rows.table.column(column).chunks
    found: pa.Array | None = chunks[0].dictionary if chunks else pa.array([], pa.string())
    for chunk in chunks[1:]:
        if found is not None and chunk.dictionary is not found and not chunk.dictionary.equals(found):
            found = None
    if found is not None and (found.null_count or pc.count_distinct(found).as_py() != len(found)):
        found = None
    with _lock:
        _checked.setdefault(rows, {})[column] = found
    return found


def shared_codes(rows: Sequence[MappedRows], column: str) -> tuple[pa.Array, pa.ChunkedArray]:
    """One sorted dictionary of every value of `column` in `rows`, and each row's index into it
    (null where the row's value is null), chunked as the copies are."""
    shared, mappings = shared_dictionary(rows, column)
    chunks = []
    for r, mapping in zip(rows, mappings, strict=True):
        identity = len(mapping) == len(shared) and bool(np.all(mapping == _ascending(len(shared))))
        for chunk in r.table.column(column).chunks:
            indices = chunk.indices
            if identity:  # the copy's dictionary is the shared one (every value, in order): as they are
                chunks.append(indices if indices.type == pa.int32() else indices.cast(pa.int32()))
            elif indices.null_count:
                chunks.append(pc.take(pa.array(mapping), indices))
            else:  # numpy's take: a few times faster than pyarrow's on integers
                chunks.append(pa.array(np.take(mapping, indices.to_numpy())))
    return shared, pa.chunked_array(chunks, pa.int32())


def _ascending(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int32)


def shared_dictionary(rows: Sequence[MappedRows], column: str) -> tuple[pa.Array, list[np.ndarray]]:
    """The sorted union of the copies' dictionaries of `column`, and for each copy where each of
    its codes lands in it; the last few are kept (the copies with them), as a node's dashboards
    ask over the same segments again and again."""
    tables = tuple(r.table for r in rows)
    key = (tuple(map(id, tables)), column)
    with _lock:
        hit = _unions.get(key)
        if hit is not None:
            _unions.move_to_end(key)
            return hit[1], hit[2]
    dictionaries = [dictionary(r, column) for r in rows]
    union = pa.concat_arrays([d for d in dictionaries if d is not None]).cast(pa.string())
    unique = pc.unique(union)
    shared = unique.take(pc.array_sort_indices(unique))
    positions = pc.index_in(union, value_set=shared).cast(pa.int32()).to_numpy()
    bounds = np.cumsum([0, *(0 if d is None else len(d) for d in dictionaries)])
    mappings = [positions[a:b] for a, b in itertools.pairwise(bounds)]
    with _lock:
        _unions[key] = (tables, shared, mappings)
        while len(_unions) > _KEPT_UNIONS:
            _unions.popitem(last=False)
    return shared, mappings
