"""A scan stage's merged Arrow answer handed to the broker's engine as it is, not through JSON.

A statement's scan stage (a join's side, a subquery's table) reached DuckDB as JSON made into Python
rows and then made into Arrow again (`strata.sql.composed`): for a 40,000-row scan about 250 ms of
Python holding the broker's interpreter lock, which every other query's work on the event loop
waits for. Where the merged partials' columns already are what the JSON path would give DuckDB,
the stage's table is those columns, renamed and cast. Where they may not be (a column whose type
the JSON path would change, a nested value), `stage_table` says None and the answer takes the JSON
path, so a stage's rows are the same either way. Pure: no I/O.
"""

from __future__ import annotations

import pyarrow as pa

from strata.sql.column_types import relational_arrow_type
from strata.sql.plan import Output, SqlPlan
from strata.sql.subquery_limits import rows_exceeded

_STRINGS = (pa.string(), pa.large_string())
_PLAIN_TARGETS = (pa.int64(), pa.float64(), pa.float32(), pa.string())


def takes_table(plan: SqlPlan) -> bool:
    """Whether a stage's rows are its native answer's as they are: a scan, neither reordered nor
    cut by the broker, its timestamps kept as epoch milliseconds."""
    if plan.native is None or plan.native.get("queryType") != "scan" or not plan.raw_times:
        return False
    return not (plan.order or plan.offset or plan.limit is not None or plan.empty_row)


def stage_table(plan: SqlPlan, answer: pa.Table) -> pa.Table | None:
    """The stage's table for DuckDB from its scan's finalized Arrow answer (`ScanQuery.answer_table`),
    or None when a column must take the JSON path; past the stage's row bound, Druid's 400."""
    if plan.row_bound is not None and answer.num_rows > plan.row_bound:
        raise rows_exceeded(plan.row_bound)
    columns: dict[str, pa.ChunkedArray | pa.Array] = {}
    for out in plan.outputs:
        column = _column(out, answer)
        if column is None:
            return None
        columns[out.name] = column
    return pa.table(columns) if columns else pa.table({"_": pa.nulls(answer.num_rows)})


def _column(out: Output, answer: pa.Table) -> pa.ChunkedArray | pa.Array | None:
    if out.sql_type_name is not None:  # BOOLEAN, DATE: values the JSON path rewrites
        return None
    found = out.source in answer.column_names
    if out.sql_type == "TIMESTAMP":
        if not found:
            return pa.nulls(answer.num_rows, pa.timestamp("us"))
        stamps = answer.column(out.source)
        if stamps.type != pa.int64():
            return None
        # DuckDB's TIMESTAMP is microseconds, as the JSON path gives it
        return stamps.cast(pa.timestamp("ms")).cast(pa.timestamp("us"))
    target = relational_arrow_type(out.druid_type)
    if target not in _PLAIN_TARGETS:  # lists, JSON: the JSON path shapes their values
        return None
    if not found:
        return pa.nulls(answer.num_rows, target)
    column = answer.column(out.source)
    kind = column.type
    if pa.types.is_dictionary(kind) and kind.value_type in _STRINGS:
        kind = kind.value_type
    if kind != target and not (target == pa.string() and kind in _STRINGS):
        return None  # the JSON path would convert or stringify its values
    return column if column.type == target else column.cast(target)
