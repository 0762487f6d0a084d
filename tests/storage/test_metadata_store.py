"""The metadata store contract, run against SQLite and a real PostgreSQL alike so they cannot drift:
atomic publish, overshadowing, racing overwrites, used flags, schema versions, other modules' tables."""

from __future__ import annotations

import threading
from contextlib import closing
from functools import partial

import pytest

from strata.storage import MetadataStoreError, open_metadata_store
from strata.storage.metadata_store import Replacement, overshadowed_by
from strata.storage.schema import Migration
from timeline import DataSegment, Interval, ShardSpec


def seg(interval: str, version: str, part: int = 0, parts: int = 1, ds: str = "w") -> DataSegment:
    shard = ShardSpec.none() if parts == 1 else ShardSpec.numbered(part, parts)
    return DataSegment(
        ds, Interval.parse(interval), version, {"type": "local", "path": "/x"}, ("d",), ("m",), shard
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where a store lives; each test opens as many stores (connections) on it as it likes."""
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    return str(request.getfixturevalue("postgres_url"))


def raw(location: str, sql: str) -> list[tuple]:
    """Run SQL straight on the database, outside the store's own methods (no parameters)."""
    with closing(open_metadata_store(location)) as store, store.transaction() as conn:
        cur = conn.execute(sql)
        return list(cur.fetchall()) if cur.description else []


def test_publish_and_read_back(location):
    store = open_metadata_store(location)
    a, b = seg("2020-01-01/2020-01-02", "v1", 0, 2), seg("2020-01-01/2020-01-02", "v1", 1, 2)
    store.publish([a, b], overwrite=False)
    assert store.used_segments("w") == [a, b] and store.data_sources() == ["w"]
    assert store.used_segments("w")[1].to_json() == b.to_json()
    store.close()
    again = open_metadata_store(f"sqlite:///{location}" if "://" not in location else location)
    assert len(again.used_segments()) == 2
    again.close()
    rows = raw(location, 'SELECT id, dataSource, start, "end", partitioned, version, used,'
                         " used_status_last_updated FROM druid_segments ORDER BY id")  # fmt: skip
    first = (*rows[0][:4], bool(rows[0][4]), rows[0][5], bool(rows[0][6]))
    assert first == (a.id, "w", "2020-01-01T00:00:00.000Z", "2020-01-02T00:00:00.000Z", True, "v1", True)
    assert rows[0][7] is not None


def test_overwrite_marks_only_fully_covered_segments_unused(location):
    store = open_metadata_store(location)
    day1, day2 = seg("2020-01-01/2020-01-02", "v1"), seg("2020-01-02/2020-01-03", "v1")
    month = seg("2020-01-01/2020-02-01", "v0")
    other = seg("2020-01-01/2020-01-02", "v0", ds="other")
    store.publish([day1, day2, month, other], overwrite=False)
    new = [seg("2020-01-01T00/2020-01-01T12", "v2"), seg("2020-01-01T12/2020-01-02", "v2")]
    store.publish(new, overwrite=True)
    used = {s.id for s in store.used_segments()}
    assert used == {day2.id, month.id, other.id} | {s.id for s in new}
    assert store.mark_used([day1.id]) == 1 and store.mark_unused([day1.id, "nope"]) == 1
    assert {r.segment.id: r.used for r in store.segments("w", include_unused=True)}[day1.id] is False
    store.close()


def test_a_replacement_drops_what_lies_inside_its_intervals_in_the_same_publish(location):
    """A SQL REPLACE: every used segment inside its intervals goes, also where the new data has no
    rows (day 2 here), in the transaction that brings the new segments; outside them nothing moves."""
    store = open_metadata_store(location)
    day1, day2, day3 = (seg(f"2020-01-0{d}/2020-01-0{d + 1}", "v1") for d in (1, 2, 3))
    store.publish([day1, day2, day3], overwrite=False)
    new = seg("2020-01-01T06/2020-01-01T07", "v2")
    store.publish([new], overwrite=True, replace=Replacement("w", (Interval.parse("2020-01-01/2020-01-03"),)))
    assert {s.id for s in store.used_segments("w")} == {new.id, day3.id}
    store.publish([], overwrite=True, replace=Replacement("w", (Interval.parse("2020-01-03/2020-01-04"),)))
    assert [s.id for s in store.used_segments("w")] == [new.id]  # no rows: the drop alone
    store.close()


def test_a_replacement_never_cuts_a_coarser_segment_it_would_leave_partly_visible(location):
    store = open_metadata_store(location)
    month = seg("2020-01-01/2020-02-01", "v1")
    store.publish([month], overwrite=False)
    with pytest.raises(MetadataStoreError, match="reaches outside"):
        store.publish([seg("2020-01-05/2020-01-06", "v2")], overwrite=True,
                      replace=Replacement("w", (Interval.parse("2020-01-05/2020-01-06"),)))  # fmt: skip
    assert store.used_segments("w") == [month]  # nothing of the refused publish went in
    whole = seg("2020-01-01/2020-02-01", "v3")
    store.publish(
        [whole], overwrite=True, replace=Replacement("w", (Interval.parse("2020-01-01/2020-02-01"),))
    )
    assert store.used_segments("w") == [whole]
    store.close()


def test_an_overwrite_older_than_what_is_used_goes_in_unused(location):
    """The later commit of two racing jobs loses if its version is older: one winner, no mix."""
    store = open_metadata_store(location)
    newer = [seg("2020-01-01/2020-01-02", "v2", p, 3) for p in range(3)]
    store.publish(newer, overwrite=True)
    older = [seg("2020-01-01/2020-01-02", "v1", p, 2) for p in range(2)]
    store.publish(older, overwrite=True)
    assert store.used_segments() == newer
    assert {r.segment.id for r in store.segments(include_unused=True) if not r.used} == {s.id for s in older}
    store.close()


def test_delete_unused_removes_only_unused_rows(location):
    with closing(open_metadata_store(location)) as store:
        a, b = seg("2020-01-01/2020-01-02", "v1"), seg("2020-01-02/2020-01-03", "v1")
        store.publish([a, b], overwrite=False)
        store.mark_unused([a.id])
        assert store.delete_unused([a.id, b.id, "no-such-id"]) == 1  # b is used: it stays
        assert [r.segment.id for r in store.segments(include_unused=True)] == [b.id]


def test_failed_publish_changes_nothing(location):
    store = open_metadata_store(location)
    old = seg("2020-01-01/2020-01-02", "v1")
    store.publish([old], overwrite=False)
    dup = [seg("2020-01-01/2020-01-02", "v2"), old]  # second one collides: the whole batch must roll back
    with pytest.raises(MetadataStoreError, match="already published"):
        store.publish(dup, overwrite=True)
    assert [s.id for s in store.used_segments()] == [old.id]
    assert len(store.segments(include_unused=True)) == 1
    store.close()


@pytest.mark.timeout(120)
def test_racing_overwrites_leave_exactly_one_winner(location):
    """Two publishers overwrite the same day at the same moment, many times: afterwards the used
    segments of that day are exactly one publisher's set (the higher version), never a mix."""
    stores = [open_metadata_store(location) for _ in range(2)]
    try:
        for round_ in range(25):
            ds = f"race{round_}"
            base = [seg("2020-01-01/2020-01-02", "v0", p, 2, ds=ds) for p in range(2)]
            stores[0].publish(base, overwrite=False)
            sets = [
                [seg("2020-01-01/2020-01-02", f"v{1 + i}", p, 2 + i, ds=ds) for p in range(2 + i)]
                for i in range(2)
            ]
            errors = _race(
                [partial(stores[i].publish, sets[(i + round_) % 2], overwrite=True) for i in range(2)]
            )
            assert not errors
            used = {s.id for s in stores[round_ % 2].used_segments(ds)}
            assert used == {s.id for s in sets[1]}, f"round {round_}: {sorted(used)}"
    finally:
        for s in stores:
            s.close()


def _race(calls: list) -> list[BaseException]:
    """Run the calls in threads released at the same moment; the exceptions they raised."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call) -> None:
        try:
            barrier.wait(10)
            call()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return errors


def test_newer_schema_is_refused(location):
    open_metadata_store(location).close()
    raw(location, "UPDATE strata_schema SET version = 99 WHERE component = 'segments'")
    with pytest.raises(MetadataStoreError, match="schema version 99"):
        open_metadata_store(location)


def test_other_modules_tables_migrate_once_in_order(location):
    """How another module (security's credentials) keeps its tables in the metadata store."""
    v1 = Migration(1, sqlite="CREATE TABLE t_users (name TEXT PRIMARY KEY)",
                   postgresql="CREATE TABLE t_users (name TEXT PRIMARY KEY)")  # fmt: skip
    v2 = Migration(2, sqlite="ALTER TABLE t_users ADD COLUMN role TEXT",
                   postgresql="ALTER TABLE t_users ADD COLUMN role TEXT")  # fmt: skip
    with closing(open_metadata_store(location)) as store:
        assert store.migrate("test_users", [v1]) == 1
        assert store.migrate("test_users", [v1]) == 1  # applied once
        assert store.migrate("test_users", [v1, v2]) == 2
        with store.transaction() as conn:
            conn.execute("INSERT INTO t_users (name, role) VALUES ('ann', 'admin')")
        with pytest.raises(MetadataStoreError, match="newer than this Strata"):
            store.migrate("test_users", [v1])
    assert raw(location, "SELECT name, role FROM t_users") == [("ann", "admin")]


def test_unsupported_urls_are_refused_without_their_password():
    with pytest.raises(MetadataStoreError, match="postgresql://") as e:
        open_metadata_store("mysql://u:hunter2@db/strata")
    assert "hunter2" not in str(e.value)


def test_overshadow_rule_needs_higher_version():
    old = seg("2020-01-01/2020-01-02", "v3")
    assert overshadowed_by([seg("2020-01-01/2020-01-02", "v2")], [old]) == []
    assert overshadowed_by([seg("2019-12-01/2020-02-01", "v4")], [old]) == [old]


def test_used_segments_see_every_commit_from_this_and_other_connections(location):
    """The read is remembered between commits: each kind of change must still show at once."""
    store, other = open_metadata_store(location), open_metadata_store(location)
    a, b = seg("2020-01-01/2020-01-02", "v1"), seg("2020-01-02/2020-01-03", "v1")
    c = seg("2020-01-03/2020-01-04", "v1", ds="other")
    assert store.used_segments() == []
    other.publish([a], overwrite=False)  # another connection's commit
    assert store.used_segments() == [a] and store.used_segments("w") == [a]
    store.publish([b], overwrite=False)  # this connection's own commit
    assert store.used_segments("w") == [a, b] and other.used_segments("w") == [a, b]
    other.mark_unused([a.id])
    assert store.used_segments() == [b] and store.used_segments("w") == [b]
    store.mark_used([a.id])
    assert other.used_segments() == [a, b]
    # a change made outside Strata, straight into the database, is seen too
    raw(
        location,
        f"UPDATE druid_segments SET used = {'0' if '://' not in location else 'FALSE'} WHERE id = '{b.id}'",
    )
    assert store.used_segments() == [a] and other.used_segments("w") == [a]
    other.publish([c], overwrite=False)
    assert store.used_segments("other") == [c] and {s.id for s in store.used_segments()} == {a.id, c.id}
    raw(location, f"DELETE FROM druid_segments WHERE id = '{c.id}'")
    assert store.used_segments() == [a]
    listed = store.used_segments()
    listed.clear()  # a caller's list is its own
    assert len(store.used_segments()) == 1
    store.close()
    other.close()


def test_a_publish_after_the_store_sat_idle_is_committed(location, monkeypatch):
    """PostgreSQL checks a connection idle a while before writing over it; that check must not
    leave the publish inside a transaction nobody commits (it once did)."""
    monkeypatch.setattr("strata.storage.postgres_store.IDLE_CHECK_S", 0.0)
    writer, reader = open_metadata_store(location), open_metadata_store(location)
    assert writer.data_sources() == [] and reader.used_segments() == []
    a = seg("2020-01-01/2020-01-02", "v1")
    writer.publish([a], overwrite=False)
    writer.mark_unused([a.id])
    writer.mark_used([a.id])
    writer.close()
    assert reader.used_segments() == [a]
    reader.close()
