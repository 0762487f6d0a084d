"""Every query type, filter, aggregator, post-aggregator and granularity through the historical's HTTP
API over the wikipedia sample in HOUR segments, against plain DuckDB SQL over the raw JSON rows."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasketches
import pytest
from starlette.applications import Starlette

from tests.historical_query.wiki_http import RawRows, druid_json, ingest_hourly, iso_utc, iso_zoned, query_app

DAY = "2015-09-12/2015-09-13"
LA = "America/Los_Angeles"
SKETCH_TOLERANCE = 0.05  # about 3 standard errors of an lgK=12 HLL sketch
Row = dict[str, Any]


@pytest.fixture(scope="module")
def app(
    tmp_path_factory: pytest.TempPathFactory, wikipedia_sample: Path, wikipedia_index_spec: Path
) -> Starlette:
    root = tmp_path_factory.mktemp("matrix")
    served = ingest_hourly(root, wikipedia_sample, wikipedia_index_spec)
    rolled = ingest_hourly(root / "hll", wikipedia_sample, _hll_spec(wikipedia_index_spec, root))
    for seg in rolled.segments():
        served.add(seg, seg.load_spec["path"])
    return query_app(served)


def _hll_spec(index_spec: Path, root: Path) -> Path:
    """A rolled-up copy (`wiki_hll`): channel per hour, row count and an ingested HLL sketch of `user`."""
    spec = json.loads(index_spec.read_text())
    schema = spec["spec"]["dataSchema"]
    schema["dataSource"] = "wiki_hll"
    schema["dimensionsSpec"]["dimensions"] = ["channel"]
    schema["metricsSpec"] = [{"type": "count", "name": "count"},
                             {"type": "HLLSketchBuild", "name": "user_hll", "fieldName": "user"}]  # fmt: skip
    schema["granularitySpec"].update(queryGranularity="hour", rollup=True)
    path = root / "hll_spec.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture(scope="module")
def raw(wikipedia_sample: Path) -> RawRows:
    return RawRows(wikipedia_sample)


def q(query_type: str, **fields: Any) -> dict[str, Any]:
    return {"queryType": query_type, "dataSource": "wikipedia", "intervals": [DAY], **fields}


COUNT_ADDED = [{"type": "count", "name": "c"}, {"type": "longSum", "name": "added", "fieldName": "added"}]

# ---------------------------------------------------------------------------------------------- filters

FILTERS: list[tuple[str, dict[str, Any], str]] = [
    ("selector", {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}, "channel = '#en.wikipedia'"),
    ("selector_null", {"type": "selector", "dimension": "cityName", "value": None}, "cityName IS NULL"),
    ("selector_long", {"type": "selector", "dimension": "added", "value": "0"}, "added = 0"),
    ("selector_bool", {"type": "selector", "dimension": "isRobot", "value": "true"}, "isRobot = 'true'"),
    ("equals_string", {"type": "equals", "column": "namespace", "matchValueType": "STRING", "matchValue": "Main"},
     "namespace = 'Main'"),
    ("equals_long", {"type": "equals", "column": "delta", "matchValueType": "LONG", "matchValue": -1}, "delta = -1"),
    ("null", {"type": "null", "column": "countryName"}, "countryName IS NULL"),
    ("not_null", {"type": "not", "field": {"type": "null", "column": "metroCode"}}, "metroCode IS NOT NULL"),
    ("in", {"type": "in", "dimension": "channel", "values": ["#fr.wikipedia", "#de.wikipedia", "#none"]},
     "channel IN ('#fr.wikipedia', '#de.wikipedia')"),
    ("in_with_null", {"type": "in", "dimension": "cityName", "values": ["Tokyo", None]},
     "cityName = 'Tokyo' OR cityName IS NULL"),
    ("in_long", {"type": "in", "dimension": "deleted", "values": ["1", "2", "3"]}, "deleted IN (1, 2, 3)"),
    ("bound_lexicographic", {"type": "bound", "dimension": "page", "lower": "A", "upper": "B", "upperStrict": True},
     "page >= 'A' AND page < 'B'"),
    ("bound_lexicographic_lower_strict", {"type": "bound", "dimension": "countryIsoCode", "lower": "US",
                                          "lowerStrict": True, "ordering": "lexicographic"}, "countryIsoCode > 'US'"),
    ("bound_numeric", {"type": "bound", "dimension": "delta", "lower": "-10", "upper": "10", "ordering": "numeric"},
     "delta BETWEEN -10 AND 10"),
    ("bound_numeric_strict", {"type": "bound", "dimension": "added", "lower": "100", "lowerStrict": True,
                              "upper": "200", "upperStrict": True, "ordering": "numeric"}, "added > 100 AND added < 200"),
    ("bound_numeric_on_string", {"type": "bound", "dimension": "metroCode", "lower": "500", "upper": "600",
                                 "ordering": "numeric"}, "metroCode::DOUBLE BETWEEN 500 AND 600"),
    ("range_long", {"type": "range", "column": "added", "matchValueType": "LONG", "lower": 10, "upper": 100,
                    "lowerOpen": True}, "added > 10 AND added <= 100"),
    ("range_lower_only", {"type": "range", "column": "deleted", "matchValueType": "LONG", "lower": 100},
     "deleted >= 100"),
    ("range_double", {"type": "range", "column": "delta", "matchValueType": "DOUBLE", "upper": -0.5,
                      "upperOpen": True}, "delta < -0.5"),
    ("range_string", {"type": "range", "column": "countryIsoCode", "matchValueType": "STRING", "lower": "A",
                      "upper": "D"}, "countryIsoCode >= 'A' AND countryIsoCode <= 'D'"),
    ("like_prefix", {"type": "like", "dimension": "page", "pattern": "Talk:%"}, "page LIKE 'Talk:%'"),
    ("like_underscore", {"type": "like", "dimension": "user", "pattern": "C_r%"}, "\"user\" LIKE 'C_r%'"),
    ("like_escape", {"type": "like", "dimension": "comment", "pattern": "%100!%%", "escape": "!"},
     "comment LIKE '%100!%%' ESCAPE '!'"),
    ("regex", {"type": "regex", "dimension": "page", "pattern": "^Wiki"}, "regexp_matches(page, '^Wiki')"),
    ("regex_find", {"type": "regex", "dimension": "comment", "pattern": "[0-9]{4}"},
     "regexp_matches(comment, '[0-9]{4}')"),
    ("search_insensitive", {"type": "search", "dimension": "page",
                            "query": {"type": "insensitive_contains", "value": "bot"}},
     "contains(lower(page), 'bot')"),
    ("search_contains_case", {"type": "search", "dimension": "comment",
                              "query": {"type": "contains", "value": "Robot", "caseSensitive": True}},
     "contains(comment, 'Robot')"),
    ("search_fragment", {"type": "search", "dimension": "page",
                         "query": {"type": "fragment", "values": ["the", "of"]}},
     "contains(lower(page), 'the') AND contains(lower(page), 'of')"),
    ("interval", {"type": "interval", "dimension": "__time",
                  "intervals": ["2015-09-12T01:00:00.000Z/2015-09-12T03:30:00.000Z", "2015-09-12T20:00Z/PT1H"]},
     "(t >= '2015-09-12 01:00:00' AND t < '2015-09-12 03:30:00') "
     "OR (t >= '2015-09-12 20:00:00' AND t < '2015-09-12 21:00:00')"),
    ("and", {"type": "and", "fields": [{"type": "selector", "dimension": "isRobot", "value": "false"},
                                       {"type": "selector", "dimension": "namespace", "value": "Main"}]},
     "isRobot = 'false' AND namespace = 'Main'"),
    ("or", {"type": "or", "fields": [{"type": "selector", "dimension": "channel", "value": "#ja.wikipedia"},
                                     {"type": "range", "column": "added", "matchValueType": "LONG", "lower": 5000}]},
     "channel = '#ja.wikipedia' OR added >= 5000"),
    ("not", {"type": "not", "field": {"type": "selector", "dimension": "isNew", "value": "true"}}, "isNew <> 'true'"),
    ("not_on_nulls", {"type": "not", "field": {"type": "selector", "dimension": "cityName", "value": "Tokyo"}},
     "cityName <> 'Tokyo'"),  # SQL-compatible three-valued logic: null rows match neither side
    ("nested", {"type": "and", "fields": [
        {"type": "or", "fields": [{"type": "like", "dimension": "channel", "pattern": "#e%"},
                                  {"type": "in", "dimension": "countryIsoCode", "values": ["US", "GB"]}]},
        {"type": "not", "field": {"type": "bound", "dimension": "delta", "upper": "0", "ordering": "numeric"}}]},
     "(channel LIKE '#e%' OR countryIsoCode IN ('US', 'GB')) AND NOT (delta <= 0)"),
    ("true", {"type": "true"}, "TRUE"),
    ("false", {"type": "false"}, "FALSE"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "filter_", "where"), FILTERS, ids=[f[0] for f in FILTERS])
def test_filter_in_timeseries(
    app: Starlette, raw: RawRows, name: str, filter_: dict[str, Any], where: str
) -> None:
    got = druid_json(app, q("timeseries", granularity="all", filter=filter_, aggregations=COUNT_ADDED))
    count, added = raw.one(f"SELECT count(*), sum(added) FROM raw WHERE {where}")
    assert len(got) == 1 and got[0]["result"] == {"c": count, "added": added}


@pytest.mark.parametrize(("name", "filter_", "where"), FILTERS[::3], ids=[f[0] for f in FILTERS[::3]])
def test_filter_in_groupby(
    app: Starlette, raw: RawRows, name: str, filter_: dict[str, Any], where: str
) -> None:
    got = druid_json(app, q("groupBy", granularity="all", filter=filter_, dimensions=["isRobot"],
                            aggregations=COUNT_ADDED))  # fmt: skip
    want = raw.rows(f"SELECT isRobot, count(*), sum(added) FROM raw WHERE {where} GROUP BY 1 ORDER BY 1")
    assert [(r["event"]["isRobot"], r["event"]["c"], r["event"]["added"]) for r in got] == want


# ------------------------------------------------------------------------------------------ aggregators

EXACT_AGGREGATORS: list[tuple[dict[str, Any], str, type]] = [
    ({"type": "count", "name": "x"}, "count(*)", int),
    ({"type": "longSum", "name": "x", "fieldName": "added"}, "sum(added)", int),
    ({"type": "doubleSum", "name": "x", "fieldName": "deleted"}, "sum(deleted)::DOUBLE", float),
    ({"type": "floatSum", "name": "x", "fieldName": "delta"}, "sum(delta)::DOUBLE", float),
    ({"type": "longMin", "name": "x", "fieldName": "delta"}, "min(delta)", int),
    ({"type": "longMax", "name": "x", "fieldName": "delta"}, "max(delta)", int),
    ({"type": "doubleMin", "name": "x", "fieldName": "added"}, "min(added)::DOUBLE", float),
    ({"type": "doubleMax", "name": "x", "fieldName": "added"}, "max(added)::DOUBLE", float),
    ({"type": "floatMin", "name": "x", "fieldName": "deleted"}, "min(deleted)::DOUBLE", float),
    ({"type": "floatMax", "name": "x", "fieldName": "deleted"}, "max(deleted)::DOUBLE", float),
    ({"type": "longFirst", "name": "x", "fieldName": "added"}, "arg_min(added, ms)", int),
    ({"type": "longLast", "name": "x", "fieldName": "added"}, "arg_max(added, ms)", int),
    ({"type": "doubleFirst", "name": "x", "fieldName": "delta"}, "arg_min(delta, ms)::DOUBLE", float),
    ({"type": "doubleLast", "name": "x", "fieldName": "deleted"}, "arg_max(deleted, ms)::DOUBLE", float),
    ({"type": "stringFirst", "name": "x", "fieldName": "page"}, "arg_min(page, ms)", str),
    ({"type": "stringLast", "name": "x", "fieldName": "user"}, "arg_max(\"user\", ms)", str),
    ({"type": "filtered", "name": "x", "filter": {"type": "selector", "dimension": "isRobot", "value": "true"},
      "aggregator": {"type": "longSum", "name": "x", "fieldName": "added"}},
     "sum(added) FILTER (WHERE isRobot = 'true')", int),
    ({"type": "filtered", "name": "x", "filter": {"type": "like", "dimension": "page", "pattern": "User%"},
      "aggregator": {"type": "count", "name": "x"}}, "count(*) FILTER (WHERE page LIKE 'User%')", int),
]  # fmt: skip


def _approx_equal(got: Any, want: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(got, float) and got == pytest.approx(want, rel=1e-6)
    return type(got) is kind and got == want


@pytest.mark.parametrize(
    ("agg", "sql", "kind"), EXACT_AGGREGATORS, ids=lambda v: v["type"] if isinstance(v, dict) else ""
)
def test_exact_aggregator(app: Starlette, raw: RawRows, agg: dict[str, Any], sql: str, kind: type) -> None:
    assert raw.one("SELECT count(*) FILTER (WHERE ms = lo), count(*) FILTER (WHERE ms = hi) FROM raw, "
                   "(SELECT min(ms) lo, max(ms) hi FROM raw)") == (1, 1)  # first/last are unambiguous  # fmt: skip
    (ts,) = druid_json(app, q("timeseries", granularity="all", aggregations=[agg]))
    assert _approx_equal(ts["result"]["x"], raw.scalar(f"SELECT {sql} FROM raw"), kind)
    groups = druid_json(
        app,
        q(
            "groupBy",
            granularity="all",
            dimensions=["namespace"],
            aggregations=[agg],
            filter={"type": "in", "dimension": "namespace", "values": ["Main", "Talk", "User"]},
        ),
    )
    want = raw.rows(
        f"SELECT namespace, {sql} FROM raw WHERE namespace IN ('Main', 'Talk', 'User') GROUP BY 1 ORDER BY 1"
    )
    assert [g["event"]["namespace"] for g in groups] == [w[0] for w in want]
    for g, (_, value) in zip(groups, want, strict=True):
        assert _approx_equal(g["event"]["x"], value, kind), (g, value)


SKETCH_AGGREGATORS: list[tuple[dict[str, Any], str]] = [
    ({"type": "cardinality", "name": "x", "fields": ["channel"]}, "count(DISTINCT channel)"),
    ({"type": "cardinality", "name": "x", "fields": ["cityName"]}, "count(DISTINCT cityName)"),
    ({"type": "cardinality", "name": "x", "fields": ["channel", "namespace"], "byRow": True},
     "count(DISTINCT (channel, namespace))"),
    ({"type": "cardinality", "name": "x", "fields": ["page"], "round": True}, "count(DISTINCT page)"),
    ({"type": "HLLSketchBuild", "name": "x", "fieldName": "user"}, "count(DISTINCT \"user\")"),
    ({"type": "HLLSketchBuild", "name": "x", "fieldName": "page", "lgK": 14}, "count(DISTINCT page)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("agg", "sql"), SKETCH_AGGREGATORS, ids=lambda v: v["type"] if isinstance(v, dict) else ""
)
def test_sketch_aggregator_within_error_bounds(
    app: Starlette, raw: RawRows, agg: dict[str, Any], sql: str
) -> None:
    (ts,) = druid_json(app, q("timeseries", granularity="all", aggregations=[agg]))
    exact = raw.scalar(f"SELECT {sql} FROM raw")
    assert ts["result"]["x"] == pytest.approx(exact, rel=SKETCH_TOLERANCE)
    if agg.get("round"):
        assert isinstance(ts["result"]["x"], int)


def test_hll_sketch_merge_of_ingested_sketches(app: Starlette, raw: RawRows) -> None:
    query = {"queryType": "groupBy", "dataSource": "wiki_hll", "intervals": [DAY], "granularity": "all",
             "dimensions": ["channel"],
             "aggregations": [{"type": "longSum", "name": "rows", "fieldName": "count"},
                              {"type": "HLLSketchMerge", "name": "users", "fieldName": "user_hll"}]}  # fmt: skip
    got = {r["event"]["channel"]: r["event"] for r in druid_json(app, query)}
    want = raw.rows('SELECT channel, count(*), count(DISTINCT "user") FROM raw GROUP BY 1')
    assert set(got) == {w[0] for w in want}
    for channel, rows, users in want:
        assert got[channel]["rows"] == rows
        assert got[channel]["users"] == pytest.approx(users, rel=SKETCH_TOLERANCE, abs=1)


def test_finalize_false_returns_sketches_and_intermediates(app: Starlette, raw: RawRows) -> None:
    aggs = [{"type": "count", "name": "c"}, {"type": "HLLSketchBuild", "name": "h", "fieldName": "user"}]
    (row,) = druid_json(
        app, q("timeseries", granularity="all", aggregations=aggs, context={"finalize": False})
    )
    assert row["result"]["c"] == 39244
    sketch = datasketches.hll_sketch.deserialize(base64.b64decode(row["result"]["h"]))
    exact = raw.scalar('SELECT count(DISTINCT "user") FROM raw')
    assert sketch.get_estimate() == pytest.approx(exact, rel=SKETCH_TOLERANCE)


# ------------------------------------------------------------------------------------- post-aggregators


def _field(name: str) -> dict[str, Any]:
    return {"type": "fieldAccess", "fieldName": name}


POST_AGGREGATORS: list[tuple[dict[str, Any], Callable[[Row], Any], type]] = [
    ({"type": "arithmetic", "fn": "+", "fields": [_field("added"), _field("deleted")]},
     lambda r: r["added"] + r["deleted"], float),
    ({"type": "arithmetic", "fn": "-", "fields": [_field("added"), _field("deleted")]},
     lambda r: r["added"] - r["deleted"], float),
    ({"type": "arithmetic", "fn": "*", "fields": [_field("c"), {"type": "constant", "value": 2.5}]},
     lambda r: r["c"] * 2.5, float),
    ({"type": "arithmetic", "fn": "/", "fields": [_field("added"), _field("c")]}, lambda r: r["added"] / r["c"], float),
    ({"type": "arithmetic", "fn": "/", "fields": [_field("added"), {"type": "constant", "value": 0}]},
     lambda r: 0.0, float),  # Druid's division by zero is 0
    ({"type": "arithmetic", "fn": "quotient", "fields": [_field("deleted"), _field("c")]},
     lambda r: r["deleted"] / r["c"], float),
    ({"type": "arithmetic", "fn": "pow", "fields": [_field("c"), {"type": "constant", "value": 2}]},
     lambda r: float(r["c"]) ** 2, float),
    ({"type": "arithmetic", "fn": "+", "fields": [
        {"type": "arithmetic", "fn": "*", "fields": [_field("c"), {"type": "constant", "value": 10}]},
        {"type": "finalizingFieldAccess", "fieldName": "added"}]}, lambda r: r["c"] * 10 + r["added"], float),
    (_field("added"), lambda r: r["added"], int),
    ({"type": "finalizingFieldAccess", "fieldName": "deleted"}, lambda r: r["deleted"], int),
    ({"type": "constant", "value": 7}, lambda r: 7, int),
    ({"type": "doubleGreatest", "fields": [_field("added"), _field("deleted")]},
     lambda r: float(max(r["added"], r["deleted"])), float),
    ({"type": "doubleLeast", "fields": [_field("added"), _field("deleted")]},
     lambda r: float(min(r["added"], r["deleted"])), float),
    ({"type": "longGreatest", "fields": [_field("added"), _field("deleted"), _field("c")]},
     lambda r: max(r["added"], r["deleted"], r["c"]), int),
    ({"type": "longLeast", "fields": [_field("added"), _field("deleted")]},
     lambda r: min(r["added"], r["deleted"]), int),
]  # fmt: skip


@pytest.mark.parametrize(
    ("post", "expect", "kind"), POST_AGGREGATORS, ids=lambda v: v["type"] if isinstance(v, dict) else ""
)
def test_post_aggregator_per_hour(app: Starlette, raw: RawRows, post: dict[str, Any],
                                  expect: Callable[[Row], Any], kind: type) -> None:  # fmt: skip
    aggs = [*COUNT_ADDED, {"type": "longSum", "name": "deleted", "fieldName": "deleted"}]
    got = druid_json(
        app, q("timeseries", granularity="hour", aggregations=aggs, postAggregations=[{**post, "name": "p"}])
    )
    want = raw.rows(
        "SELECT ms // 3600000 * 3600000 AS b, count(*), sum(added), sum(deleted) FROM raw GROUP BY 1 ORDER BY 1"
    )
    assert [r["timestamp"] for r in got] == [iso_utc(w[0]) for w in want]
    for row, (_, c, added, deleted) in zip(got, want, strict=True):
        value = row["result"]["p"]
        expected = expect({"c": c, "added": added, "deleted": deleted})
        assert value == pytest.approx(expected) and (kind is int or isinstance(value, float)), (row, expected)


def test_finalizing_field_access_on_a_sketch_gives_its_estimate(app: Starlette, raw: RawRows) -> None:
    aggs = [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]
    posts = [{"type": "finalizingFieldAccess", "name": "est", "fieldName": "u"},
             {"type": "arithmetic", "name": "twice", "fn": "*",
              "fields": [{"type": "finalizingFieldAccess", "fieldName": "u"}, {"type": "constant", "value": 2}]}]  # fmt: skip
    (row,) = druid_json(app, q("timeseries", granularity="all", aggregations=aggs, postAggregations=posts))
    exact = raw.scalar('SELECT count(DISTINCT "user") FROM raw')
    assert row["result"]["est"] == pytest.approx(exact, rel=SKETCH_TOLERANCE) == row["result"]["u"]
    assert row["result"]["twice"] == pytest.approx(2 * row["result"]["est"])


# ------------------------------------------------------------------------------------------ granularity


def _epoch_bucket(size_ms: int, origin_ms: int = 0) -> str:
    return f"{origin_ms} + (ms - {origin_ms}) // {size_ms} * {size_ms}"


GRANULARITIES: list[tuple[str, Any, str, str | None]] = [
    ("none", "none", "ms", None),
    ("minute", "minute", _epoch_bucket(60_000), None),
    ("fifteen_minute", "fifteen_minute", _epoch_bucket(900_000), None),
    ("thirty_minute", "thirty_minute", _epoch_bucket(1_800_000), None),
    ("hour", "hour", _epoch_bucket(3_600_000), None),
    ("six_hour", "six_hour", _epoch_bucket(21_600_000), None),
    ("day", "day", _epoch_bucket(86_400_000), None),
    ("week", "week", "epoch_ms(date_trunc('week', t))", None),
    ("month", "month", "epoch_ms(date_trunc('month', t))", None),
    ("period_PT1H_LA", {"type": "period", "period": "PT1H", "timeZone": LA},
     "epoch_ms(date_trunc('hour', timezone('UTC', t)))", LA),
    ("period_P1D_LA", {"type": "period", "period": "P1D", "timeZone": LA},
     "epoch_ms(date_trunc('day', timezone('UTC', t)))", LA),
    ("period_P1D_UTC", {"type": "period", "period": "P1D"}, _epoch_bucket(86_400_000), None),
    ("duration_2h_origin", {"type": "duration", "duration": 7_200_000, "origin": "2012-01-01T00:30:00Z"},
     _epoch_bucket(7_200_000, 1_325_377_800_000), None),
    ("duration_45m", {"type": "duration", "duration": 2_700_000}, _epoch_bucket(2_700_000), None),
]  # fmt: skip


def _buckets(
    raw: RawRows, bucket_sql: str, zone: str | None, extra: str = "", where: str = "TRUE"
) -> list[tuple[Any, ...]]:
    """Rows (bucket ms, count, sum added, *extra) per bucket; zoned buckets are truncated in `zone`."""
    raw.conn.execute(f"SET TimeZone='{zone or 'UTC'}'")
    try:
        return raw.rows(f"SELECT {bucket_sql} AS b, count(*), sum(added){extra} FROM raw WHERE {where} "
                        "GROUP BY ALL ORDER BY ALL")  # fmt: skip
    finally:
        raw.conn.execute("SET TimeZone='UTC'")


def _stamp(ms: int, zone: str | None) -> str:
    return iso_zoned(ms, zone) if zone else iso_utc(ms)


@pytest.mark.parametrize(("name", "gran", "bucket", "zone"), GRANULARITIES, ids=[g[0] for g in GRANULARITIES])
def test_timeseries_granularity(
    app: Starlette, raw: RawRows, name: str, gran: Any, bucket: str, zone: str | None
) -> None:
    got = druid_json(
        app, q("timeseries", granularity=gran, aggregations=COUNT_ADDED, context={"skipEmptyBuckets": True})
    )
    want = _buckets(raw, bucket, zone)
    assert [(r["timestamp"], r["result"]["c"], r["result"]["added"]) for r in got] == [
        (_stamp(b, zone), c, a) for b, c, a in want
    ]


@pytest.mark.parametrize(
    ("name", "gran", "bucket", "zone"), GRANULARITIES[1::2], ids=[g[0] for g in GRANULARITIES[1::2]]
)
def test_groupby_granularity(
    app: Starlette, raw: RawRows, name: str, gran: Any, bucket: str, zone: str | None
) -> None:
    got = druid_json(app, q("groupBy", granularity=gran, dimensions=["isNew"], aggregations=COUNT_ADDED))
    want = _buckets(raw, f"{bucket}, isNew", zone)
    assert [(r["timestamp"], r["event"]["isNew"], r["event"]["c"], r["event"]["added"]) for r in got] == [
        (_stamp(b, zone), d, c, a) for b, d, c, a in want
    ]


def test_period_granularity_prints_the_zone_offset(app: Starlette) -> None:
    gran = {"type": "period", "period": "PT1H", "timeZone": LA}
    got = druid_json(app, q("timeseries", granularity=gran, aggregations=COUNT_ADDED))
    assert got[0]["timestamp"] == "2015-09-11T17:00:00.000-07:00"
    assert got[-1]["timestamp"] == "2015-09-12T16:00:00.000-07:00" and len(got) == 24


def test_all_granularity_timeseries_is_stamped_with_the_first_event(app: Starlette, raw: RawRows) -> None:
    got = druid_json(app, q("timeseries", granularity="all", aggregations=COUNT_ADDED))
    first, count, added = raw.one("SELECT min(ms), count(*), sum(added) FROM raw")
    assert got == [{"timestamp": iso_utc(first), "result": {"c": count, "added": added}}]


def test_empty_buckets_are_zero_filled_unless_skipped(app: Starlette, raw: RawRows) -> None:
    where = "countryName = 'Finland'"
    query = q("timeseries", granularity="hour", aggregations=COUNT_ADDED,
              filter={"type": "selector", "dimension": "countryName", "value": "Finland"})  # fmt: skip
    got = druid_json(app, query)
    hits = {b: (c, a) for b, c, a in _buckets(raw, _epoch_bucket(3_600_000), None, where=where)}
    every_hour = [b for (b,) in raw.rows(f"SELECT DISTINCT {_epoch_bucket(3_600_000)} FROM raw ORDER BY 1")]
    assert 0 < len(hits) < len(every_hour)
    assert got == [{"timestamp": iso_utc(b), "result": dict(zip(["c", "added"], hits.get(b, (0, None)), strict=True))}
                   for b in every_hour]  # fmt: skip
    skipped = druid_json(app, {**query, "context": {"skipEmptyBuckets": True}})
    assert skipped == [row for row in got if row["result"]["c"] > 0]


def test_grand_total_and_descending(app: Starlette, raw: RawRows) -> None:
    query = q("timeseries", granularity="six_hour", descending=True, aggregations=COUNT_ADDED,
              context={"grandTotal": True})  # fmt: skip
    got = druid_json(app, query)
    want = _buckets(raw, _epoch_bucket(21_600_000), None)[::-1]
    count, added = raw.one("SELECT count(*), sum(added) FROM raw")
    assert got == [{"timestamp": iso_utc(b), "result": {"c": c, "added": a}} for b, c, a in want] + [
        {"timestamp": None, "result": {"c": count, "added": added}}
    ]


def test_timeseries_limit(app: Starlette, raw: RawRows) -> None:
    got = druid_json(app, q("timeseries", granularity="hour", limit=3, aggregations=COUNT_ADDED))
    want = _buckets(raw, _epoch_bucket(3_600_000), None)[:3]
    assert [(r["timestamp"], r["result"]["c"]) for r in got] == [(iso_utc(b), c) for b, c, _ in want]


# ---------------------------------------------------------------------------------------------- groupBy

GROUPBYS: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("one_dim", {"dimensions": ["channel"]}, "SELECT channel, count(*), sum(added) FROM raw GROUP BY 1 "
     "ORDER BY 1", ["channel", "c", "added"]),
    ("two_dims_nulls_first", {"dimensions": ["countryName", "isRobot"]},
     "SELECT countryName, isRobot, count(*), sum(added) FROM raw GROUP BY ALL ORDER BY 1 NULLS FIRST, 2",
     ["countryName", "isRobot", "c", "added"]),
    ("output_name", {"dimensions": [{"type": "default", "dimension": "namespace", "outputName": "ns"}]},
     "SELECT namespace, count(*), sum(added) FROM raw GROUP BY 1 ORDER BY 1", ["ns", "c", "added"]),
    ("output_type_long", {"dimensions": [{"type": "default", "dimension": "metroCode", "outputName": "metro",
                                          "outputType": "LONG"}]},
     "SELECT metroCode::BIGINT m, count(*), sum(added) FROM raw GROUP BY 1 ORDER BY 1 NULLS FIRST",
     ["metro", "c", "added"]),
    ("output_type_double", {"dimensions": [{"type": "default", "dimension": "deleted", "outputName": "d",
                                            "outputType": "DOUBLE"}],
                            "filter": {"type": "bound", "dimension": "deleted", "lower": "1", "upper": "20",
                                       "ordering": "numeric"}},
     "SELECT deleted::DOUBLE, count(*), sum(added) FROM raw WHERE deleted BETWEEN 1 AND 20 GROUP BY 1 ORDER BY 1",
     ["d", "c", "added"]),
    ("long_dim_as_string", {"dimensions": [{"type": "default", "dimension": "deleted", "outputName": "d",
                                            "outputType": "STRING"}],
                            "filter": {"type": "selector", "dimension": "countryName", "value": "Japan"}},
     "SELECT deleted::VARCHAR, count(*), sum(added) FROM raw WHERE countryName = 'Japan' GROUP BY 1 ORDER BY 1",
     ["d", "c", "added"]),
    ("having", {"dimensions": ["channel"], "having": {"type": "greaterThan", "aggregation": "c", "value": 1000}},
     "SELECT channel, count(*) c, sum(added) FROM raw GROUP BY 1 HAVING c > 1000 ORDER BY 1",
     ["channel", "c", "added"]),
    ("having_and", {"dimensions": ["channel"], "having": {"type": "and", "havingSpecs": [
        {"type": "greaterThan", "aggregation": "c", "value": 100},
        {"type": "lessThan", "aggregation": "added", "value": 100000}]}},
     "SELECT channel, count(*) c, sum(added) a FROM raw GROUP BY 1 HAVING c > 100 AND a < 100000 ORDER BY 1",
     ["channel", "c", "added"]),
    ("limit_spec", {"dimensions": ["channel"], "limitSpec": {"type": "default", "limit": 7, "columns": [
        {"dimension": "c", "direction": "descending", "dimensionOrder": "numeric"}, "channel"]}},
     "SELECT channel, count(*) c, sum(added) FROM raw GROUP BY 1 ORDER BY c DESC, channel LIMIT 7",
     ["channel", "c", "added"]),
    ("limit_offset_post_agg_order", {
        "dimensions": ["namespace"],
        "postAggregations": [{"type": "arithmetic", "name": "avg", "fn": "/",
                              "fields": [_field("added"), _field("c")]}],
        "limitSpec": {"type": "default", "limit": 4, "offset": 2,
                      "columns": [{"dimension": "avg", "direction": "ascending", "dimensionOrder": "numeric"},
                                  {"dimension": "namespace", "direction": "descending"}]}},
     "SELECT namespace, count(*), sum(added), sum(added) / count(*) a FROM raw GROUP BY 1 ORDER BY a, namespace DESC "
     "LIMIT 4 OFFSET 2", ["namespace", "c", "added", "avg"]),
    ("filtered_hourly", {"dimensions": ["isUnpatrolled"], "granularity": "hour",
                         "filter": {"type": "selector", "dimension": "channel", "value": "#de.wikipedia"}},
     "SELECT ms // 3600000 * 3600000, isUnpatrolled, count(*), sum(added) FROM raw "
     "WHERE channel = '#de.wikipedia' GROUP BY ALL ORDER BY ALL", ["__bucket", "isUnpatrolled", "c", "added"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fields", "sql", "keys"), GROUPBYS, ids=[g[0] for g in GROUPBYS])
def test_groupby(
    app: Starlette, raw: RawRows, name: str, fields: dict[str, Any], sql: str, keys: list[str]
) -> None:
    query = q("groupBy", **{"granularity": "all", "aggregations": COUNT_ADDED, **fields})
    got = druid_json(app, query)
    want = raw.rows(sql)
    assert {r["version"] for r in got} == {"v1"}
    if keys[0] == "__bucket":
        assert [r["timestamp"] for r in got] == [iso_utc(w[0]) for w in want]
        keys, want = keys[1:], [w[1:] for w in want]
    else:
        assert {r["timestamp"] for r in got} == {"2015-09-12T00:00:00.000Z"}  # the first interval's start
    assert all(set(r["event"]) == set(keys) for r in got)
    assert len(got) == len(want)
    for r, w in zip(got, want, strict=True):
        event = [r["event"][k] for k in keys]
        assert event == pytest.approx(list(w)), (event, w)
        assert all(type(a) is type(b) for a, b in zip(event, w, strict=True) if b is not None), (event, w)


# -------------------------------------------------------------------------------------------------- topN

TOPNS: list[tuple[str, dict[str, Any], str, str]] = [
    ("count", {"dimension": "channel", "metric": "c", "threshold": 5}, "channel", "c"),
    ("numeric_spec", {"dimension": "namespace", "metric": {"type": "numeric", "metric": "added"}, "threshold": 4},
     "namespace", "added"),
    ("null_values_and_output_name", {"dimension": {"type": "default", "dimension": "countryName",
                                                   "outputName": "country"}, "metric": "c", "threshold": 6},
     "countryName", "c"),
    ("post_agg_metric", {"dimension": "isRobot", "metric": "avg", "threshold": 2,
                         "postAggregations": [{"type": "arithmetic", "name": "avg", "fn": "/",
                                               "fields": [_field("added"), _field("c")]}]}, "isRobot", "avg"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fields", "dim", "metric"), TOPNS, ids=[t[0] for t in TOPNS])
def test_topn_by_metric(
    app: Starlette, raw: RawRows, name: str, fields: dict[str, Any], dim: str, metric: str
) -> None:
    (got,) = druid_json(app, q("topN", granularity="all", aggregations=COUNT_ADDED, **fields))
    out = fields["dimension"]["outputName"] if isinstance(fields["dimension"], dict) else dim
    table = {d: {"c": c, "added": a, "avg": a / c} for d, c, a in raw.rows(
        f"SELECT {dim}, count(*), sum(added) FROM raw GROUP BY 1")}  # fmt: skip
    best = sorted((v[metric] for v in table.values()), reverse=True)[: fields["threshold"]]
    assert got["timestamp"] == iso_utc(raw.scalar("SELECT min(ms) FROM raw"))
    assert [r[metric] for r in got["result"]] == pytest.approx(best)
    for r in got["result"]:  # ties may come in any order, but every row is right
        assert r == pytest.approx({out: r[out], **table[r[out]]} if metric == "avg" else {out: r[out],
                                  "c": table[r[out]]["c"], "added": table[r[out]]["added"]})  # fmt: skip


def test_topn_inverted_and_dimension_orderings(app: Starlette, raw: RawRows) -> None:
    base = q("topN", granularity="all", dimension="channel", threshold=3, aggregations=COUNT_ADDED)
    counts = dict(raw.rows("SELECT channel, count(*) FROM raw GROUP BY 1"))
    (inverted,) = druid_json(app, {**base, "metric": {"type": "inverted", "metric": "c"}})
    assert [r["c"] for r in inverted["result"]] == sorted(counts.values())[:3]
    assert all(counts[r["channel"]] == r["c"] for r in inverted["result"])
    (lexi,) = druid_json(app, {**base, "metric": {"type": "dimension", "ordering": "lexicographic"}})
    assert [(r["channel"], r["c"]) for r in lexi["result"]] == sorted(counts.items())[:3]
    (after,) = druid_json(app, {**base, "metric": {"type": "dimension", "ordering": "lexicographic",
                                                   "previousStop": "#en.wikipedia"}})  # fmt: skip
    assert [r["channel"] for r in after["result"]] == sorted(c for c in counts if c > "#en.wikipedia")[:3]


def test_topn_per_zoned_day(app: Starlette, raw: RawRows) -> None:
    gran = {"type": "period", "period": "P1D", "timeZone": LA}
    got = druid_json(app, q("topN", granularity=gran, dimension="namespace", metric="c", threshold=2,
                            aggregations=COUNT_ADDED))  # fmt: skip
    want = _buckets(raw, "epoch_ms(date_trunc('day', timezone('UTC', t))), namespace", LA)
    assert [r["timestamp"] for r in got] == ["2015-09-11T00:00:00.000-07:00", "2015-09-12T00:00:00.000-07:00"]
    for row in got:
        day = [w for w in want if iso_zoned(w[0], LA) == row["timestamp"]]
        top = sorted(day, key=lambda w: -w[2])[:2]
        assert [(r["namespace"], r["c"], r["added"]) for r in row["result"]] == [
            (w[1], w[2], w[3]) for w in top
        ]


# -------------------------------------------------------------------------------------------------- scan

SCAN_COLUMNS = ["__time", "page", "user", "isRobot", "metroCode", "added", "delta"]


def test_scan_list_returns_raw_rows_per_segment(app: Starlette, raw: RawRows) -> None:
    query = q(
        "scan", columns=SCAN_COLUMNS, filter={"type": "selector", "dimension": "cityName", "value": "Tokyo"}
    )
    got = druid_json(app, query)
    want = raw.rows(
        "SELECT ms, page, \"user\", isRobot, metroCode, added, delta FROM raw WHERE cityName = 'Tokyo'"
    )
    events = [e for batch in got for e in batch["events"]]
    assert sorted(tuple(e[c] for c in SCAN_COLUMNS) for e in events) == sorted(want)
    for batch in got:
        assert batch["columns"] == SCAN_COLUMNS and batch["segmentId"].startswith("wikipedia_2015-09-12T")
        assert batch["rowSignature"] == [{"name": c, "type": "LONG" if c in ("__time", "added", "delta") else "STRING"}
                                         for c in SCAN_COLUMNS]  # fmt: skip
    assert len({b["segmentId"] for b in got}) == raw.scalar(
        "SELECT count(DISTINCT ms // 3600000) FROM raw WHERE cityName = 'Tokyo'"
    )


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_scan_compacted_ordered_with_limit_and_offset(app: Starlette, raw: RawRows, order: str) -> None:
    query = q("scan", columns=["__time", "channel", "added"], resultFormat="compactedList", order=order, limit=25,
              offset=5, filter={"type": "selector", "dimension": "namespace", "value": "Talk"})  # fmt: skip
    got = druid_json(app, query)
    direction = "ASC" if order == "ascending" else "DESC"
    want = raw.rows(f"SELECT ms, channel, added FROM raw WHERE namespace = 'Talk' ORDER BY ms {direction} "
                    "LIMIT 25 OFFSET 5")  # fmt: skip
    assert [tuple(e) for batch in got for e in batch["events"]] == want


def test_scan_all_columns_limit(app: Starlette, raw: RawRows) -> None:
    got = druid_json(
        app, q("scan", limit=10, filter={"type": "selector", "dimension": "countryIsoCode", "value": "NZ"})
    )
    events = [e for batch in got for e in batch["events"]]
    assert len(events) == min(10, raw.scalar("SELECT count(*) FROM raw WHERE countryIsoCode = 'NZ'"))
    columns = set(got[0]["columns"])
    assert {
        "__time",
        "channel",
        "cityName",
        "page",
        "user",
        "added",
        "deleted",
        "delta",
        "isRobot",
    } <= columns
    by_time = {row[0]: row for row in raw.rows("SELECT ms, page, added FROM raw WHERE countryIsoCode = 'NZ'")}
    assert all((e["__time"], e["page"], e["added"]) == by_time[e["__time"]] for e in events)


# ---------------------------------------------------------------------------- timeBoundary and metadata


@pytest.mark.parametrize("bound", [None, "minTime", "maxTime"])
def test_time_boundary_with_bound_and_filter(app: Starlette, raw: RawRows, bound: str | None) -> None:
    filter_ = {"type": "selector", "dimension": "channel", "value": "#it.wikipedia"}
    query: dict[str, Any] = {"queryType": "timeBoundary", "dataSource": "wikipedia", "filter": filter_}
    if bound:
        query["bound"] = bound
    lo, hi = (iso_utc(v) for v in raw.one("SELECT min(ms), max(ms) FROM raw WHERE channel = '#it.wikipedia'"))
    result = {"minTime": lo, "maxTime": hi}
    if bound:
        result = {bound: result[bound]}
    stamp = hi if bound == "maxTime" else lo
    assert druid_json(app, query) == [{"timestamp": stamp, "result": result}]


def test_data_source_metadata(app: Starlette, raw: RawRows) -> None:
    hi = iso_utc(raw.scalar("SELECT max(ms) FROM raw"))
    got = druid_json(app, {"queryType": "dataSourceMetadata", "dataSource": "wikipedia"})
    assert got == [{"timestamp": hi, "result": {"maxIngestedEventTime": hi}}]


def test_segment_metadata_per_segment(app: Starlette, raw: RawRows) -> None:
    got = druid_json(app, q("segmentMetadata", toInclude={"type": "list", "columns": ["channel", "added"]},
                            analysisTypes=["cardinality", "minmax", "interval"]))  # fmt: skip
    want = raw.rows("SELECT ms // 3600000 * 3600000 h, count(*), count(DISTINCT channel), min(channel), "
                    "max(channel) FROM raw GROUP BY 1 ORDER BY 1")  # fmt: skip
    got.sort(key=lambda s: s["intervals"][0])
    assert len(got) == len(want)
    for seg, (h, rows, channels, lo, hi) in zip(got, want, strict=True):
        assert seg["intervals"] == [f"{iso_utc(h)}/{iso_utc(h + 3_600_000)}"]
        assert seg["id"].startswith(f"wikipedia_{iso_utc(h)}_{iso_utc(h + 3_600_000)}_")
        assert seg["numRows"] == rows and set(seg["columns"]) == {"channel", "added"}
        channel, added = seg["columns"]["channel"], seg["columns"]["added"]
        assert (channel["type"], channel["cardinality"], channel["minValue"], channel["maxValue"]) == (
            "STRING",
            channels,
            lo,
            hi,
        )
        # Druid reports min/max for string columns only
        assert (added["type"], added["hasNulls"], added["minValue"], added["maxValue"]) == (
            "LONG",
            False,
            None,
            None,
        )


def test_segment_metadata_merged(app: Starlette, raw: RawRows) -> None:
    (got,) = druid_json(app, q("segmentMetadata", merge=True, analysisTypes=["cardinality", "interval"]))
    assert got["numRows"] == 39244 and got["intervals"] == [
        "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
    ]
    types = {name: col["type"] for name, col in got["columns"].items()}
    assert types == {"__time": "LONG", "added": "LONG", "deleted": "LONG", "delta": "LONG",
                     **{d: "STRING" for d in ("channel", "cityName", "comment", "countryIsoCode", "countryName",
                                              "isAnonymous", "isMinor", "isNew", "isRobot", "isUnpatrolled",
                                              "metroCode", "namespace", "page", "regionIsoCode", "regionName",
                                              "user")}}  # fmt: skip
    for column in ("cityName", "metroCode", "channel"):
        has_nulls = raw.scalar(f"SELECT bool_or({column} IS NULL) FROM raw")
        assert got["columns"][column]["hasNulls"] is has_nulls
    # merged cardinality is the largest per-segment dictionary (null counts as a value), as Druid folds it
    per_hour = raw.scalar(
        "SELECT max(n) FROM (SELECT count(DISTINCT channel) n FROM raw GROUP BY ms // 3600000)"
    )
    assert got["columns"]["channel"]["cardinality"] == per_hour


# ------------------------------------------------------------------------------------------------ search

SEARCHES: list[tuple[str, dict[str, Any], list[str], str]] = [
    ("insensitive", {"type": "insensitive_contains", "value": "WIKI"}, ["channel"],
     "contains(lower(v), 'wiki')"),
    ("contains_case_sensitive", {"type": "contains", "value": "Bot", "caseSensitive": True}, ["user"],
     "contains(v, 'Bot')"),
    ("contains_case_insensitive", {"type": "contains", "value": "bot", "caseSensitive": False}, ["user", "page"],
     "contains(lower(v), 'bot')"),
    ("fragment", {"type": "fragment", "values": ["united", "king"]}, ["countryName", "regionName"],
     "contains(lower(v), 'united') AND contains(lower(v), 'king')"),
]  # fmt: skip


def _search_oracle(
    raw: RawRows, dims: list[str], match: str, where: str = "TRUE"
) -> list[tuple[str, str, int]]:
    parts = [f"SELECT '{d}' AS dim, {d} AS v FROM raw WHERE {where}" for d in dims]
    return raw.rows(f"SELECT dim, v, count(*) FROM ({' UNION ALL '.join(parts)}) WHERE v IS NOT NULL AND ({match}) "
                    "GROUP BY ALL")  # fmt: skip


@pytest.mark.parametrize(("name", "spec", "dims", "match"), SEARCHES, ids=[s[0] for s in SEARCHES])
def test_search(
    app: Starlette, raw: RawRows, name: str, spec: dict[str, Any], dims: list[str], match: str
) -> None:
    (got,) = druid_json(app, q("search", granularity="all", searchDimensions=dims, query=spec, limit=100000,
                               sort={"type": "lexicographic"}))  # fmt: skip
    want = _search_oracle(raw, dims, match)
    assert want and sorted((r["dimension"], r["value"], r["count"]) for r in got["result"]) == sorted(want)
    values = [r["value"] for r in got["result"]]
    assert values == sorted(values)


def test_search_with_filter_limit_and_strlen_sort(app: Starlette, raw: RawRows) -> None:
    query = q("search", granularity="all", searchDimensions=["page"], limit=10, sort={"type": "strlen"},
              query={"type": "insensitive_contains", "value": "a"},
              filter={"type": "selector", "dimension": "countryName", "value": "Italy"})  # fmt: skip
    (got,) = druid_json(app, query)
    want = {
        v: c for _, v, c in _search_oracle(raw, ["page"], "contains(lower(v), 'a')", "countryName = 'Italy'")
    }
    result = got["result"]
    assert len(result) == min(10, len(want))
    assert all(r["dimension"] == "page" and want[r["value"]] == r["count"] for r in result)
    keys = [(len(r["value"]), r["value"]) for r in result]
    assert keys == sorted(keys)
    assert keys == sorted((len(v), v) for v in want)[: len(keys)]


def test_search_per_hour(app: Starlette, raw: RawRows) -> None:
    got = druid_json(app, q("search", granularity="hour", searchDimensions=["namespace"],
                            query={"type": "insensitive_contains", "value": "talk"}))  # fmt: skip
    want = raw.rows("SELECT ms // 3600000 * 3600000, namespace, count(*) FROM raw "
                    "WHERE contains(lower(namespace), 'talk') GROUP BY ALL ORDER BY ALL")  # fmt: skip
    flat = [(row["timestamp"], r["value"], r["count"]) for row in got for r in row["result"]]
    assert sorted(flat) == [(iso_utc(h), v, c) for h, v, c in want]
