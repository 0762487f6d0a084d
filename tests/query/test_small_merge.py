"""The Python merge of small partials gives the Arrow merge's exact table, and the groups a
DuckDB GROUP BY over the same rows gives (nulls, empty partials, overlapping buckets, int64
overflow, -0.0, NaN, granularity all, every aggregator the path accepts)."""

from __future__ import annotations

import copy
import math
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strata.query.aggregation_engine as engine
from strata.query import parse_query
from strata.query.aggregation_engine import GroupingPlan
from strata.query.small_merge import PYTHON_MERGE_MAX_ROWS, PYTHON_MERGE_MAX_TABLES, merge_small

AGGREGATORS = [
    ("count", None, "sum"),
    ("longSum", "long", "sum"),
    ("longMin", "long", "min"),
    ("longMax", "long", "max"),
    ("doubleSum", "double", "sum"),
    ("doubleMin", "double", "min"),
    ("doubleMax", "double", "max"),
]
HOUR = 3_600_000
BIG = 2**62

longs = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from([BIG, -BIG, 2**63 - 1, -(2**63)]))
# quarters add up exactly in any order (DuckDB's order is its own); 0.1 rounds, but stays small
doubles = st.one_of(
    st.none(), st.sampled_from([0.0, -0.0, 0.1]), st.integers(-(10**6), 10**6).map(lambda i: i / 4)
)
row = st.tuples(
    st.integers(0, 3),  # bucket (hours)
    st.one_of(st.none(), st.sampled_from(["a", "b", "é"])),
    st.one_of(st.none(), st.integers(-1, 1)),
    st.lists(longs, min_size=4, max_size=4),
    st.lists(doubles, min_size=3, max_size=3),
)


def plan_for(granularity: str, dims: int) -> GroupingPlan:
    aggs = [{"type": t, "name": f"m{i}", **({"fieldName": "x"} if t != "count" else {})}
            for i, (t, _, _) in enumerate(AGGREGATORS)]  # fmt: skip
    dimensions: list[Any] = [
        "s",
        {"type": "default", "dimension": "n", "outputName": "n", "outputType": "LONG"},
    ]
    q = parse_query({"queryType": "groupBy", "dataSource": "t", "intervals": ["2020-01-01/2020-01-02"],
                     "granularity": granularity, "dimensions": dimensions[:dims], "aggregations": aggs})  # fmt: skip
    plan: GroupingPlan = q.plan  # type: ignore[attr-defined]
    return plan


def partial(plan: GroupingPlan, segment: str, rows: list[Any]) -> pa.Table:
    schema = plan.schema(dim_types=[pa.string(), pa.int64()][: len(plan.dimensions)])
    longs_at, doubles_at = iter(range(4)), iter(range(3))
    columns: dict[str, list[Any]] = {
        "__segment": [segment] * len(rows),
        "__bucket": [r[0] * HOUR for r in rows],
    }
    if len(plan.dimensions) > 0:
        columns["d0"] = [r[1] for r in rows]
    if len(plan.dimensions) > 1:
        columns["d1"] = [r[2] for r in rows]
    for i, (_, kind, _) in enumerate(AGGREGATORS):
        j = next(doubles_at) if kind == "double" else next(longs_at)
        columns[f"a{i}"] = [r[4][j] if kind == "double" else r[3][j] for r in rows]
    return pa.table(columns, schema=schema)


def bits(table: pa.Table) -> dict[str, list[str]]:
    """Every value by repr: tells -0.0 from 0.0, NaN from null, 1 from 1.0."""
    return {name: [repr(v) for v in table.column(name).to_pylist()] for name in table.column_names}


def wrapped(v: int | None) -> int | None:
    return None if v is None else (v + 2**63) % 2**64 - 2**63


def duckdb_oracle(plan: GroupingPlan, tables: list[pa.Table]) -> dict[tuple[Any, ...], list[Any]]:
    """Group key -> [bucket, aggregates...] by DuckDB SQL over the concatenated rows."""
    rows = pa.concat_tables(tables)  # noqa: F841 (read by DuckDB by name)
    dims = [f"d{i}" for i in range(len(plan.dimensions))]
    keys = dims if plan.granularity.is_all else ["__bucket", *dims]
    bucket = "min(min(__bucket)) OVER ()" if plan.granularity.is_all else "__bucket"
    aggs = [f"{f}(a{i})" for i, (_, _, f) in enumerate(AGGREGATORS)]
    group = f"GROUP BY {', '.join(keys)}" if keys else ""
    sql = f"SELECT {', '.join([*keys, bucket, *aggs])} FROM rows {group}"
    out = {}
    for r in duckdb.sql(sql).fetchall():
        key, rest = tuple(r[: len(keys)]), list(r[len(keys) :])
        for i, (_, kind, _) in enumerate(AGGREGATORS):
            if kind != "double":
                rest[1 + i] = wrapped(None if rest[1 + i] is None else int(rest[1 + i]))
        out[key] = rest
    return out


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return bool(a == b)


