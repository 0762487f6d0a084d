"""Per-segment topN partials grouped on dictionary codes rather than strings.

A historical's Arrow copies hold string columns dictionary-encoded, one dictionary per segment.
Grouping a request's segments on (segment ordinal, code) hashes two integers per row instead of
a string. The grouped rows come back as Arrow; a first cut on values alone (`_candidates`, numpy)
leaves about `segment_keep` rows per segment, only those are mapped back to strings through their
own segment's dictionary, and a segment left with more (ties at its cut) is cut exactly by
`TopNQuery.top` (ties broken as Druid's engine breaks them, as `cut_sql` does). A node's one merged
partial groups on codes in one sorted dictionary of all the copies instead (an unfiltered count
or long/double sum by `np.bincount` over a dense (segment, code) key, else in DuckDB), so ties
break on codes in numpy (`segment_cut`) and only the survivors are decoded and summed.

Taken only where it answers as the generic path (`grouping.group_rows` + `cut_sql`) does: a
plain string dimension, `all` granularity, no virtual columns, every segment read whole from its
Arrow copy with the same column types, one dictionary per segment column. Else `None`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine.dictionary_codes import dictionary, shared_codes, shared_dictionary, whole_coded
from strata.engine.grouping import stamp_window_starts, window_starts
from strata.engine.mapped_source import ORDINAL, MappedRows, view
from strata.engine.segment_input import SegmentInput, read_schema, unified_types
from strata.query.aggregation_engine import BUCKET, agg_col, dim_col
from strata.query.aggregators.simple import CountAggregator, NumericAggregator
from strata.query.base import SEGMENT_COLUMN
from strata.query.columns import SEGMENT_INDEX, TIME_COLUMN
from strata.query.duck import quote_ident, run_arrow
from strata.query.segment_cut import segment_cut
from strata.query.topn import TopNQuery

_CODE = "__strata_code"


def coded_partials(
    query: TopNQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table | None:
    """Each segment's best `segment_keep` rows (as `run_partials` cuts them in SQL), or None where
    this path does not apply."""
    found = _coded_source(query, inputs)
    if found is None:
        return None
    rows, types, others = found
    plan, dim = query.plan, query.dimension
    projections = [ORDINAL, f"{_CODE}", f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}",
                   f"{quote_ident(dim.dimension)}", *map(quote_ident, others)]  # fmt: skip
    source = view(rows, [TIME_COLUMN, dim.dimension, *others], codes=(dim.dimension, _CODE))
    relation = _filtered(f"SELECT {', '.join(projections)} FROM {source}", query, types)
    aggs = [e for i, a in enumerate(plan.aggregators) for e in a.partial_sql(agg_col(i), types, None)]
    column = query.rank_column()
    if column is None:
        return None
    grouped = f"SELECT {ORDINAL}, {_CODE}, {', '.join(aggs)} FROM ({relation}) GROUP BY 1, 2"
    candidates = _candidates(run_arrow(conn, grouped), column, query.segment_keep)
    table = _labelled(candidates, rows, dim.dimension)
    segments = table.column(SEGMENT_INDEX).to_numpy()
    ids = pa.array([i.segment_id for i in inputs], pa.string())
    table = table.append_column(BUCKET, pa.array(np.zeros(table.num_rows, np.int64)))
    table = plan._conform(table.append_column(SEGMENT_COLUMN, ids.take(table.column(SEGMENT_INDEX))))
    # a segment with more candidates than it keeps has ties at its cut: ranked by the string too
    over = np.bincount(segments)[segments] > query.segment_keep if len(segments) else np.zeros(0, bool)
    if over.any():
        cut = query.top(table.filter(over), query.segment_keep, per_segment=True)
        table = pa.concat_tables([table.filter(~over), cut])
    return stamp_window_starts(table, inputs) if table.num_rows else table


def coded_merged(
    query: TopNQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table | None:
    """What summing `coded_partials` gives (`TopNQuery.summed`): rows grouped on (segment, code
    in one sorted dictionary of all the copies' values), each segment cut in numpy as Druid cuts
    it (`segment_cut`; code order is string order), only the survivors decoded and summed.
    None where this path does not apply."""
    plan, dim = query.plan, query.dimension
    column = query.rank_column()
    found = _coded_source(query, inputs)
    if found is None or column is None:
        return None
    rows, types, others = found
    values, mappings = shared_dictionary(rows, dim.dimension)
    grouped = _grouped_in_numpy(query, rows, mappings, dim.dimension)
    if grouped is None:
        values, codes = shared_codes(rows, dim.dimension)
        grouped = _grouped_in_duckdb(query, conn, rows, codes, types, others)
    metric = grouped.column(column).cast(pa.float64()).to_numpy(zero_copy_only=False)
    rank = np.where(np.isnan(metric), np.inf, -metric)  # best first; null and NaN last
    order = pc.fill_null(grouped.column(_CODE), -1).to_numpy()  # null first, then string order
    kept = grouped.filter(
        pa.array(segment_cut(grouped.column(ORDINAL).to_numpy(), rank, order, query.segment_keep))
    )
    # `all`: the earliest cursor start stamps the answer, matched or not (as merging partials does)
    starts = window_starts(inputs)
    bucket = min(starts.values(), default=0)
    labels = {SEGMENT_COLUMN: pa.nulls(kept.num_rows, pa.string()),
              BUCKET: pa.array(np.full(kept.num_rows, bucket, np.int64)),
              dim_col(0): values.take(kept.column(_CODE))}  # fmt: skip
    cut = pa.table({**labels, **{n: kept.column(n) for n in kept.column_names if n not in (ORDINAL, _CODE)}})
    summed = query.summed(conn, plan._conform(cut))
    if summed.num_rows or not starts:
        return summed
    # no row matched: one marker (every column null but the bucket), answered with an empty list
    marker = {f.name: pa.nulls(1, f.type) for f in summed.schema}
    marker[BUCKET] = pa.array([bucket], pa.int64())
    return pa.table(marker, schema=summed.schema)


def _grouped_in_duckdb(
    query: TopNQuery, conn: duckdb.DuckDBPyConnection, rows: Sequence[MappedRows], codes: pa.ChunkedArray,
    types: dict[str, str], others: list[str],
) -> pa.Table:  # fmt: skip
    """(ordinal, code, intermediates) of `rows` grouped per segment and shared code, in DuckDB."""
    plan, dim = query.plan, query.dimension.dimension
    source = view(rows, [TIME_COLUMN, dim, *others], extra=[(_CODE, codes)])
    projections = [ORDINAL, _CODE, f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}", quote_ident(dim),
                   *map(quote_ident, others)]  # fmt: skip
    relation = _filtered(f"SELECT {', '.join(projections)} FROM {source}", query, types)
    aggs = [e for i, a in enumerate(plan.aggregators) for e in a.partial_sql(agg_col(i), types, None)]
    return run_arrow(conn, f"SELECT {ORDINAL}, {_CODE}, {', '.join(aggs)} FROM ({relation}) GROUP BY 1, 2")


def _grouped_in_numpy(
    query: TopNQuery, rows: Sequence[MappedRows], mappings: Sequence[np.ndarray], dim: str
) -> pa.Table | None:
    """The (ordinal, code) grouping of `rows` as DuckDB's statement returns it, by `np.bincount`
    over each copy's own dictionary indices (a dense key as long as its dictionary, null last),
    only the groups present mapped into the shared dictionary (`mappings`): no hash table, no pass
    over the rows to recode them. Only for an unfiltered query of counts and long/double sums of
    columns without nulls (long sums small enough that doubles add them exactly), and dictionaries
    not much larger than the rows."""
    plan = query.plan
    total = sum(r.table.num_rows for r in rows)
    if plan.filter is not None or sum(len(m) + 1 for m in mappings) > 4 * total + 1024:
        return None
    fields: list[str | None] = []  # None: a count
    longs: list[bool] = []  # the output is a long (a count or a long sum)
    for agg in plan.aggregators:
        if type(agg) is CountAggregator:
            fields.append(None)
            longs.append(True)
            continue
        if type(agg) is not NumericAggregator or agg.op != "sum" or agg.kind not in ("long", "double"):
            return None
        wanted = pa.int64() if agg.kind == "long" else pa.float64()
        chunks = [c for r in rows for c in r.table.column(agg.field).chunks]
        if any(c.type != wanted or c.null_count for c in chunks):
            return None
        if agg.kind == "long" and chunks:
            bounds = [pc.min_max(c).values() for c in chunks if len(c)]
            largest = max((max(abs(lo.as_py()), abs(hi.as_py())) for lo, hi in bounds), default=0)
            if float(largest) * total >= 2.0**53:
                return None
        fields.append(agg.field)
        longs.append(agg.kind == "long")
    ordinals: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    columns: list[list[np.ndarray]] = [[] for _ in fields]
    for r, mapping in zip(rows, mappings, strict=True):
        local = _local_codes(r, dim, len(mapping))  # null: len(mapping)
        counts = np.bincount(local, minlength=len(mapping) + 1)
        present = np.flatnonzero(counts)
        ordinals.append(np.full(len(present), r.ordinal, np.int64))
        codes.append(np.append(mapping, -1)[present])
        for i, field in enumerate(fields):
            if field is None:
                columns[i].append(counts[present])
                continue
            weights = np.concatenate([c.to_numpy() for c in r.table.column(field).chunks] or [np.zeros(0)])
            total_of = np.bincount(local, weights=weights, minlength=len(mapping) + 1)[present]
            columns[i].append(np.rint(total_of).astype(np.int64) if longs[i] else total_of)
    code = np.concatenate(codes) if codes else np.zeros(0, np.int32)
    out: dict[str, pa.Array] = {
        ORDINAL: pa.array(np.concatenate(ordinals) if ordinals else np.zeros(0, np.int64)),
        _CODE: pa.array(code, pa.int32(), mask=code < 0),
    }
    for i, parts in enumerate(columns):
        whole = np.concatenate(parts) if parts else np.zeros(0)
        out[agg_col(i)] = pa.array(whole, pa.int64() if longs[i] else pa.float64())
    return pa.table(out)


def _local_codes(rows: MappedRows, dim: str, null_code: int) -> np.ndarray:
    """Each row's index into its copy's own dictionary of `dim`, `null_code` where null."""
    parts = []
    for chunk in rows.table.column(dim).chunks:
        indices = chunk.indices
        if indices.null_count:
            indices = pc.fill_null(indices.cast(pa.int32()), null_code)
        parts.append(indices.to_numpy())
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def _coded_source(
    query: TopNQuery, inputs: Sequence[SegmentInput]
) -> tuple[list[MappedRows], dict[str, str], list[str]] | None:
    """The Arrow copies of `inputs`, the SQL types of the columns read and the columns other than
    time and the dimension, where grouping on dictionary codes answers as grouping on strings."""
    plan, dim = query.plan, query.dimension
    if dim.extraction_fn is not None or dim.output_type != "STRING" or not plan.granularity.is_all:
        return None
    if not query.plain_table or dim.value_filter is not None:
        return None
    wanted = list(
        dict.fromkeys([*plan.input_columns(), *(sorted(plan.filter.columns()) if plan.filter else [])])
    )
    if plan.virtual_columns.needed(wanted) or dim.dimension not in wanted:
        return None
    rows = whole_coded(inputs, wanted, [dim.dimension])
    if not rows or query.rank_column() is None:
        return None
    types = unified_types([read_schema(i.path) for i in inputs], wanted)
    types[TIME_COLUMN] = "BIGINT"
    return rows, types, [c for c in wanted if c not in (TIME_COLUMN, dim.dimension)]


def _filtered(relation: str, query: TopNQuery, types: dict[str, str]) -> str:
    if query.plan.filter is None:
        return relation
    return f"SELECT * FROM ({relation}) WHERE {query.plan.filter.to_sql(types)}"


def _candidates(grouped: pa.Table, column: str, keep: int) -> pa.Table:
    """The rows of `grouped` that may be among their segment's best `keep` by `column` (descending,
    null and NaN last): every value at least the segment's keep-th best (ties at the cut all stay;
    nulls only where fewer than `keep` values exist). Decided on values alone: a superset of the
    cut, which needs no string order. Ranked as doubles: rounding keeps the order, so no row of the
    exact cut is lost."""
    ordinals = grouped.column(ORDINAL).to_numpy()
    values = grouped.column(column).cast(pa.float64()).to_numpy(zero_copy_only=False)
    values = np.where(np.isnan(values), -np.inf, values)  # null and NaN: ranked last
    order = np.argsort(ordinals, kind="stable")
    sorted_ordinals = ordinals[order]
    changes = np.flatnonzero(sorted_ordinals[1:] != sorted_ordinals[:-1]) + 1
    bounds = [0, *changes.tolist(), len(order)] if len(order) else [0]
    kept = np.ones(len(order), bool)
    for begin, end in itertools.pairwise(bounds):
        mine = values[order[begin:end]]
        if end - begin <= keep:
            continue
        cut = -np.partition(-mine, keep - 1)[keep - 1]
        if cut == -np.inf:
            continue  # fewer than `keep` values: every row, nulls too, may be kept
        kept[order[begin:end]] = mine >= cut
    return grouped.filter(pa.array(kept))


def _labelled(candidates: pa.Table, rows: Sequence[MappedRows], column: str) -> pa.Table:
    """`candidates` (ordinal, code, aggregates) with `__segment_index` and the strings as `d0`."""
    ordinals = candidates.column(ORDINAL).to_numpy()
    codes = candidates.column(_CODE)
    position = {r.ordinal: i for i, r in enumerate(rows)}
    order = np.argsort(ordinals, kind="stable")
    sorted_ordinals = ordinals[order]
    codes = codes.combine_chunks().take(pa.array(order))
    changes = np.flatnonzero(sorted_ordinals[1:] != sorted_ordinals[:-1]) + 1
    bounds = [0, *changes.tolist(), len(order)] if len(order) else [0]
    pieces, segment_index = [], np.empty(len(order), np.int64)
    for begin, end in itertools.pairwise(bounds):
        which = position[int(sorted_ordinals[begin])]
        values = dictionary(rows[which], column)
        assert values is not None
        pieces.append(pc.take(values, codes.slice(begin, end - begin)))
        segment_index[begin:end] = which
    strings = pa.chunked_array(pieces, pa.string())  # Arrays: a list of ChunkedArrays converts per value
    table = candidates.take(pa.array(order)).drop_columns([ORDINAL, _CODE])
    table = table.add_column(0, dim_col(0), strings)
    return table.add_column(0, SEGMENT_INDEX, pa.array(segment_index))
