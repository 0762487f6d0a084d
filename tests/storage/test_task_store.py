"""The coordinator's tables (tasks, interval locks, rules), run against SQLite and a real PostgreSQL
alike: one contract, so the two cannot drift. The point of most tests is the fence: a publish
or a delete guarded by a task commits together with its checks, or not at all."""

from __future__ import annotations

import threading
from contextlib import closing

import pytest

from strata.storage import open_metadata_store
from strata.storage.audit_log import AuditInfo
from strata.storage.rule_store import RuleStore
from strata.storage.task_store import Fenced, LockRow, TaskExists, TaskRow, TaskStore
from timeline import DataSegment, Interval, ShardSpec

DAY = "2020-01-01/2020-01-02"


def seg(interval: str, version: str = "v1", ds: str = "w", part: int = 0) -> DataSegment:
    shard = ShardSpec.none() if part == 0 else ShardSpec.numbered(part, 0)
    return DataSegment(
        ds, Interval.parse(interval), version, {"type": "local", "path": "/x"}, ("d",), (), shard
    )


def task(task_id: str, created: str = "2024-01-01T00:00:00.000Z", ds: str = "w") -> TaskRow:
    return TaskRow(id=task_id, created_date=created, datasource=ds, type="index_parallel", group_id=task_id,
                   payload={"type": "index_parallel", "id": task_id},
                   status={"id": task_id, "status": "RUNNING", "duration": -1})  # fmt: skip


def lock(interval: str, ds: str = "w", **extra) -> dict:
    return {"type": "timeChunk", "lockType": "EXCLUSIVE", "dataSource": ds, "interval": interval,
            "version": "v1", "priority": 50, "revoked": False, **extra}  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def stores(location):
    meta = open_metadata_store(location)
    yield meta, TaskStore(meta)
    meta.close()


def grant_if_free(wanted: list[dict]):
    """The simplest lock rule: granted when no lock held by another task overlaps."""

    def decide(held: list[LockRow]) -> list[dict] | None:
        asked = [Interval.parse(w["interval"]) for w in wanted]
        return None if any(h.interval.overlaps(a) for h in held for a in asked) else wanted

    return decide


def test_tasks_round_trip_newest_first_and_filtered(stores):
    _, tasks = stores
    tasks.insert(task("a", "2024-01-01T00:00:00.000Z"))
    tasks.insert(task("b", "2024-01-02T00:00:00.000Z", ds="other"))
    with pytest.raises(TaskExists, match=r"Task \[a\] already exists"):
        tasks.insert(task("a"))
    assert tasks.get("a") == task("a") and tasks.get("nope") is None
    assert [t.id for t in tasks.tasks()] == ["b", "a"]
    assert [t.id for t in tasks.tasks(datasource="w")] == ["a"]
    assert [t.id for t in tasks.tasks(limit=1)] == ["b"]
    assert tasks.finish("a", {"id": "a", "status": "SUCCESS", "duration": 5}, {"r": 1}) is not None
    assert [t.id for t in tasks.tasks(active=True)] == ["b"]
    done = tasks.get("a")
    assert (done.active, done.runner_state, done.status["status"], done.report) == (
        False,
        "NONE",
        "SUCCESS",
        {"r": 1},
    )


def test_updates_and_finishes_only_at_the_current_attempt(stores):
    _, tasks = stores
    tasks.insert(task("a"))
    assert tasks.update("a", 0, runner_state="RUNNING", pid=123).pid == 123
    assert tasks.update("a", 1, runner_state="PENDING") is None  # a stale attempt changes nothing
    assert tasks.update("a", 0, attempt=1).attempt == 1
    assert tasks.finish("a", {"status": "FAILED"}, attempt=0) is None
    assert tasks.get("a").runner_state == "RUNNING"
    assert tasks.finish("a", {"status": "FAILED"}, attempt=1, fence=True).attempt == 1
    assert tasks.get("a").attempt == 2 and not tasks.get("a").active
    assert tasks.update("a", None, runner_state="RUNNING") is None  # a finished task stays finished
    with pytest.raises(ValueError):
        tasks.update("a", None, status_payload=b"x")


def test_grant_sees_other_tasks_locks_and_finish_releases_them(stores):
    _, tasks = stores
    for t in ("a", "b"):
        tasks.insert(task(t))
    assert [got.payload["interval"] for got in tasks.grant("a", "w", grant_if_free([lock(DAY)]))] == [DAY]
    assert tasks.grant("b", "w", grant_if_free([lock("2020-01-01T12/2020-01-03")])) is None
    assert tasks.locks("b") == []
    # another data source's locks are not the caller's concern
    tasks.insert(task("c", ds="x"))
    assert tasks.grant("c", "x", grant_if_free([lock(DAY, ds="x")])) is not None
    tasks.finish("a", {"status": "SUCCESS"})
    assert tasks.locks("a") == []
    assert tasks.grant("b", "w", grant_if_free([lock("2020-01-01T12/2020-01-03")])) is not None