@settings(max_examples=120, deadline=None)
@given(
    granularity=st.sampled_from(["all", "hour"]),
    dims=st.integers(0, 2),
    partials=st.lists(st.lists(row, max_size=5), max_size=12),
    nan=st.booleans(),
)
def test_python_merge_equals_the_arrow_merge_and_duckdb(
    granularity: str, dims: int, partials: list[list[Any]], nan: bool
) -> None:
    plan = plan_for(granularity, dims)
    partials = copy.deepcopy(partials)  # changed below: hypothesis must keep what it generated
    if nan and partials and partials[0]:
        partials[0][0][4][0] = math.nan  # the Python merge steps aside; both go to DuckDB,
        for rows in partials:  # whose BIGINT sums refuse to overflow
            for r in rows:
                r[3][:] = [None if v is None else v % 7 for v in r[3]]
    tables = [partial(plan, f"s{i}", rows) for i, rows in enumerate(partials)]
    conn = duckdb.connect()
    merged = plan.merge(conn, tables)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(engine, "merge_small", lambda *a: None)
        arrow = plan.merge(conn, tables)
    assert merged.schema.equals(arrow.schema)
    if nan:  # DuckDB's parallel GROUP BY may order the groups differently each time
        assert sorted(map(repr, merged.to_pylist())) == sorted(map(repr, arrow.to_pylist()))
        return
    assert bits(merged) == bits(arrow)
    if not any(partials):
        return
    want = duckdb_oracle(plan, [t for t in tables if t.num_rows])
    names = (
        [f"d{i}" for i in range(dims)]
        if granularity == "all"
        else ["__bucket", *[f"d{i}" for i in range(dims)]]
    )
    got = {}
    for r in merged.to_pylist():
        got[tuple(r[k] for k in names)] = [r["__bucket"], *[r[f"a{i}"] for i in range(len(AGGREGATORS))]]
    assert got.keys() == want.keys()
    for key, values in got.items():
        assert all(close(a, b) for a, b in zip(values, want[key], strict=True)), (key, values, want[key])
    assert merged.column("__segment").null_count == merged.num_rows


def test_the_two_shapes_never_touch_arrow_concatenation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(tables: Any) -> pa.Table:
        raise AssertionError("merged by Arrow")

    monkeypatch.setattr(engine, "concat_partials", refuse)
    hourly = plan_for("hour", 0)
    parts = [
        partial(hourly, f"s{h}", [(h, None, None, [h, 2**63 - 1, h, -h], [-0.0, 0.5, h / 3])])
        for h in range(4)
    ]
    merged = hourly.merge(duckdb.connect(), parts)
    assert merged.column("__bucket").to_pylist() == [h * HOUR for h in range(4)]
    assert bits(merged)["a4"] == ["-0.0"] * 4  # passed through, as Arrow's merge passes them
    everything = plan_for("all", 0)
    parts = [
        partial(everything, f"s{h}", [(3 - h, None, None, [1, BIG, None, h], [0.1, h, h])]) for h in range(4)
    ]
    merged = everything.merge(duckdb.connect(), parts)
    assert merged.to_pylist() == [{"__segment": None, "__bucket": 0, "a0": 4, "a1": wrapped(4 * BIG),
                                   "a2": None, "a3": 3, "a4": 0.1 + 0.1 + 0.1 + 0.1, "a5": 0.0, "a6": 3.0}]  # fmt: skip


def test_declines_what_it_cannot_reproduce() -> None:
    plan = plan_for("hour", 0)
    t = partial(plan, "s", [(0, None, None, [1, 1, 1, 1], [1.0, 1.0, 1.0])])
    u = partial(plan, "s", [(1, None, None, [1, 1, 1, 1], [1.0, 1.0, 1.0])])
    keys, aggs = ["__bucket"], [("a0", "sum")]
    assert merge_small([t, u], keys, aggs, "__bucket") is not None
    assert merge_small([t, t], keys, aggs, "__bucket") is None  # one bucket twice: rows to combine
    assert merge_small([t, u], [*keys, "d0"], aggs, "__bucket") is None  # dimensions
    assert merge_small([t], keys, [("a0", "count_distinct")], "__bucket") is None
    other_schema = t.cast(pa.schema([f.with_type(pa.int32()) if f.name == "a0" else f for f in t.schema]))
    assert merge_small([other_schema, u], keys, aggs, "__bucket") is None
    nan = partial(plan, "s", [(2, None, None, [1, 1, 1, 1], [math.nan, 1.0, 1.0])])
    assert merge_small([t, nan], keys, aggs, "__bucket") is None
    many = [
        partial(plan, f"s{i}", [(i, None, None, [1, 1, 1, 1], [1.0, 1.0, 1.0])])
        for i in range(PYTHON_MERGE_MAX_TABLES + 1)
    ]
    assert merge_small(many[:-1], keys, aggs, "__bucket") is not None
    assert merge_small(many, keys, aggs, "__bucket") is None  # many partials: Arrow concatenates them
    half = PYTHON_MERGE_MAX_ROWS // 2 + 1
    big = [
        partial(
            plan, f"b{j}", [(j * half + i, None, None, [1, 1, 1, 1], [1.0, 1.0, 1.0]) for i in range(half)]
        )
        for j in range(2)
    ]
    assert merge_small(big[:1], keys, aggs, "__bucket") is not None
    assert merge_small(big, keys, aggs, "__bucket") is None  # many rows: Arrow's per-row speed wins
