"""A timeseries answer put together from each cached partial's own encoded rows.

A dashboard's timeseries over hourly segments at hour (or finer) granularity merges nothing: each
bucket lies in one segment, so the merged table is the partials' rows side by side, and the
finalized answer is each row finalized on its own (aggregators' final values, post-aggregators,
the timestamp), ordered by bucket, cut at the limit. A cached partial is the same table object
on every hit (broker_service.cached_partials keeps it decoded), so its rows are finalized and
encoded as JSON once and remembered while the table lives; a repeat joins a hundred remembered
fragments instead of merging, building a dict per row and encoding the list again. When one
segment changes, only its partial is new: the other 99 fragments stand.

Only where that is exactly the full path's answer, byte for byte: no bucket in two partials (that
would need combining), no grand total, no null bucket or NaN (DuckDB merges those), `all`
granularity never. Anything else returns None and the full merge runs.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Sequence

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from broker_service.query_memo import PerQuery
from strata.query import Query
from strata.query.aggregation_engine import BUCKET
from strata.query.bucket_limit import MAX_BUCKETS, check_buckets
from strata.query.timeseries import TimeseriesQuery
from strata.server.json_response import encode_json

KEYS_PER_TABLE = 8  # finalize shapes remembered per partial (few dashboards share one segment)
MAX_ROWS_PER_TABLE = 4_096  # larger partials are merged by Arrow as before

# one partial's rows: buckets in ascending order, and each row's encoded JSON
Rows = tuple[tuple[int, ...], tuple[bytes, ...]]

_memo: dict[int, tuple[weakref.ref[pa.Table], dict[bytes, Rows | None]]] = {}
_lock = threading.Lock()


def finalize_key(query: TimeseriesQuery) -> bytes:
    """What a row's finalized JSON depends on: aggregators, post-aggregators, the granularity
    (its time zone formats the timestamp), the finalize flag. Not the intervals, order or limit."""
    return query.cache_key() + orjson.dumps(
        [[p.to_json() for p in query.post_aggregations], query.context.finalize]
    )


def _finalize_key_of(query: Query) -> bytes:
    assert isinstance(query, TimeseriesQuery)
    return finalize_key(query)


_finalize_keys = PerQuery(_finalize_key_of)  # a repeated body's parse asks again and again


def _row_query(query: TimeseriesQuery) -> TimeseriesQuery:
    """The query finalizing one partial's rows: ascending, no limit, no grand total."""
    context = dataclasses.replace(query.context, grand_total=False)
    return dataclasses.replace(query, descending=False, limit=None, context=context)


def _rows(query: TimeseriesQuery, table: pa.Table) -> Rows | None:
    """One partial's rows finalized and encoded on their own, or None where that would not be
    what the full merge gives (NaN, a null bucket, a large partial)."""
    if table.num_rows > MAX_ROWS_PER_TABLE:
        return None
    for column in table.columns:
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            return None
    merged = query.merge([table])
    buckets = merged.column(BUCKET).to_pylist()
    if None in buckets:
        return None
    rows = query.finalize(merged)  # ascending by bucket: the row query's order
    order = sorted(buckets)
    return tuple(order), tuple(encode_json(r) for r in rows)


_UNKNOWN: Rows = ((), ())  # compared by identity: not yet finalized for this key


def _remembered(query: TimeseriesQuery, key: bytes, table: pa.Table) -> Rows | None:
    entry = _memo.get(id(table))
    if entry is not None and entry[0]() is table:
        shapes = entry[1]
        if key in shapes:
            return shapes[key]
    else:
        shapes = {}

        def forget(ref: weakref.ref[pa.Table], ident: int = id(table)) -> None:
            with _lock:
                current = _memo.get(ident)
                if current is not None and current[0] is ref:
                    del _memo[ident]

        with _lock:
            _memo[id(table)] = (weakref.ref(table, forget), shapes)
    rows = _rows(query, table)
    if len(shapes) >= KEYS_PER_TABLE:
        shapes.clear()
    shapes[key] = rows
    return rows


class TooManyNew:
    """More partials than allowed are new to the memo: finalize them off the event loop."""


TOO_MANY_NEW = TooManyNew()


def fragment_answer(
    query: Query, partials: Sequence[pa.Table], max_rows: int, new_limit: int | None = None
) -> bytes | TooManyNew | None:
    """The encoded answer from the partials' remembered rows, or None: merge as usual. At most
    `new_limit` partials not seen before are finalized here (else TOO_MANY_NEW, nothing done)."""
    if not isinstance(query, TimeseriesQuery) or query.granularity.is_all or query.context.grand_total:
        return None
    key = _finalize_keys(query)
    tables = [t for t in partials if t.num_rows]
    buckets: list[int] = []
    fragments: list[bytes] = []
    add_buckets, add_fragments, memo_get = buckets.extend, fragments.extend, _memo.get
    for table in tables:  # the warm path: one memo lookup per cached partial, inlined
        entry = memo_get(id(table))
        rows = entry[1].get(key, _UNKNOWN) if entry is not None and entry[0]() is table else _UNKNOWN
        if rows is None:
            return None  # one partial the merge must take: so must the whole answer
        if rows is _UNKNOWN:
            break
        add_buckets(rows[0])
        add_fragments(rows[1])
    else:
        return _joined(query, buckets, fragments, max_rows)
    return _with_new(query, key, tables, max_rows, new_limit)


def _with_new(
    query: TimeseriesQuery, key: bytes, tables: list[pa.Table], max_rows: int, new_limit: int | None
) -> bytes | TooManyNew | None:
    """Some partials new to the memo: finalized here, at most `new_limit` of them."""
    known: list[Rows | None] = []
    for table in tables:
        entry = _memo.get(id(table))
        known.append(entry[1].get(key, _UNKNOWN) if entry is not None and entry[0]() is table else _UNKNOWN)
    new = [i for i, rows in enumerate(known) if rows is _UNKNOWN]
    if new_limit is not None and len(new) > new_limit:
        return TOO_MANY_NEW
    row_query = _row_query(query)
    for i in new:
        known[i] = _remembered(row_query, key, tables[i])
    every = [rows for rows in known if rows is not None]
    if len(every) != len(known):
        return None
    buckets = [bucket for rows in every for bucket in rows[0]]
    fragments = [fragment for rows in every for fragment in rows[1]]
    return _joined(query, buckets, fragments, max_rows)


def _joined(
    query: TimeseriesQuery, buckets: list[int], fragments: list[bytes], max_rows: int
) -> bytes | None:
    """The partials' rows as one answer: ordered by bucket, reversed if descending, cut at the limit."""
    if not fragments or len(set(buckets)) != len(buckets) or len(buckets) > max_rows:
        return None  # nothing, a bucket in two partials (the merge combines those), or too many
    if len(buckets) > MAX_BUCKETS:
        check_buckets(len(buckets), query.granularity.to_json())  # raises, as the merge would
    if sorted(buckets) != buckets:  # C-level both, where a pairwise check ran Python per pair
        ordered = sorted(zip(buckets, fragments, strict=True), key=lambda pair: pair[0])
        fragments = [f for _, f in ordered]
    if query.descending:
        fragments.reverse()
    if query.limit is not None:
        fragments = fragments[: query.limit]
    return b"[" + b",".join(fragments) + b"]"