def test_racing_grants_of_overlapping_locks_give_one_winner(location):
    with closing(open_metadata_store(location)) as meta:
        setup = TaskStore(meta)
        for i in range(8):
            setup.insert(task(f"t{i}"))
    won: list[str] = []
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        with closing(open_metadata_store(location)) as meta:  # a connection of its own, as a process has
            store = TaskStore(meta)
            barrier.wait()
            if store.grant(f"t{i}", "w", grant_if_free([lock(DAY)])) is not None:
                won.append(f"t{i}")

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(won) == 1


def test_a_guarded_publish_commits_with_its_checks_and_only_once(stores):
    meta, tasks = stores
    tasks.insert(task("a"))
    tasks.grant("a", "w", grant_if_free([lock(DAY)]))
    day = [seg(DAY)]
    meta.publish(
        day, overwrite=True, guard=tasks.guard("a", 0, [("w", s.interval) for s in day], publishes=True)
    )
    assert [s.id for s in meta.used_segments("w")] == [day[0].id] and tasks.get("a").published
    again = [seg(DAY, "v2")]
    with pytest.raises(Fenced, match="has published already"):
        meta.publish(
            again, overwrite=True, guard=tasks.guard("a", 0, [("w", again[0].interval)], publishes=True)
        )
    assert [s.id for s in meta.used_segments("w")] == [day[0].id]


@pytest.mark.parametrize(
    ("why", "attempt", "interval", "revoked"),
    [
        ("stale attempt", 1, DAY, False),
        ("interval not locked", 0, "2020-01-01/2020-01-03", False),
        ("lock revoked", 0, DAY, True),
    ],
)
def test_a_fenced_publish_writes_nothing(stores, why, attempt, interval, revoked):
    meta, tasks = stores
    tasks.insert(task("a"))
    tasks.grant("a", "w", grant_if_free([lock(DAY, revoked=revoked)]))
    new = [seg(interval)]
    with pytest.raises(Fenced):
        meta.publish(
            new, overwrite=True, guard=tasks.guard("a", attempt, [("w", new[0].interval)], publishes=True)
        )
    assert meta.used_segments() == [] and not tasks.get("a").published


def test_a_shutdown_racing_a_publish_leaves_exactly_one_outcome(location):
    """Either the publish commits (and the shutdown then changes nothing) or the shutdown does (and
    the publish is refused): never segments published by a task reported failed, nor the reverse."""
    for round_ in range(6):
        _race_publish_and_shutdown(location, f"w{round_}")


def _race_publish_and_shutdown(location: str, ds: str) -> None:
    with closing(open_metadata_store(location)) as meta:
        tasks = TaskStore(meta)
        tasks.insert(task(ds, ds=ds))
        tasks.grant(ds, ds, grant_if_free([lock(DAY, ds=ds)]))
    outcome: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def publish() -> None:
        with closing(open_metadata_store(location)) as meta:
            tasks, s = TaskStore(meta), seg(DAY, ds=ds)
            barrier.wait()
            try:
                meta.publish(
                    [s], overwrite=True, guard=tasks.guard(ds, 0, [(ds, s.interval)], publishes=True)
                )
                outcome["published"] = True
            except Fenced:
                outcome["published"] = False

    def shutdown() -> None:
        with closing(open_metadata_store(location)) as meta:
            tasks = TaskStore(meta)
            barrier.wait()
            stopped = tasks.finish(ds, {"status": "FAILED"}, unless_published=True, fence=True)
            outcome["stopped"] = stopped is not None

    threads = [threading.Thread(target=publish), threading.Thread(target=shutdown)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with closing(open_metadata_store(location)) as meta:
        used = meta.used_segments(ds)
        row = TaskStore(meta).get(ds)
    assert outcome["published"] != outcome["stopped"], outcome
    assert bool(used) == outcome["published"] == row.published
    assert row.active == outcome["published"]  # a published task is left to finish by itself


def test_a_guarded_delete_removes_only_unused_rows_under_a_current_lock(stores):
    meta, tasks = stores
    old, kept = seg(DAY, "v1"), seg("2020-01-02/2020-01-03", "v1")
    meta.publish([old, kept], overwrite=False)
    meta.mark_unused([old.id, kept.id])
    meta.mark_used([kept.id])
    tasks.insert(task("k"))
    tasks.grant("k", "w", grant_if_free([lock("2020-01-01/2020-01-03")]))
    interval = Interval.parse("2020-01-01/2020-01-03")
    with pytest.raises(Fenced):
        meta.delete_unused([old.id, kept.id], guard=tasks.guard("k", 7, [("w", interval)], publishes=False))
    assert (
        meta.delete_unused([old.id, kept.id], guard=tasks.guard("k", 0, [("w", interval)], publishes=False))
        == 1
    )
    assert [r.segment.id for r in meta.segments("w", include_unused=True)] == [kept.id]


def test_rules_keep_every_version_and_the_newest_is_in_force(location):
    with closing(open_metadata_store(location)) as meta:
        rules = RuleStore(meta)
        assert rules.current() == {}
        first = rules.set("w", [{"type": "loadForever"}])
        second = rules.set("w", [{"type": "dropForever"}])
        rules.set("_default", [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}])
        assert second > first
        assert rules.current()["w"] == [{"type": "dropForever"}] and "_default" in rules.current()
        assert [v for v, _ in rules.history("w")] == [second, first]


