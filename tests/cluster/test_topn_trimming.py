"""topN's per-segment trimming (Druid's minTopNThreshold) through real brokers and historicals:
the same answer whatever the cache holds and whichever node serves which segment.

The Wikipedia sample by the hour (24 segments, up to 2,181 pages an hour) in three layouts over the
same deep storage: two historicals splitting the segments (a broker caching per segment, so the
historicals send each segment's cut partial, and one caching nothing, so each sends one merged
partial), one historical holding all 24, and two historicals both holding every segment (the
broker picks a replica per segment at random). Oracles, both independent of Strata:
- exact answers from DuckDB over the raw rows, when no segment holds more values than it keeps;
- otherwise Druid's algorithm in plain Python (`tests.topn_oracle`): each hour keeps what Druid's
  engine keeps of max(threshold, minTopNThreshold) pages, ties included; the kept parts are
  summed, ranked again and cut to the threshold.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from harness.processes import StrataProcess
from tests.cluster.cluster_kit import ingest_wikipedia_by_hour, wait_until
from tests.topn_oracle import druid_topn as oracle_topn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DAY = "2015-09-12/2015-09-13"
HOURS = 24
Entry = tuple[str, int, int]  # page, edits, added


def raw_rows(sample: Path, sql: str) -> list[tuple[Any, ...]]:
    rel = f"read_json('{sample}', format='newline_delimited')"
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone='UTC'")
        return con.execute(sql.replace("RAW", rel)).fetchall()
    finally:
        con.close()


METRICS = ("edits", "added")
BROKERS = ("caching", "plain", "alone", "replicated")


def hourly_parts(sample: Path, hours: range) -> list[dict[str | None, list[float]]]:
    """Each hour's pages with their (edits, added), from the raw rows."""
    parts: dict[int, dict[str | None, list[float]]] = defaultdict(dict)
    for hour, page, edits, added in raw_rows(
        sample, "SELECT hour(time::TIMESTAMP) h, page, count(*), sum(added) FROM RAW GROUP BY h, page"
    ):
        if hour in hours:
            parts[hour][page] = [edits, added]
    return list(parts.values())


def druid_topn(sample: Path, metric: str, threshold: int, min_topn: int, hours: range) -> list[Entry]:
    """Druid's per-segment cut, then merge, in plain Python over the raw rows."""
    top = oracle_topn(hourly_parts(sample, hours), METRICS.index(metric), threshold, min_topn)
    return [(page, int(edits), int(added)) for page, edits, added in top]


def node_wide_topn(sample: Path, metric: str, threshold: int, min_topn: int) -> list[Entry]:
    """What ranking over all 24 hours at once and cutting the sums would answer (one node
    holding every segment, before this was fixed)."""
    rows = raw_rows(sample, "SELECT page, count(*), sum(added) FROM RAW GROUP BY page")
    day = {page: [edits, added] for page, edits, added in rows}
    top = oracle_topn([day], METRICS.index(metric), threshold, min_topn)
    return [(page, int(edits), int(added)) for page, edits, added in top]


def exact_topn(sample: Path, metric: str, threshold: int) -> list[Entry]:
    order = "count(*)" if metric == "edits" else "sum(added)"
    rows = raw_rows(sample, f"SELECT page, count(*), sum(added) FROM RAW GROUP BY page "
                            f"ORDER BY {order} DESC, page LIMIT {threshold}")  # fmt: skip
    return [(p, int(e), int(a)) for p, e, a in rows]


