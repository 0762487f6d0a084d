"""The data lifecycle's tables on SQLite and a real PostgreSQL alike: pending segments (a bucket
registered before its rows, refused under a newer used version, removed in its publish's own
transaction) and the configuration documents with their audit entries."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest

from strata.storage import open_metadata_store
from strata.storage.audit_log import AuditInfo
from strata.storage.config_store import ConfigStore
from strata.storage.metadata_store import MetadataStore
from strata.storage.pending_segments import PendingSegments
from timeline import DataSegment, Interval

HOUR = Interval.parse("2020-01-01T05:00Z/2020-01-01T06:00Z")
DAY = Interval.parse("2020-01-01/2020-01-02")


def seg(interval: Interval, version: str) -> DataSegment:
    return DataSegment("w", interval, version, {"type": "local", "path": "/x"}, ("k",), ())


@pytest.fixture(params=["sqlite", "postgresql"])
def meta(request: pytest.FixtureRequest, tmp_path) -> Iterator[MetadataStore]:
    location = (
        str(tmp_path / "m.db") if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))
    )
    with closing(open_metadata_store(location)) as store:
        yield store


def test_a_bucket_is_pending_until_its_publish_removes_it(meta: MetadataStore) -> None:
    pending = PendingSegments(meta)
    live = seg(HOUR, "2020-01-02T00:00:00.000Z")
    assert pending.register(live, "node-a") is None
    assert pending.register(live, "node-a") is None  # again (a restarted node): one row
    assert [s.id for s in pending.overlapping("w", DAY)] == [live.id]
    assert pending.overlapping("w", Interval.parse("2020-01-02/2020-01-03")) == []
    assert pending.of_allocator("w", "node-a") == [live.id] and pending.of_allocator("w", "node-b") == []
    meta.publish([live], overwrite=False, guard=pending.removed_on_publish([live.id]))
    assert pending.overlapping("w", DAY) == []
    assert [s.id for s in meta.used_segments("w")] == [live.id]


def test_a_bucket_under_a_newer_used_version_is_refused_and_nothing_is_recorded(meta: MetadataStore) -> None:
    pending = PendingSegments(meta)
    meta.publish([seg(DAY, "2020-01-05T00:00:00.000Z")], overwrite=True)  # a compaction committed
    late = seg(HOUR, "2020-01-03T00:00:00.000Z")
    assert pending.register(late, "node-a") == "2020-01-05T00:00:00.000Z"
    assert pending.overlapping("w", DAY) == []
    assert pending.register(seg(HOUR, "2020-01-06T00:00:00.000Z"), "node-a") is None


def test_a_failed_publish_keeps_the_bucket_pending(meta: MetadataStore) -> None:
    pending = PendingSegments(meta)
    live = seg(HOUR, "2020-01-02T00:00:00.000Z")
    pending.register(live, "node-a")

    def refuse(conn: object) -> None:
        pending.removed_on_publish([live.id])(conn)
        raise RuntimeError("the task lost its lock")

    with pytest.raises(RuntimeError):
        meta.publish([live], overwrite=False, guard=refuse)
    assert [s.id for s in pending.overlapping("w", DAY)] == [live.id]  # rolled back with the publish
    assert meta.used_segments("w") == []


def test_a_config_document_changes_whole_with_its_audit_entry(meta: MetadataStore) -> None:
    configs = ConfigStore(meta)
    assert configs.get("coordinator.compaction.config") is None
    configs.update("coordinator.compaction.config", lambda doc: {"n": 1}, AuditInfo("ann", "first"))
    configs.update("coordinator.compaction.config", lambda doc: {"n": doc["n"] + 1}, AuditInfo("bob"))
    with pytest.raises(KeyError):
        configs.update("coordinator.compaction.config", lambda doc: doc["missing"], AuditInfo("cy"))
    assert configs.get("coordinator.compaction.config") == {"n": 2}
    entries = configs.audit.history("coordinator.compaction.config", "coordinator.compaction.config")
    assert [(e["auditInfo"]["author"], e["payload"]) for e in entries] == [
        ("ann", '{"n":1}'),
        ("bob", '{"n":2}'),
    ]
