"""Druid's answers in the corners (issue 10), through real brokers with and without the cache, over
the wikipedia sample segmented by HOUR and by DAY. Every expected value is DuckDB over the raw rows
(tests.historical_query.wiki_http.RawRows) or Druid's documented rule computed by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.ingestion.api import ingest
from tests.historical_query.wiki_http import RawRows, iso_utc

pytestmark = pytest.mark.integration

DATASOURCES = {"wiki_hour": "hour", "wiki_day": "day"}
T0 = 1_441_843_200_000 + 2 * 86_400_000  # 2015-09-12T00:00Z
HOUR = 3_600_000


def at(hours: float) -> str:
    return iso_utc(int(T0 + hours * HOUR))


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, wikipedia_sample: Path,
            wikipedia_index_spec: Path) -> Iterator[dict[str, StrataProcess]]:  # fmt: skip
    root = tmp_path_factory.mktemp("corners")
    for name, granularity in DATASOURCES.items():
        spec = json.loads(wikipedia_index_spec.read_text())
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
        spec["spec"]["dataSchema"]["dataSource"] = name
        spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = granularity
        ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")
    historical = StrataProcess("historical", ["--deep-storage", str(root / "deep"), "--metadata",
                                              str(root / "meta.db"), "--segment-cache", str(root / "sc")],
                               root / "hist.log")  # fmt: skip
    plain = StrataProcess(
        "broker", ["--discovery", "http", "--nodes", historical.address], root / "plain.log"
    )
    cached = StrataProcess("broker", ["--discovery", "http", "--nodes", historical.address, "--cache", "lru"],
                           root / "cached.log")  # fmt: skip
    with running([historical, plain, cached]):
        historical.start()
        plain.start()
        cached.start()
        for broker in (plain, cached):
            _wait_for_datasources(broker)
        yield {"historical": historical, "plain": plain, "cached": cached}


def _wait_for_datasources(broker: StrataProcess) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = httpx.get(broker.url + "/druid/v2/datasources", timeout=5).json()
        if set(DATASOURCES) <= set(names):
            return
        time.sleep(0.3)
    raise AssertionError(f"datasources never appeared:\n{broker.log_text()[-2000:]}")


@pytest.fixture(scope="module")
def raw(wikipedia_sample: Path) -> RawRows:
    return RawRows(wikipedia_sample)


def post(node: StrataProcess, body: Any) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(node.url + "/druid/v2/", content=content, headers={"Content-Type": "application/json"},
                      timeout=60)  # fmt: skip


def answer(node: StrataProcess, body: dict[str, Any]) -> Any:
    resp = post(node, body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def every_way(brokers: dict[str, StrataProcess]) -> Iterator[tuple[str, StrataProcess, str]]:
    """(label, node, datasource): each broker twice (the cached one then answers from its cache) and
    the historical directly, over both segmentations."""
    for ds in DATASOURCES:
        for label in ("historical", "plain", "cached", "cached"):
            yield f"{label}/{ds}", brokers[label], ds


COUNT = [{"type": "count", "name": "c"}]


def between(raw: RawRows, spans: list[tuple[float, float]]) -> int:
    where = " OR ".join(f"(ms >= {T0 + a * HOUR} AND ms < {T0 + b * HOUR})" for a, b in spans)
    return int(raw.scalar(f"SELECT count(*) FROM raw WHERE {where}"))


def test_overlapping_intervals_count_each_row_once(brokers: dict[str, StrataProcess], raw: RawRows) -> None:
    intervals = [
        f"{at(11)}/{at(12)}",
        f"{at(11.5)}/{at(11.75)}",
        f"{at(11)}/{at(11.1)}",
        f"{at(11)}/{at(12)}",
    ]
    want = between(raw, [(11, 12)])
    for label, node, ds in every_way(brokers):
        base = {"dataSource": ds, "intervals": intervals}
        ts = answer(node, {**base, "queryType": "timeseries", "granularity": "all", "aggregations": COUNT})
        assert ts[0]["result"]["c"] == want, label
        gb = answer(node, {**base, "queryType": "groupBy", "granularity": "all", "dimensions": ["isRobot"],
                           "aggregations": COUNT})  # fmt: skip
        assert sum(r["event"]["c"] for r in gb) == want, label
        top = answer(node, {**base, "queryType": "topN", "granularity": "all", "dimension": "isRobot",
                            "metric": "c", "threshold": 5, "aggregations": COUNT})  # fmt: skip
        assert sum(r["c"] for r in top[0]["result"]) == want, label
        scan = answer(node, {**base, "queryType": "scan", "columns": ["__time"]})
        assert sum(len(b["events"]) for b in scan) == want, label


def test_intervals_sharing_a_bucket_are_summed_once(brokers: dict[str, StrataProcess], raw: RawRows) -> None:
    intervals = [f"{at(18.5)}/{at(19)}", f"{at(11)}/{at(12)}"]  # unordered, both in one day
    want = between(raw, [(11, 12), (18.5, 19)])
    for label, node, ds in every_way(brokers):
        base = {"dataSource": ds, "intervals": intervals, "granularity": "day", "aggregations": COUNT}
        ts = answer(node, {**base, "queryType": "timeseries"})
        assert ts == [{"timestamp": at(0), "result": {"c": want}}], label
        gb = answer(node, {**base, "queryType": "groupBy", "dimensions": []})
        assert [(r["timestamp"], r["event"]["c"]) for r in gb] == [(at(0), want)], label
        top = answer(
            node, {**base, "queryType": "topN", "dimension": "isRobot", "metric": "c", "threshold": 5}
        )
        assert [t["timestamp"] for t in top] == [at(0)] and sum(r["c"] for r in top[0]["result"]) == want, (
            label
        )


def test_repeated_and_eternal_intervals_are_not_a_server_error(brokers: dict[str, StrataProcess],
                                                               raw: RawRows) -> None:  # fmt: skip
    total = int(raw.scalar("SELECT count(*) FROM raw"))
    eternity = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
    # (a period past Joda's int range, P99999999999Y, is the user's 400: tests/sql_api/test_input_errors)
    for intervals in (["2015-09-12/2015-09-13", "2015-09-12/P9999Y"], ["2015-09-12/2015-09-13"] * 5,
                      [eternity, "2015-09-12/2015-09-13"]):  # fmt: skip
        for label, node, ds in every_way(brokers):
            gb = answer(node, {"queryType": "groupBy", "dataSource": ds, "intervals": intervals,
                               "granularity": "all", "dimensions": ["isRobot"], "aggregations": COUNT})  # fmt: skip
            assert sum(r["event"]["c"] for r in gb) == total, (label, intervals)


def test_group_by_all_is_stamped_with_the_earliest_interval(brokers: dict[str, StrataProcess]) -> None:
    for label, node, ds in every_way(brokers):
        gb = answer(node, {"queryType": "groupBy", "dataSource": ds, "intervals": [f"{at(18)}/{at(19)}",
                           f"{at(5)}/{at(6)}"], "granularity": "all", "dimensions": [], "aggregations": COUNT})  # fmt: skip
        assert [r["timestamp"] for r in gb] == [at(5)], label


def test_group_by_without_dimensions_over_no_rows_gives_the_summary_row(
    brokers: dict[str, StrataProcess],
) -> None:
    aggs = [*COUNT, {"type": "longSum", "name": "s", "fieldName": "added"},
            {"type": "doubleMax", "name": "m", "fieldName": "delta"}]  # fmt: skip
    nothing = {"type": "selector", "dimension": "channel", "value": "#nowhere"}
    for label, node, ds in every_way(brokers):
        body = {"queryType": "groupBy", "dataSource": ds, "intervals": [f"{at(3)}/{at(4)}"],
                "granularity": "all", "dimensions": [], "filter": nothing, "aggregations": aggs}  # fmt: skip
        assert answer(node, body) == [
            {"version": "v1", "timestamp": at(3), "event": {"c": 0, "s": None, "m": None}}
        ]
        having = {"type": "greaterThan", "aggregation": "c", "value": 0}
        assert answer(node, {**body, "having": having}) == [], label
        assert answer(node, {**body, "dimensions": ["page"]}) == [], label
        ts = answer(node, {**body, "queryType": "timeseries", "context": {"grandTotal": True}})
        assert ts[-1] == {"timestamp": None, "result": {"c": 0, "s": None, "m": None}}, label


def test_bound_without_lower_matches_null(brokers: dict[str, StrataProcess], raw: RawRows) -> None:
    for column in ("cityName", "countryName", "regionIsoCode"):
        no_lower = int(raw.scalar(f"SELECT count(*) FROM raw WHERE {column} IS NULL OR {column} < 'M'"))
        lower = int(raw.scalar(f"SELECT count(*) FROM raw WHERE {column} >= 'A' AND {column} < 'M'"))
        for label, node, ds in every_way(brokers):
            base = {"queryType": "timeseries", "dataSource": ds, "intervals": ["2015-09-12/2015-09-13"],
                    "granularity": "all", "aggregations": COUNT}  # fmt: skip
            bound = {"type": "bound", "dimension": column, "upper": "M", "upperStrict": True}
            assert answer(node, {**base, "filter": bound})[0]["result"]["c"] == no_lower, label
            assert answer(node, {**base, "filter": {**bound, "lower": "A"}})[0]["result"]["c"] == lower, label
            negated = answer(node, {**base, "filter": {"type": "not", "field": bound}})[0]["result"]["c"]
            assert negated == int(raw.scalar("SELECT count(*) FROM raw")) - no_lower, label


def test_arithmetic_post_aggregators_follow_java_doubles(brokers: dict[str, StrataProcess]) -> None:
    def arith(name: str, fn: str, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        return {"type": "arithmetic", "name": name, "fn": fn, "fields": [a, b]}

    one, zero = {"type": "constant", "value": 1}, {"type": "constant", "value": 0}
    minus = {"type": "constant", "value": -1}
    s = {"type": "fieldAccess", "fieldName": "s"}
    posts = [arith("inf", "quotient", one, zero), arith("ninf", "quotient", minus, zero),
             arith("nan", "quotient", zero, zero), arith("div0", "/", one, zero), arith("null", "+", s, one)]  # fmt: skip
    for label, node, ds in every_way(brokers):
        body = {"queryType": "timeseries", "dataSource": ds, "intervals": [f"{at(3)}/{at(4)}"],
                "granularity": "all", "filter": {"type": "selector", "dimension": "channel", "value": "#nowhere"},
                "aggregations": [*COUNT, {"type": "longSum", "name": "s", "fieldName": "added"}],
                "postAggregations": posts}  # fmt: skip
        (row,) = answer(node, body)
        # Jackson, Druid's JSON writer, prints non-finite doubles as strings
        assert row["result"] == {"c": 0, "s": None, "inf": "Infinity", "ninf": "-Infinity", "nan": "NaN",
                                 "div0": 0.0, "null": None}, label  # fmt: skip


def test_duration_granularity_as_numeric_string_with_origin(
    brokers: dict[str, StrataProcess], raw: RawRows
) -> None:
    six_hours = 6 * HOUR
    origin = T0 + HOUR
    want = raw.rows(f"SELECT CAST(floor((ms - {origin}) / {six_hours}) AS BIGINT) * {six_hours} + {origin} AS b, count(*) FROM raw "
                    "GROUP BY b ORDER BY b")  # fmt: skip
    for label, node, ds in every_way(brokers):
        got = answer(node, {"queryType": "timeseries", "dataSource": ds, "intervals": ["2015-09-12/2015-09-13"],
                            "granularity": {"type": "duration", "duration": str(six_hours), "origin": at(1)},
                            "aggregations": COUNT})  # fmt: skip
        assert [(r["timestamp"], r["result"]["c"]) for r in got] == [(iso_utc(b), c) for b, c in want], label


def test_bad_input_gets_druid_error_bodies_and_the_service_keeps_serving(
    brokers: dict[str, StrataProcess],
) -> None:
    deep = json.dumps({"type": "selector", "dimension": "page", "value": "x"})
    for _ in range(2000):
        deep = '{"type":"not","field":' + deep + "}"
    for label in ("historical", "plain"):
        node = brokers[label]
        bad = post(node, '{"queryType":"timeseries","dataSource":"wiki_hour","intervals":["2015-09-12/P1D"],'
                         '"granularity":"all","aggregations":[{"type":"count","name":"c"}],"filter":' + deep + "}")  # fmt: skip
        assert bad.status_code == 400 and bad.json()["error"] == "Json parse failed", label
        gran = post(node, {"queryType": "timeseries", "dataSource": "wiki_hour", "intervals": ["2015-09-12/P1D"],
                           "granularity": {"type": "duration", "duration": "often"}, "aggregations": COUNT})  # fmt: skip
        assert gran.status_code == 400 and "{'" not in gran.json()["errorMessage"], label
        assert '"duration":"often"' in gran.json()["errorMessage"], label
        missing = httpx.get(node.url + "/no/such/route", timeout=10)
        assert missing.status_code == 404 and missing.json()["category"] == "NOT_FOUND", label
        wrong = httpx.get(node.url + "/druid/v2/", timeout=10)
        assert wrong.status_code == 405 and wrong.json()["errorMessage"].startswith("Method Not Allowed"), (
            label
        )
        assert {"error", "errorMessage", "errorClass", "host"} <= set(wrong.json()), label
        ok = answer(node, {"queryType": "timeBoundary", "dataSource": "wiki_hour"})
        assert ok[0]["result"]["minTime"].startswith("2015-09-12"), label


def test_wide_or_of_selectors_is_answered_like_the_in(
    brokers: dict[str, StrataProcess], raw: RawRows
) -> None:
    pages = [f"no page {i}" for i in range(30_000)] + ["Jeremy Corbyn", "Talk:Oswald Mosley", None]
    wide = {"type": "or", "fields": [{"type": "selector", "dimension": "page", "value": p} for p in pages]}
    want = int(raw.scalar("SELECT count(*) FROM raw WHERE page IN ('Jeremy Corbyn', 'Talk:Oswald Mosley') "
                          "OR page IS NULL"))  # fmt: skip
    for label, node, ds in every_way(brokers):
        body = {"queryType": "timeseries", "dataSource": ds, "intervals": ["2015-09-12/2015-09-13"],
                "granularity": "all", "aggregations": COUNT, "filter": wide}  # fmt: skip
        assert answer(node, body)[0]["result"]["c"] == want, label
        negated = answer(node, {**body, "filter": {"type": "not", "field": wide}})[0]["result"]["c"]
        assert negated == int(raw.scalar("SELECT count(*) FROM raw")) - want, label


def test_top_n_answers_every_bucket_its_cursors_walk(brokers: dict[str, StrataProcess], raw: RawRows) -> None:
    """Hours where no row matches come back as `"result": []`, with the cache as without it."""
    flt = {"type": "selector", "dimension": "countryName", "value": "Finland"}
    hits = dict(raw.rows(f"SELECT (ms - {T0}) // {HOUR} AS h, count(*) FROM raw WHERE countryName = 'Finland' "
                         "AND ms >= " + str(T0 + 2 * HOUR) + " AND ms < " + str(T0 + 14 * HOUR) + " GROUP BY h"))  # fmt: skip
    assert 0 < len(hits) < 12
    want = [{"timestamp": at(h), "result": [{"countryName": "Finland", "c": hits[h]}] if h in hits else []}
            for h in range(2, 14)]  # fmt: skip
    for label, node, ds in every_way(brokers):
        got = answer(node, {"queryType": "topN", "dataSource": ds, "intervals": [f"{at(2)}/{at(14)}"],
                            "granularity": "hour", "dimension": "countryName", "metric": "c", "threshold": 3,
                            "filter": flt, "aggregations": COUNT})  # fmt: skip
        assert got == want, label
        nothing = {"type": "selector", "dimension": "countryName", "value": "Nowhere"}
        empty = answer(node, {"queryType": "topN", "dataSource": ds, "intervals": [f"{at(2.5)}/{at(3)}"],
                              "granularity": "all", "dimension": "countryName", "metric": "c", "threshold": 3,
                              "filter": nothing, "aggregations": COUNT})  # fmt: skip
        assert empty == [{"timestamp": at(2.5), "result": []}], label
