"""The engine's fast paths agree with its plain ones.

- a data node's merged answer (`run_merged`: one grouping across segments) equals merging the
  per-segment partials, with segments read whole (one multi-file scan) and clipped (own branch);
- a broker that caches nothing (`perSegmentPartials` false) gets that one merged partial for every
  type that allows it, and the same answer as from per-segment partials;
- topN's per-segment cut in DuckDB (top-n bound, ties ranked by a window) keeps exactly the rows the numpy ranking keeps,
  with ties, NaN and null metrics;
- a limitSpec that ranks only the rows able to make the cut orders like a full sort.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from strata.engine import SegmentInput, run_for_broker, run_merged, run_partials
from strata.query import parse_query
from strata.query.base import SEGMENT_COLUMN
from strata.query.limit_spec import LimitSpec, OrderByColumn
from strata.query.topn import TopNQuery
from tests.query.segment_fixtures import write_segments
from timeline import Interval

START = 1_577_836_800_000  # 2020-01-01
HOUR = 3_600_000
HOURS = 6


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    rng = np.random.default_rng(5)
    n = 6_000
    latency = rng.integers(0, 4, n).astype(float)  # few values: many ties
    latency[rng.random(n) < 0.05] = np.nan
    table = pa.table(
        {
            "__time": pa.array(START + rng.integers(0, HOURS * HOUR, n), pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")
            ),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 5, n)]),
            "page": pa.array([None if i == 0 else f"p{i}" for i in rng.integers(0, 60, n)]),
            "bytes": pa.array(rng.integers(0, 3, n), pa.int64()),
            "latency": pa.array(latency, mask=rng.random(n) < 0.05),
        }
    )
    return write_segments(table, tmp_path_factory.mktemp("paths"), "hour", data_source="t")


def clipped(inputs: list[SegmentInput]) -> list[SegmentInput]:
    """The first and last segments read only in part, as a query interval cutting them would."""
    first, *middle, last = inputs
    cut_first = Interval(first.interval.start + HOUR // 3, first.interval.end)
    cut_last = Interval(last.interval.start, last.interval.end - HOUR // 4)
    return [
        SegmentInput(first.segment_id, first.descriptor, first.path, cut_first),
        *middle,
        SegmentInput(last.segment_id, last.descriptor, last.path, cut_last),
    ]


SUMS = [
    {"type": "count", "name": "rows"},
    {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
    {"type": "doubleSum", "name": "latency", "fieldName": "latency"},
    {"type": "doubleMax", "name": "worst", "fieldName": "latency"},
]
BASE = {"dataSource": "t", "intervals": ["2020-01-01/2020-01-02"], "aggregations": SUMS}
QUERIES: dict[str, dict[str, Any]] = {
    "timeseries hour": {**BASE, "queryType": "timeseries", "granularity": "hour"},
    "timeseries all": {**BASE, "queryType": "timeseries", "granularity": "all"},
    "topN all": {
        **BASE,
        "queryType": "topN",
        "granularity": "all",
        "dimension": "page",
        "metric": "bytes",
        "threshold": 7,
        "context": {"minTopNThreshold": 1000},
    },
    "groupBy filtered": {
        **BASE,
        "queryType": "groupBy",
        "granularity": "hour",
        "dimensions": ["country", "page"],
        "filter": {"type": "in", "dimension": "country", "values": ["c1", "c3"]},
        "limitSpec": {
            "type": "default",
            "limit": 9,
            "columns": [{"dimension": "bytes", "direction": "descending"}],
        },
    },
    "groupBy all, limit by sum": {
        **BASE,
        "queryType": "groupBy",
        "granularity": "all",
        "dimensions": ["country", "page"],
        "limitSpec": {
            "type": "default",
            "limit": 5,
            "offset": 2,
            "columns": [{"dimension": "bytes", "direction": "descending"}],
        },
    },
    "groupBy all, limit by max asc": {
        **BASE,
        "queryType": "groupBy",
        "granularity": "all",
        "dimensions": ["page"],
        "limitSpec": {"type": "default", "limit": 4, "columns": ["worst", "rows"]},
    },
    "groupBy all": {
        **BASE,
        "queryType": "groupBy",
        "granularity": "all",
        "dimensions": ["country"],
        "filter": {"type": "selector", "dimension": "page", "value": "p3"},
    },
}


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if value != value else round(value, 6)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


@pytest.mark.parametrize("name", list(QUERIES))
@pytest.mark.parametrize("whole", [True, False], ids=["whole", "clipped"])
def test_merged_answer_equals_merging_per_segment_partials(
    inputs: list[SegmentInput], name: str, whole: bool
) -> None:
    query = parse_query(QUERIES[name])
    segs = inputs if whole else clipped(inputs)

    merged = query.finalize(run_merged(query, segs))
    # plain path: each segment alone (one branch each), partials merged
    plain = query.finalize(query.merge([run_partials(query, [s]) for s in segs]))
    assert rounded(merged) == rounded(plain)
    assert merged  # every case has rows


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_broker_caching_nothing_gets_one_merged_partial(inputs: list[SegmentInput], name: str) -> None:
    obj = QUERIES[name]
    labelled = parse_query(obj)
    unlabelled = parse_query({**obj, "context": {**obj.get("context", {}), "perSegmentPartials": False}})
    per_segment = run_for_broker(labelled, inputs)
    merged = run_for_broker(unlabelled, inputs)
    if labelled.segment_cacheable:  # groupBy partials are never cached per segment: always merged
        assert per_segment.column(SEGMENT_COLUMN).null_count == 0
    assert merged.column(SEGMENT_COLUMN).null_count == merged.num_rows  # one partial, no labels
    assert merged.num_rows <= per_segment.num_rows
    answer = labelled.finalize(labelled.merge([per_segment]))
    assert rounded(unlabelled.finalize(unlabelled.merge([merged]))) == rounded(answer) and answer


@pytest.mark.parametrize(
    ("metric", "inverted"),
    [("rows", False), ("bytes", False), ("latency", False), ("latency", True), ("worst", False)],
)
# few, about the distinct pages, more than all, beyond DuckDB's top-n aggregate (numpy then)
@pytest.mark.parametrize("keep", [3, 40, 1000, 2_000_000])
@pytest.mark.parametrize("granularity", ["hour", "all"])
def test_topn_sql_cut_keeps_what_numpy_ranking_keeps(
    inputs: list[SegmentInput], metric: str, inverted: bool, keep: int, granularity: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    spec: Any = {"type": "inverted", "metric": metric} if inverted else metric
    obj = {
        **BASE,
        "queryType": "topN",
        "granularity": granularity,
        "dimension": "page",
        "metric": spec,
        "threshold": 2,
        "context": {"minTopNThreshold": keep},
    }
    query = parse_query(obj)
    assert isinstance(query, TopNQuery)
    assert query.cuts_in_sql == (not inverted and keep < 1_000_000)  # else `top` cuts, in numpy

    with_cut = run_partials(query, inputs), run_merged(query, inputs)
    monkeypatch.setattr(TopNQuery, "cut_sql", lambda self, grouped: None)
    monkeypatch.setattr(TopNQuery, "cuts_in_sql", False)
    ranked_in_numpy = run_partials(query, inputs), run_merged(query, inputs)
    for cut, ranked in zip(with_cut, ranked_in_numpy, strict=True):
        assert cut.num_rows == ranked.num_rows > 0
        assert as_set(cut) == as_set(ranked)


def as_set(table: pa.Table) -> set[tuple[Any, ...]]:
    """Rows as comparable tuples (row order follows segment order of appearance; NaN as text)."""
    return {tuple("NaN" if v != v else v for v in row.values()) for row in table.to_pylist()}


def test_limit_spec_shortcut_orders_like_a_full_sort() -> None:
    rng = np.random.default_rng(1)
    for trial in range(200):
        n = int(rng.integers(1, 300))
        cols = {
            "d": pa.array([f"v{x}" if x else None for x in rng.integers(0, 30, n)]),
            "m": pa.array(rng.integers(0, 10, n).astype(float)),
            "e": pa.array([f"e{x}" for x in rng.integers(0, 5, n)]),
        }
        times = rng.integers(0, 3, n) * 1000 if trial % 2 else None
        by = (
            [OrderByColumn("m", bool(rng.integers(0, 2)))]
            if trial % 3
            else [OrderByColumn("e", True), OrderByColumn("m")]
        )
        limit, offset = int(rng.integers(1, 30)), int(rng.integers(0, 5))
        dims_first = trial % 5 == 0
        got = LimitSpec(tuple(by), limit, offset).order(times, cols, ["d", "e"], dims_first)
        full = LimitSpec(tuple(by)).order(times, cols, ["d", "e"], dims_first)[offset : offset + limit]
        assert picked(got, times, cols) == picked(full, times, cols)


def picked(idx: np.ndarray, times: np.ndarray | None, cols: dict[str, pa.Array]) -> list[tuple[Any, ...]]:
    """The chosen rows' values (equal rows may trade places, so indices are not compared)."""
    return [
        (None if times is None else int(times[i]), *(c[int(i)].as_py() for c in cols.values())) for i in idx
    ]