def topn(metric: str, threshold: int, interval: str = DAY, **context: Any) -> dict[str, Any]:
    return {"queryType": "topN", "dataSource": "wikipedia", "intervals": [interval], "granularity": "all",
            "dimension": "page", "metric": metric, "threshold": threshold,
            "aggregations": [{"type": "count", "name": "edits"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
            "context": {"queryId": uuid.uuid4().hex, **context}}  # fmt: skip


def ask(broker: StrataProcess, body: dict[str, Any]) -> list[dict[str, Any]]:
    resp = httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    answer: list[dict[str, Any]] = resp.json()
    return answer


def entries(answer: list[dict[str, Any]]) -> list[Entry]:
    assert len(answer) == 1
    return [(e["page"], e["edits"], e["added"]) for e in answer[0]["result"]]


def node_queries(node: StrataProcess) -> float:
    text = httpx.get(f"{node.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("strata_historical_queries_total{"))  # fmt: skip


def sees_every_hour(broker: StrataProcess) -> bool:
    return bool(httpx.get(f"{broker.url}/status", timeout=10).json()["segments"] == HOURS)


def historical(common: list[str], root: Path, name: str, replicas: int) -> StrataProcess:
    return StrataProcess("historical", [*common, "--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
                                        "--replicas", str(replicas), "--poll-period", "1",
                                        "--segment-cache", str(root / f"cache-{name}")], root / f"{name}.log")  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, wikipedia_sample: Path,
            wikipedia_index_spec: Path) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Three layouts of the same segments, each under its own ZooKeeper base: `split` (two
    historicals, each segment on one), `alone` (one historical) and `replicated` (two, each
    segment on both)."""
    root = tmp_path_factory.mktemp("topn-trim")
    ingest_wikipedia_by_hour(root, wikipedia_sample, wikipedia_index_spec)
    layouts = {"split": (2, 1), "alone": (1, 1), "replicated": (2, 2)}  # historicals, replicas
    brokers_of = {"split": [("caching", "lru"), ("plain", "none")], "alone": [("alone", "none")],
                  "replicated": [("replicated", "none")]}  # fmt: skip
    started: list[StrataProcess] = []
    try:
        found: dict[str, Any] = {}
        for layout, (count, replicas) in layouts.items():
            common = ["--zk", zk_hosts, "--zk-base", f"/strata-topn-{layout}-{uuid.uuid4().hex[:8]}"]
            nodes = [historical(common, root, f"{layout}{i}", replicas) for i in range(count)]
            for node in nodes:
                started.append(node.start())
            if layout == "split":
                found["historicals"] = nodes
            for name, cache in brokers_of[layout]:
                found[name] = StrataProcess("broker", [*common, "--cache", cache, "--result-cache", "off"],
                                            root / f"broker-{name}.log").start()  # fmt: skip
                started.append(found[name])
        for name in BROKERS:
            wait_until(
                partial(sees_every_hour, found[name]), "the broker to see every hour", 60, [found[name]]
            )
        yield found
    finally:
        for p in reversed(started):
            p.stop()


@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("metric", METRICS)
def test_exact_when_every_cut_keeps_all_its_values(
    cluster: dict[str, Any], wikipedia_sample: Path, broker: str, metric: str
) -> None:
    """Each segment (hour) keeps every one of its pages: the answer is exact, in every layout."""
    ((most,),) = raw_rows(
        wikipedia_sample,
        "SELECT max(n) FROM (SELECT count(DISTINCT page) n FROM RAW GROUP BY hour(time::TIMESTAMP))",
    )
    assert most > 1000  # so the default cut is a real approximation below
    for _ in range(2):  # cold, then (caching broker) from the cache
        got = entries(ask(cluster[broker], topn(metric, 10, minTopNThreshold=most)))
        assert got == exact_topn(wikipedia_sample, metric, 10)


@pytest.mark.parametrize("min_topn", [3, 40, 1000])
@pytest.mark.parametrize("metric", METRICS)
def test_every_layout_and_cache_state_gives_druids_answer(
    cluster: dict[str, Any], wikipedia_sample: Path, min_topn: int, metric: str
) -> None:
    """Per-segment partials (cold, then cached), one merged partial per node over half the
    segments, over all of them, and over replicas picked at random: Druid's cut-then-merge."""
    context: dict[str, Any] = {} if min_topn == 1000 else {"minTopNThreshold": min_topn}  # 1000: default
    want = druid_topn(wikipedia_sample, metric, 5, min_topn, range(HOURS))
    for broker in BROKERS:
        for _ in range(3 if broker == "replicated" else 2):
            assert entries(ask(cluster[broker], topn(metric, 5, **context))) == want, broker
    if min_topn == 3 and metric == "edits":  # the approximation shows, and a node-wide cut differs
        assert want != exact_topn(wikipedia_sample, metric, 5)
        assert want != node_wide_topn(wikipedia_sample, metric, 5, min_topn)


def test_minTopNThreshold_is_part_of_the_cache_key(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    def reads() -> float:
        return sum(node_queries(h) for h in cluster["historicals"])

    ask(cluster["caching"], topn("added", 4, minTopNThreshold=6))
    before = reads()
    ask(cluster["caching"], topn("added", 4, minTopNThreshold=6))
    assert reads() == before  # every segment's trimmed partial came from the cache
    got = entries(ask(cluster["caching"], topn("added", 4, minTopNThreshold=7)))
    assert reads() > before  # another cut: nothing reused
    assert got == druid_topn(wikipedia_sample, "added", 4, 7, range(HOURS))


def test_a_cached_partial_keeps_its_own_segments_timestamp(
    cluster: dict[str, Any], wikipedia_sample: Path
) -> None:
    """`all` stamps the earliest cursor start of the segments read: a partial cached by a query
    over the whole day must not carry the day's start into a query over later hours."""
    ask(cluster["caching"], topn("added", 3, minTopNThreshold=2))  # caches every hour
    later = "2015-09-12T10:00:00.000Z/2015-09-12T12:00:00.000Z"
    answer = ask(cluster["caching"], topn("added", 3, later, minTopNThreshold=2))
    ((first,),) = raw_rows(wikipedia_sample, "SELECT strftime(min(time::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.%gZ') "
                                            "FROM RAW WHERE hour(time::TIMESTAMP) IN (10, 11)")  # fmt: skip
    assert answer[0]["timestamp"] == first
    assert entries(answer) == druid_topn(wikipedia_sample, "added", 3, 2, range(10, 12))
