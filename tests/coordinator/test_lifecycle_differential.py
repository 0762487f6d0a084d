"""Retention rules and compaction applied while queries run, in a tiered cluster of real processes:
ZooKeeper, the coordinator, two historicals in `_default_tier` and one in `hot`, a broker without
cache and one with the LRU cache, over the wikipedia sample's three segmentations (one day; hours;
hours of at most 1,000 rows). Every answer is checked against the differential oracle (DuckDB over
the raw rows, tests.differential) before, during and after each change:

- rules sending segments to `hot` move them there (each tier's historicals load exactly what the
  rules give that tier, announced with their tier) and no query meanwhile misses or doubles a row;
- compacting the hourly segments into a day overshadows them at once: every query meanwhile is
  answered by the hours or by the day, never by both or neither;
- a drop rule takes its segments out of the cluster (marked unused, as Druid does) and the answers
  are those over the rows left.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import served_ids, wait_until
from tests.coordinator.kit import coordinator, submit, wait_for
from tests.differential.fanout import Fanout
from tests.differential.generator import generate
from tests.differential.oracle import Oracle
from tests.differential.runner import agrees, generate_for, ingest_all, raw_connection, run
from tests.differential.sql_runner import run_sql
from tests.historical_query.wiki_http import create_raw
from timeline import DataSegment, Interval

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

V1 = "/druid/coordinator/v1"
NATIVE, STATEMENTS = 12, 12  # generated per phase (x 3 data sources x 5 broker paths; SQL x 3 paths)
DAY = "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
HOT_HOURS = Interval.parse("2015-09-12T00:00:00Z/2015-09-12T12:00:00Z")
DROPPED = Interval.parse("2015-09-12T20:00:00Z/2015-09-13T00:00:00Z")


@dataclass
class Cluster:
    root: Path
    coordinator: StrataProcess
    default: list[StrataProcess]
    hot: StrataProcess
    targets: dict[str, StrataProcess]
    ranges: dict[str, list[tuple[int, int]]]
    sample: Path

    @property
    def meta(self) -> Path:
        return self.root / "meta.db"

    def used(self, ds: str) -> list[DataSegment]:
        with closing(open_metadata_store(str(self.meta))) as store:
            return store.used_segments(ds)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, wikipedia_sample: Path,
           wikipedia_index_spec: Path) -> Iterator[Cluster]:  # fmt: skip
    root = tmp_path_factory.mktemp("tiered")
    ranges = ingest_all(root, wikipedia_sample, wikipedia_index_spec)
    base = f"/strata-tiers-{uuid.uuid4().hex[:8]}"
    zk = ["--zk", zk_hosts, "--zk-base", base]
    common = [*zk, "--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"), "--poll-period", "1",
              "--drop-delay", "5"]  # fmt: skip

    def historical(name: str, tier: str) -> StrataProcess:
        return StrataProcess("historical", [*common, "--tier", tier, "--segment-cache", str(root / name)],
                             root / f"{name}.log")  # fmt: skip

    default = [historical("h-default-0", "_default_tier"), historical("h-default-1", "_default_tier")]
    hot = historical("h-hot", "hot")
    brokers = {"plain": StrataProcess("broker", zk, root / "plain.log"),
               "lru": StrataProcess("broker", [*zk, "--cache", "lru"], root / "lru.log")}  # fmt: skip
    coord = coordinator(root, str(root / "meta.db"), "--period", "1", *zk)
    with running([*default, hot, *brokers.values(), coord]):
        for node in [*default, hot, *brokers.values(), coord]:
            node.start()
        c = Cluster(root, coord, default, hot, brokers, ranges, wikipedia_sample)
        wait_until(lambda: settled(c, lambda s: 0, lambda s: 2), "the default rule: two copies in _default_tier",
                   timeout=120, logs=[*default, hot])  # fmt: skip
        yield c


def settled(c: Cluster, hot: Callable[[DataSegment], int], default: Callable[[DataSegment], int]) -> bool:
    """Whether each tier serves each used segment as often as the rules say, and the brokers see
    exactly the used segments."""
    used = [s for ds in ("diff_day", "diff_hour", "diff_part") for s in c.used(ds)]
    on_hot = served_ids(c.hot)
    on_default = [served_ids(h) for h in c.default]
    for s in used:
        if (s.id in on_hot) != bool(hot(s)) or sum(s.id in ids for ids in on_default) != default(s):
            return False
    if on_hot - {s.id for s in used} or any(ids - {s.id for s in used} for ids in on_default):
        return False
    return all(broker_sees(b) == {s.id for s in used} for b in c.targets.values())


def broker_sees(broker: StrataProcess) -> set[str]:
    sql = "SELECT segment_id FROM sys.segments WHERE is_overshadowed = 0 AND is_available = 1"
    return {
        r["segment_id"]
        for r in httpx.post(f"{broker.url}/druid/v2/sql/", json={"query": sql}, timeout=30).json()
    }


def differential(c: Cluster, seed: int, conn: duckdb.DuckDBPyConnection | None = None,
                 ranges: dict[str, list[tuple[int, int]]] | None = None) -> None:  # fmt: skip
    conn = conn or raw_connection(c.sample)
    ranges = ranges or c.ranges
    native = run(NATIVE, seed, c.targets, conn, ranges)
    assert not native.differed, native.summary() + "\n" + "\n".join(native.failures)
    sql = run_sql(STATEMENTS, seed, c.targets, conn, data_sources=sorted(ranges))
    assert not sql.differed, sql.summary() + "\n" + "\n".join(sql.failures)


def test_the_default_rule_keeps_two_copies_in_the_default_tier_and_answers_match(tiered: Cluster) -> None:
    tiers = httpx.post(f"{tiered.targets['plain'].url}/druid/v2/sql/", timeout=30,
                       json={"query": "SELECT server, tier FROM sys.servers WHERE server_type = 'historical'"}).json()  # fmt: skip
    assert sorted(r["tier"] for r in tiers) == ["_default_tier", "_default_tier", "hot"]
    differential(tiered, 1)


def test_rules_move_segments_between_tiers_while_every_answer_stays_right(tiered: Cluster) -> None:
    c = tiered
    rules = {
        "diff_hour": [{"type": "loadByInterval", "interval": str(HOT_HOURS), "tieredReplicants": {"hot": 1}},
                      {"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}],
        "diff_day": [{"type": "loadForever", "tieredReplicants": {"hot": 1}}],
    }  # fmt: skip
    for ds, body in rules.items():
        resp = httpx.post(f"{c.coordinator.url}{V1}/rules/{ds}", json=body, timeout=30,
                          headers={"X-Druid-Author": "test", "X-Druid-Comment": "to hot"})  # fmt: skip
        assert resp.status_code == 200

    def hot(s: DataSegment) -> int:
        return int(
            s.data_source == "diff_day" or (s.data_source == "diff_hour" and s.interval.overlaps(HOT_HOURS))
        )

    def default(s: DataSegment) -> int:
        return {"diff_day": 0, "diff_hour": 0 if hot(s) else 1}.get(s.data_source, 2)

    conn = raw_connection(c.sample)
    seed, deadline = 100, time.monotonic() + 180
    while not settled(c, hot, default):  # queries all along the move
        assert time.monotonic() < deadline, "the segments did not move within 180 s"
        outcome = run(2, seed, c.targets, conn, c.ranges)
        assert not outcome.differed, outcome.summary() + "\n" + "\n".join(outcome.failures)
        seed += 1
    assert seed > 100, "the move finished before any query ran beside it"
    history = httpx.get(f"{c.coordinator.url}{V1}/rules/diff_hour/history", timeout=30).json()
    assert history[-1]["auditInfo"]["author"] == "test" and history[-1]["type"] == "rules"
    differential(c, 2, conn)


def test_compacting_hours_into_a_day_overshadows_them_at_once(tiered: Cluster) -> None:
    """While the hourly segments of `diff_hour` become one day, each answer must be what the hours
    give or what the day gives (the oracle of either segmentation), never both or neither."""
    c = tiered
    conn = raw_connection(c.sample)
    as_hours, as_day = Oracle(conn, c.ranges["diff_hour"]), Oracle(conn, c.ranges["diff_day"])
    before = {s.id for s in c.used("diff_hour")}
    task = submit(c.coordinator, {"type": "compact", "dataSource": "diff_hour", "granularitySpec": {"segmentGranularity": "day"},
                                  "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": DAY}}})  # fmt: skip
    rnd, asked, deadline = random.Random(7), 0, time.monotonic() + 240
    with Fanout([[("plain", c.targets["plain"])], [("lru", c.targets["lru"])]]) as fanout:
        while not (set(broker_sees(c.targets["plain"])) & before == set() and
                   set(broker_sees(c.targets["lru"])) & before == set() and asked > 0):  # fmt: skip
            assert time.monotonic() < deadline, "the day did not replace the hours within 240 s"
            spec = generate_for(generate(rnd, ""), "diff_hour")
            hours, day = as_hours.answer(spec), as_day.answer(spec)
            for label, resp in fanout.post("/druid/v2/", spec.json):
                got = (
                    resp.json()
                    if resp.status_code == 200
                    else {"status": resp.status_code, "body": resp.text}
                )
                assert agrees(spec, hours, got) or agrees(spec, day, got), (label, spec.json, got)
                asked += 1
    assert wait_for(c.coordinator, task, "SUCCESS")["errorMsg"] is None
    (compacted,) = c.used("diff_hour")
    assert str(compacted.interval) == DAY and compacted.id in broker_sees(c.targets["plain"])
    # the compacted day stays where the rules send it: its interval overlaps the hot hours
    wait_until(lambda: compacted.id in served_ids(c.hot), "the hot tier to load the compacted day")
    differential(c, 3, conn, {**c.ranges, "diff_hour": c.ranges["diff_day"]})


def test_a_drop_rule_takes_its_segments_out_and_answers_follow(tiered: Cluster) -> None:
    c = tiered
    rules = [{"type": "dropByInterval", "interval": str(DROPPED)},
             {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]  # fmt: skip
    doomed = [s for s in c.used("diff_part") if DROPPED.contains(s.interval)]
    assert doomed
    assert httpx.post(f"{c.coordinator.url}{V1}/rules/diff_part", json=rules, timeout=30).status_code == 200
    wait_until(lambda: not any(DROPPED.contains(s.interval) for s in c.used("diff_part")),
               "the rule duty to mark the dropped segments unused")  # fmt: skip
    with closing(open_metadata_store(str(c.meta))) as store:
        unused = {r.segment.id for r in store.segments("diff_part", include_unused=True) if not r.used}
    assert {s.id for s in doomed} <= unused
    gone = {s.id for s in doomed}
    wait_until(lambda: not any(gone & broker_sees(b) for b in c.targets.values()) and
               not any(gone & served_ids(h) for h in [*c.default, c.hot]), "the cluster to drop them")  # fmt: skip
    kept = raw_kept(c.sample, DROPPED)
    part_ranges = [r for r in c.ranges["diff_part"] if not DROPPED.start <= r[0] < DROPPED.end]
    differential(c, 4, kept, {"diff_part": part_ranges})
    differential(c, 5, None, {"diff_day": c.ranges["diff_day"], "diff_hour": c.ranges["diff_day"]})


def raw_kept(sample: Path, dropped: Interval) -> duckdb.DuckDBPyConnection:
    """The oracle's rows without those the drop rule took."""
    conn = duckdb.connect()
    conn.execute("SET TimeZone='UTC'")
    create_raw(conn, sample, "raw_all")
    conn.execute(
        f"CREATE VIEW raw AS SELECT * FROM raw_all WHERE NOT (ms >= {dropped.start} AND ms < {dropped.end})"
    )
    return conn
