"""Timeseries finalize skips its sort only when a stable sort would change nothing: the printed
rows equal a plain-Python stable sort (nulls last) of the merged rows, whatever their order."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.query import parse_query
from strata.query.timeseries import TimeseriesQuery

HOUR = 3_600_000
START = 1_577_836_800_000  # 2020-01-01T00:00:00Z


def query(descending: bool, limit: int | None) -> TimeseriesQuery:
    body: dict[str, Any] = {"queryType": "timeseries", "dataSource": "t", "intervals": ["2020-01-01/2020-01-02"],
                            "granularity": "hour", "descending": descending,
                            "aggregations": [{"type": "longSum", "name": "x", "fieldName": "x"}]}  # fmt: skip
    if limit is not None:
        body["limit"] = limit
    q = parse_query(body)
    assert isinstance(q, TimeseriesQuery)
    return q


@settings(max_examples=200, deadline=None)
@given(
    buckets=st.lists(st.one_of(st.none(), st.integers(0, 5)), max_size=12),
    descending=st.booleans(),
    limit=st.one_of(st.none(), st.integers(1, 6)),
)
def test_rows_come_out_as_a_stable_sort_orders_them(
    buckets: list[int | None], descending: bool, limit: int | None
) -> None:
    q = query(descending, limit)
    merged = pa.table(
        {
            "__segment": pa.nulls(len(buckets), pa.string()),
            "__bucket": pa.array([None if b is None else START + b * HOUR for b in buckets], pa.int64()),
            "a0": pa.array(range(len(buckets)), pa.int64()),
        }
    )
    present = [i for i, b in enumerate(buckets) if b is not None]
    # a stable sort, either way: equal buckets keep their first order
    order = sorted(present, key=lambda i: -(buckets[i] or 0) if descending else (buckets[i] or 0))
    order += [i for i, b in enumerate(buckets) if b is None]
    if limit is not None:
        order = order[:limit]
    got = [(r["timestamp"], r["result"]["x"]) for r in q.finalize(merged)]
    want = [(None if buckets[i] is None else f"2020-01-01T{buckets[i]:02d}:00:00.000Z", i) for i in order]
    assert got == want
