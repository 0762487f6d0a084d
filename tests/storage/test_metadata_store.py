"""The SQLite metadata store: atomic publish, overshadowing, used flags, schema versions."""

from __future__ import annotations

import sqlite3

import pytest

from storage import MetadataStoreError, open_metadata_store
from storage.metadata_store import overshadowed_by
from timeline import DataSegment, Interval, ShardSpec


def seg(interval: str, version: str, part: int = 0, parts: int = 1, ds: str = "w") -> DataSegment:
    shard = ShardSpec.none() if parts == 1 else ShardSpec.numbered(part, parts)
    return DataSegment(
        ds, Interval.parse(interval), version, {"type": "local", "path": "/x"}, ("d",), ("m",), shard
    )


def test_publish_and_read_back(tmp_path):
    store = open_metadata_store(tmp_path / "m.db")
    a, b = seg("2020-01-01/2020-01-02", "v1", 0, 2), seg("2020-01-01/2020-01-02", "v1", 1, 2)
    store.publish([a, b], overwrite=False)
    assert store.used_segments("w") == [a, b] and store.data_sources() == ["w"]
    assert store.used_segments("w")[1].to_json() == b.to_json()
    store.close()
    again = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    assert len(again.used_segments()) == 2
    row = (
        sqlite3.connect(tmp_path / "m.db")
        .execute(
            'SELECT id, dataSource, start, "end", partitioned, version, used FROM druid_segments ORDER BY id'
        )
        .fetchone()
    )
    assert row == (a.id, "w", "2020-01-01T00:00:00.000Z", "2020-01-02T00:00:00.000Z", 1, "v1", 1)
    again.close()


def test_overwrite_marks_only_fully_covered_segments_unused(tmp_path):
    store = open_metadata_store(tmp_path / "m.db")
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


def test_failed_publish_changes_nothing(tmp_path):
    store = open_metadata_store(tmp_path / "m.db")
    old = seg("2020-01-01/2020-01-02", "v1")
    store.publish([old], overwrite=False)
    dup = [seg("2020-01-01/2020-01-02", "v2"), old]  # second one collides: the whole batch must roll back
    with pytest.raises(MetadataStoreError):
        store.publish(dup, overwrite=True)
    assert [s.id for s in store.used_segments()] == [old.id]
    assert len(store.segments(include_unused=True)) == 1
    store.close()


def test_newer_schema_is_refused(tmp_path):
    open_metadata_store(tmp_path / "m.db").close()
    conn = sqlite3.connect(tmp_path / "m.db")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(MetadataStoreError, match="schema version 99"):
        open_metadata_store(tmp_path / "m.db")


def test_wal_mode_and_unsupported_urls(tmp_path):
    open_metadata_store(tmp_path / "m.db").close()
    assert sqlite3.connect(tmp_path / "m.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(MetadataStoreError, match="not available yet"):
        open_metadata_store("postgresql://db/strata")


def test_overshadow_rule_needs_higher_version():
    old = seg("2020-01-01/2020-01-02", "v3")
    assert overshadowed_by([seg("2020-01-01/2020-01-02", "v2")], [old]) == []
    assert overshadowed_by([seg("2019-12-01/2020-02-01", "v4")], [old]) == [old]


def test_used_segments_see_every_commit_from_this_and_other_connections(tmp_path):
    """The read is remembered between commits: each kind of change must still show at once."""
    store, other = open_metadata_store(tmp_path / "m.db"), open_metadata_store(tmp_path / "m.db")
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
    # a change made outside Strata, straight into the file, is seen too
    raw = sqlite3.connect(tmp_path / "m.db")
    raw.execute("UPDATE druid_segments SET used = 0 WHERE id = ?", (b.id,))
    raw.commit()
    raw.close()
    assert store.used_segments() == [a] and other.used_segments("w") == [a]
    other.publish([c], overwrite=False)
    assert store.used_segments("other") == [c] and {s.id for s in store.used_segments()} == {a.id, c.id}
    listed = store.used_segments()
    listed.clear()  # a caller's list is its own
    assert len(store.used_segments()) == 2
    store.close()
    other.close()
