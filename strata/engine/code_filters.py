"""A filter's terms on dictionary-coded string columns, decided once per dictionary value.

Where a request's string column is read as codes into one sorted dictionary of all its Arrow
copies (`dictionary_codes.shared_codes`), a term of the filter that reads that column alone holds,
or not, for each value of the dictionary and for null, whichever row carries it. It is evaluated
once over the dictionary (its own SQL, so Druid's semantics stay those of `strata.query.filters`),
and rows are kept by an integer test on their code instead of a string test per row.

Only the terms of the filter's top-level AND are replaced: WHERE keeps a row where every term is
true, so a test true on exactly the rows where the term is true stands in for it (a term's false
and unknown need not be told apart). An OR or NOT across columns stays on the strings.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from strata.query.duck import quote_ident
from strata.query.filters import AndFilter, Filter

_POSITION = "__strata_position"
_MAX_RUNS = 16  # more runs of kept codes than this: one boolean per row looked up by code instead


def split_terms(flt: Filter | None, coded: Collection[str]) -> tuple[dict[str, list[Filter]], list[Filter]]:
    """The terms of `flt`'s top-level AND (nested ANDs flattened) that read one of `coded` alone,
    by that column, and the other terms."""
    by_column: dict[str, list[Filter]] = {}
    rest: list[Filter] = []
    for term in _terms(flt):
        columns = term.columns()
        if len(columns) == 1 and (column := next(iter(columns))) in coded:
            by_column.setdefault(column, []).append(term)
        else:
            rest.append(term)
    return by_column, rest


def _terms(flt: Filter | None) -> list[Filter]:
    if flt is None:
        return []
    if isinstance(flt, AndFilter):
        return [t for f in flt.fields for t in _terms(f)]
    return [flt]


def kept_codes(
    conn: duckdb.DuckDBPyConnection,
    terms: Sequence[Filter],
    column: str,
    values: pa.Array,
    types: Mapping[str, str],
) -> tuple[np.ndarray, bool]:
    """The positions in `values` (a column's dictionary, no null) where every one of `terms` is
    true, ascending, and whether they are all true for a null value."""
    candidates = pa.table({column: pa.concat_arrays([values.cast(pa.string()), pa.nulls(1, pa.string())]),
                           _POSITION: pa.array(np.arange(len(values) + 1, dtype=np.int64))})  # fmt: skip
    name = f"__strata_dictionary_{uuid.uuid4().hex}"
    where = " AND ".join(t.to_sql({**types, column: "VARCHAR"}) for t in terms)
    conn.register(name, candidates)
    try:
        found = conn.execute(f"SELECT {_POSITION} FROM {quote_ident(name)} WHERE {where}").fetchnumpy()
    finally:
        conn.unregister(name)
    positions = np.sort(np.asarray(found[_POSITION], dtype=np.int64))
    null_kept = bool(len(positions)) and int(positions[-1]) == len(values)
    return (positions[:-1] if null_kept else positions), null_kept


def code_condition(code: str, kept: np.ndarray, size: int, null_kept: bool) -> str | None:
    """SQL true exactly where `code` (an index into a dictionary of `size` values, null for a null
    value) is among `kept` or, with `null_kept`, null; None when that takes more than a few ranges
    of codes (then `code_mask` serves)."""
    ident = quote_ident(code)
    if len(kept) == size:
        values = f"{ident} IS NOT NULL"
    elif not len(kept):
        values = "FALSE"
    else:
        runs, others = _runs(kept), _runs(np.setdiff1d(np.arange(size), kept, assume_unique=True))
        if min(len(runs), len(others)) > _MAX_RUNS:
            return None
        # most codes kept: the few ranges left out
        values = f"NOT ({_ranges(ident, others)})" if len(others) < len(runs) else f"({_ranges(ident, runs)})"
    return f"({values} OR {ident} IS NULL)" if null_kept else values


def code_mask(codes: pa.ChunkedArray, kept: np.ndarray, size: int, null_kept: bool) -> pa.ChunkedArray:
    """Per row of `codes`, whether its code is among `kept` (or null, with `null_kept`): one lookup
    in a table of `size` booleans, for sets of codes too scattered to spell as ranges."""
    lookup = np.zeros(size, dtype=bool)
    lookup[kept] = True
    chunks = []
    for chunk in codes.chunks:
        if chunk.null_count:
            filled = chunk.fill_null(0).to_numpy()
            mask = np.where(chunk.is_null().to_numpy(zero_copy_only=False), null_kept, lookup[filled])
        else:
            mask = lookup[chunk.to_numpy()]
        chunks.append(pa.array(mask, pa.bool_()))
    return pa.chunked_array(chunks, pa.bool_())


def _runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """Ascending positions as (first, last) runs of consecutive ones."""
    if not len(positions):
        return []
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = [0, *breaks.tolist()]
    ends = [*(b - 1 for b in breaks.tolist()), len(positions) - 1]
    return [(int(positions[a]), int(positions[b])) for a, b in zip(starts, ends, strict=True)]


def _ranges(ident: str, runs: Sequence[tuple[int, int]]) -> str:
    parts = (f"{ident} = {a}" if a == b else f"{ident} BETWEEN {a} AND {b}" for a, b in runs)
    return " OR ".join(parts)