def test_every_rules_change_leaves_druids_audit_entry(location):
    with closing(open_metadata_store(location)) as meta:
        rules = RuleStore(meta)
        rules.set("w", [{"type": "loadForever"}], AuditInfo("ann", "first", "10.0.0.1"))
        rules.set("w", [{"type": "dropForever"}], AuditInfo("bob", "", "10.0.0.2"))
        rules.set("x", [], AuditInfo("cy"))
        week = rules.audit.history("rules", "w")  # by default: the last week, oldest first
        assert [(e["key"], e["auditInfo"]["author"], e["payload"]) for e in week] == [
            ("w", "ann", '[{"type":"loadForever"}]'),
            ("w", "bob", '[{"type":"dropForever"}]'),
        ]
        assert week[0]["type"] == "rules" and week[0]["auditInfo"] == {"author": "ann", "comment": "first",
                                                                       "ip": "10.0.0.1"}  # fmt: skip
        newest = rules.audit.history("rules", count=2)  # by count: newest first, every data source
        assert [(e["key"], e["auditInfo"]["author"]) for e in newest] == [("x", "cy"), ("w", "bob")]
        assert rules.audit.history("rules", "w", interval=Interval.parse("2000-01-01/2001-01-01")) == []
        with pytest.raises(ValueError, match="greater than zero"):
            rules.audit.history("rules", count=0)


def test_an_append_refuses_a_chunk_another_version_took_meanwhile(stores):
    """Two appends sharing a lock both find a day empty and version it each their own way: the one
    publishing second would be hidden under (or hide) the first, so it publishes nothing."""
    meta, tasks = stores
    for t in ("a", "b"):
        tasks.insert(task(t))
        tasks.grant(t, "w", lambda held: [lock(DAY, lockType="APPEND")])
    first, second = seg(DAY, "v1"), seg(DAY, "v2")
    meta.publish([first], overwrite=False, guard=tasks.guard("a", 0, [("w", first.interval)], publishes=True,
                                                             joins=[("w", first.interval, "v1")]))  # fmt: skip
    joins = [("w", second.interval, "v2")]
    with pytest.raises(Fenced, match="another task wrote"):
        meta.publish([second], overwrite=False,
                     guard=tasks.guard("b", 0, [("w", second.interval)], publishes=True, joins=joins))  # fmt: skip
    # joining the version that is there is what an append does
    extra = seg(DAY, "v1", part=1)
    meta.publish([extra], overwrite=False, guard=tasks.guard("b", 0, [("w", DAY_IV)], publishes=True,
                                                             joins=[("w", DAY_IV, "v1")]))  # fmt: skip
    assert sorted(s.id for s in meta.used_segments("w")) == sorted([first.id, extra.id])


DAY_IV = Interval.parse(DAY)


def test_one_coordinator_leads_a_database_and_its_own_address_takes_it_back(stores):
    _, tasks = stores
    assert tasks.claim_lead("h1:8081", now_ms=1_000, ttl_ms=15_000) is None
    assert tasks.claim_lead("h2:8081", now_ms=5_000, ttl_ms=15_000) == "h1:8081"
    assert tasks.claim_lead("h1:8081", now_ms=6_000, ttl_ms=15_000) is None  # a restart on the same address
    assert tasks.claim_lead("h2:8081", now_ms=22_000, ttl_ms=15_000) is None  # h1's heartbeat lapsed
    tasks.release_lead("h1:8081")  # not the holder: nothing changes
    assert tasks.claim_lead("h1:8081", now_ms=23_000, ttl_ms=15_000) == "h2:8081"
    tasks.release_lead("h2:8081")
    assert tasks.claim_lead("h1:8081", now_ms=23_000, ttl_ms=15_000) is None