@pytest.mark.parametrize("dimensions", [["country", "page"], []])
@pytest.mark.parametrize("granularity", ["all", "hour"])
@pytest.mark.parametrize("with_nan", [False, True])
def test_arrow_merge_of_partials_equals_the_sql_merge(
    inputs: list[SegmentInput],
    granularity: str,
    with_nan: bool,
    dimensions: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Small merges run on Arrow's hash aggregation; the answer must be DuckDB's to the last bit."""
    import strata.query.aggregation_engine as engine

    aggregations = [
        {"type": "count", "name": "rows"},
        {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
        {"type": "longMin", "name": "least", "fieldName": "bytes"},
        {"type": "doubleMax", "name": "most", "fieldName": "bytes"},
        {"type": "floatSum", "name": "f", "fieldName": "bytes"},
    ]
    if with_nan:  # latency holds NaN and nulls: the SQL merge's NaN rules apply
        aggregations.append({"type": "doubleMax", "name": "worst", "fieldName": "latency"})
    query = parse_query({"queryType": "groupBy", "dataSource": "t", "granularity": granularity,
                         "intervals": ["2020-01-01/2020-01-02"], "dimensions": dimensions,
                         "aggregations": aggregations})  # fmt: skip
    partials = [run_partials(query, [i]) for i in inputs]
    in_arrow = query.finalize(query.merge(partials))
    monkeypatch.setattr(engine, "ARROW_MERGE_MAX_ROWS", 0)
    in_sql = query.finalize(query.merge(partials))
    key = lambda r: (r["event"].get("country") or "", r["event"].get("page") or "", r["timestamp"])  # noqa: E731
    as_text = lambda rows: json.dumps(sorted(rows, key=key), sort_keys=True)  # noqa: E731  NaN == NaN
    assert as_text(in_arrow) == as_text(in_sql) and len(in_sql) >= (50 if dimensions else 1)
