"""topN's per-segment trimming (Druid's minTopNThreshold) through real brokers and historicals.

The Wikipedia sample by the hour (24 segments, up to 2,181 pages an hour) on two historicals; a
broker caching per segment (so historicals send each segment's trimmed partial) and one caching
nothing. Oracles, both independent of Strata:
- exact answers from DuckDB over the raw rows, when no segment holds more values than it keeps;
- otherwise Druid's algorithm in plain Python: each hour keeps its best
  max(threshold, minTopNThreshold) pages (ties broken by page), the kept parts are summed, ranked
  again and cut to the threshold.
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


def rank(parts: dict[str, tuple[int, int]], metric: str) -> list[Entry]:
    """Best first: metric descending, ties by page ascending (as Strata breaks them)."""
    entries = [(page, edits, added) for page, (edits, added) in parts.items()]
    if metric == "edits":
        return sorted(entries, key=lambda e: (-e[1], e[0]))
    return sorted(entries, key=lambda e: (-e[2], e[0]))


def druid_topn(sample: Path, metric: str, threshold: int, min_topn: int, hours: range) -> list[Entry]:
    """Druid's per-segment cut, then merge, in plain Python over the raw rows."""
    per_hour: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for hour, page, added in raw_rows(sample, "SELECT hour(time::TIMESTAMP), page, added FROM RAW"):
        if hour in hours:
            part = per_hour[hour][page]
            part[0] += 1
            part[1] += added
    keep = max(threshold, min_topn)
    merged: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for parts in per_hour.values():
        for page, edits, added in rank({p: (v[0], v[1]) for p, v in parts.items()}, metric)[:keep]:
            merged[page][0] += edits
            merged[page][1] += added
    return rank({p: (v[0], v[1]) for p, v in merged.items()}, metric)[:threshold]


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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, wikipedia_sample: Path,
            wikipedia_index_spec: Path) -> Iterator[dict[str, Any]]:  # fmt: skip
    root = tmp_path_factory.mktemp("topn-trim")
    ingest_wikipedia_by_hour(root, wikipedia_sample, wikipedia_index_spec)
    base = f"/strata-topn-{uuid.uuid4().hex[:8]}"
    common = ["--zk", zk_hosts, "--zk-base", base]
    historicals = [
        StrataProcess("historical", [*common, "--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
                                     "--replicas", "1", "--poll-period", "1", "--segment-cache", str(root / f"cache{i}")],
                      root / f"hist{i}.log")
        for i in range(2)
    ]  # fmt: skip
    started: list[StrataProcess] = []
    try:
        for node in historicals:
            started.append(node.start())
        brokers: dict[str, StrataProcess] = {}
        for name, cache in (("caching", "lru"), ("plain", "none")):
            brokers[name] = StrataProcess("broker", [*common, "--cache", cache, "--result-cache", "off"],
                                          root / f"broker-{name}.log").start()  # fmt: skip
            started.append(brokers[name])
        for broker in brokers.values():
            wait_until(partial(sees_every_hour, broker), "the broker to see every hour", 60, [broker])
        yield {"historicals": historicals, **brokers}
    finally:
        for p in reversed(started):
            p.stop()


@pytest.mark.parametrize("broker", ["caching", "plain"])
@pytest.mark.parametrize("metric", ["edits", "added"])
def test_exact_when_every_cut_keeps_all_its_values(
    cluster: dict[str, Any], wikipedia_sample: Path, broker: str, metric: str
) -> None:
    """The caching broker's partials are cut per segment (hour); a broker caching nothing gets one
    partial per historical, cut over all that node's segments (Druid: "each data process")."""
    by = "hour(time::TIMESTAMP)" if broker == "caching" else "true"
    ((most,),) = raw_rows(
        wikipedia_sample, f"SELECT max(n) FROM (SELECT count(DISTINCT page) n FROM RAW GROUP BY {by})"
    )
    assert most > 1000  # so the default cut is a real approximation below
    for _ in range(2):  # cold, then (caching broker) from the cache
        got = entries(ask(cluster[broker], topn(metric, 10, minTopNThreshold=most)))
        assert got == exact_topn(wikipedia_sample, metric, 10)


@pytest.mark.parametrize("min_topn", [3, 40, 1000])
@pytest.mark.parametrize("metric", ["edits", "added"])
def test_per_segment_partials_follow_druids_cut_then_merge(
    cluster: dict[str, Any], wikipedia_sample: Path, min_topn: int, metric: str
) -> None:
    context: dict[str, Any] = {} if min_topn == 1000 else {"minTopNThreshold": min_topn}  # 1000: default
    want = druid_topn(wikipedia_sample, metric, 5, min_topn, range(HOURS))
    for _ in range(2):  # cold (each historical sends each segment's trimmed partial), then cached
        assert entries(ask(cluster["caching"], topn(metric, 5, **context))) == want
    if min_topn == 3 and metric == "edits":  # the approximation shows: the exact answer differs
        assert want != exact_topn(wikipedia_sample, metric, 5)


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
