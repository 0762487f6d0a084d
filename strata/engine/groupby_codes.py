"""A node's merged groupBy partial grouped on dictionary codes rather than strings.

Each string dimension is grouped on its codes in one sorted dictionary of all the request's Arrow
copies (`dictionary_codes.shared_codes`): integers hashed per row where the generic pass hashes
strings, and only the groups found are decoded. A filter's terms reading one such string column
alone (grouped on or only filtered on) are decided once per dictionary value and applied by code
(`code_filters`), so no row's string is read for them. Taken where it answers exactly as
`grouping.group_merged` does (its one grouping across segments): plain string dimensions (no
extraction, no value filter, not multi-value), split-invariant aggregators, no virtual columns,
a table's own rows, every segment read whole from its Arrow copy with the same column types and
one dictionary per column. Else `None`, and the generic pass runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb
import pyarrow as pa

from strata.engine.code_filters import code_condition, code_mask, kept_codes, split_terms
from strata.engine.dictionary_codes import codable, few_values, shared_codes, whole_coded
from strata.engine.grouping import constant_buckets, window_starts
from strata.engine.mapped_source import ORDINAL, MappedRows, view
from strata.engine.segment_input import WINDOW_START, SegmentInput, read_schema, unified_types
from strata.query.aggregation_engine import BUCKET, GroupingPlan, agg_col, dim_col
from strata.query.base import SEGMENT_COLUMN
from strata.query.columns import TIME_COLUMN
from strata.query.duck import quote_ident, run_arrow
from strata.query.granularity_sql import bucket_sql
from strata.query.groupby import GroupByQuery


def _code(column: int) -> str:
    return f"__strata_code{column}"


def _keep(column: int) -> str:
    return f"__strata_keep{column}"


def coded_groups(
    query: GroupByQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table | None:
    """What `grouping.group_merged` returns for `query` over `inputs` (one grouping across all of
    them, `__segment` null), grouped on shared dictionary codes; None where that is not exact."""
    plan = query.plan
    found = _coded_source(query, inputs)
    if found is None:
        return None
    rows, types, wanted = found
    columns = list(dict.fromkeys(d.dimension for d in plan.dimensions))
    # a column only filtered on is coded where its values are few beside the rows
    strings = [
        c
        for c in wanted
        if types[c] == "VARCHAR" and codable(rows, c) and (c in columns or few_values(rows, c))
    ]
    by_column, rest = split_terms(plan.filter, strings)
    coded = list(dict.fromkeys([*columns, *by_column]))
    dictionaries, extra, conditions = [], [], []
    for k, column in enumerate(coded):
        values, codes = shared_codes(rows, column)
        dictionaries.append(values)
        extra.append((_code(k), codes))
        if column in by_column:
            kept, null_kept = kept_codes(conn, by_column[column], column, values, types)
            condition = code_condition(_code(k), kept, len(values), null_kept)
            if condition is None:  # too scattered for ranges: a boolean per row, looked up by code
                extra.append((_keep(k), code_mask(codes, kept, len(values), null_kept)))
                condition = _keep(k)
            conditions.append(condition)
    # the strings a grouped or code-filtered column stands for are read only where something else reads them
    as_strings = {c for a in plan.aggregators for c in a.columns()} | {c for t in rest for c in t.columns()}
    read = [c for c in wanted if c != TIME_COLUMN and (c not in coded or c in as_strings)]
    bucket, starts = _bucket(plan, conn, inputs)
    source = view(rows, [TIME_COLUMN, *read], extra=extra)
    projections = [*(name for name, _ in extra), f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}"]
    if starts is not None:
        projections.append(f"{_by_ordinal(rows, inputs, starts)} AS {WINDOW_START}")
    projections += [quote_ident(c) for c in read]
    relation = f"SELECT {', '.join(projections)} FROM {source}"
    conditions += [t.to_sql(types) for t in rest]
    if conditions:
        relation = f"SELECT * FROM ({relation}) WHERE {' AND '.join(conditions)}"
    dims = [f"{_code(coded.index(d.dimension))} AS {dim_col(i)}" for i, d in enumerate(plan.dimensions)]
    aggs = [e for i, a in enumerate(plan.aggregators) for e in a.partial_sql(agg_col(i), types, None)]
    keys = [f"CAST(NULL AS VARCHAR) AS {SEGMENT_COLUMN}", f"{bucket} AS {BUCKET}", *dims]
    grouped = [False, not plan.granularity.is_all, *(True for _ in dims)]  # one `all` bucket: selected
    if starts is not None and plan.granularity.is_all:  # the earliest start of a segment with rows
        keys, grouped = [keys[0], *dims], [False, *(True for _ in dims)]
        aggs.insert(0, f"min(min({WINDOW_START})) OVER () AS {BUCKET}")
    group = ", ".join(str(i + 1) for i, g in enumerate(grouped) if g)
    table = run_arrow(conn, f"SELECT {', '.join(keys + aggs)} FROM ({relation}) GROUP BY {group}")
    for i, d in enumerate(plan.dimensions):
        strings = dictionaries[coded.index(d.dimension)].take(table.column(dim_col(i)))
        table = table.set_column(table.schema.get_field_index(dim_col(i)), dim_col(i), strings)
    return plan._conform(table)


def _coded_source(
    query: GroupByQuery, inputs: Sequence[SegmentInput]
) -> tuple[list[MappedRows], dict[str, str], list[str]] | None:
    """The Arrow copies of `inputs`, the SQL types of the columns read and those columns, where
    grouping on shared codes answers as grouping on the strings."""
    plan = query.plan
    if not plan.dimensions or not query.plain_table or query.subtotals is not None:
        return None
    if plan.granularity.is_none or not all(a.split_invariant() for a in plan.aggregators):
        return None
    for d in plan.dimensions:
        if d.extraction_fn is not None or d.value_filter is not None or d.output_type != "STRING":
            return None
        if d.dimension == TIME_COLUMN:
            return None
    filtered = sorted(plan.filter.columns()) if plan.filter is not None else []
    wanted = list(dict.fromkeys([*plan.input_columns(), *filtered]))
    if plan.virtual_columns.needed(wanted):
        return None
    columns = list(dict.fromkeys(d.dimension for d in plan.dimensions))
    rows = whole_coded(inputs, wanted, columns)
    if not rows:
        return None
    types = unified_types([read_schema(i.path) for i in inputs], wanted)
    if any(types[c] != "VARCHAR" for c in columns):  # a multi-value column is exploded, not coded
        return None
    types[TIME_COLUMN] = "BIGINT"
    return rows, types, wanted


def _bucket(
    plan: GroupingPlan, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> tuple[str, Mapping[str, int] | None]:
    """The bucket's SQL and, where it is read per row, each segment's window start (as
    `grouping.group_rows` works them out across segments, every segment read whole)."""
    constant = constant_buckets(plan.granularity, inputs)
    if constant is not None:  # each segment's rows fall in one bucket: a constant per segment
        return WINDOW_START, constant
    if plan.granularity.is_all:
        starts = window_starts(inputs)
        if plan.filter is None:  # every segment has rows in the answer: the earliest start
            return f"CAST({min(starts.values(), default=0)} AS BIGINT)", None
        return WINDOW_START, starts
    return bucket_sql(plan.granularity, conn), None


def _by_ordinal(rows: Sequence[MappedRows], inputs: Sequence[SegmentInput], starts: Mapping[str, int]) -> str:
    """Each row's segment's value in `starts`, looked up by the copy's ordinal (null: none)."""
    base = min(r.ordinal for r in rows)
    slots = ["NULL"] * (max(r.ordinal for r in rows) - base + 1)
    for r, inp in zip(rows, inputs, strict=True):
        start = starts.get(inp.segment_id)
        slots[r.ordinal - base] = "NULL" if start is None else str(int(start))
    return f"CAST([{', '.join(slots)}] AS BIGINT[])[{ORDINAL} - {base - 1}]"
