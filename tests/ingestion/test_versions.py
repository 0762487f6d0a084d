"""Overwrite makes a new version and retires the old one; append adds partitions to the latest version."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from strata.ingestion import IngestionError, ingest
from strata.storage import open_metadata_store
from tests.ingestion.conftest import inline_spec

ROWS = "\n".join(
    f'{{"ts": "2020-01-0{d}T0{h}:00:00Z", "k": "v{h}", "n": {h}}}' for d in (1, 2) for h in range(3)
)


def test_overwrite_new_version_and_old_unused(stores):
    first = ingest(inline_spec(ROWS), **stores)
    second = ingest(inline_spec(ROWS), **stores)
    assert second.version > first.version
    store = open_metadata_store(stores["metadata"])
    try:
        used = store.used_segments("t")
        assert {s.version for s in used} == {second.version} and len(used) == 2
        records = store.segments("t", include_unused=True)
        assert sorted((r.segment.version, r.used) for r in records) == sorted(
            [(first.version, False)] * 2 + [(second.version, True)] * 2
        )
    finally:
        store.close()


def test_overwrite_of_one_day_keeps_the_other(stores):
    ingest(inline_spec(ROWS), **stores)
    only_day2 = "\n".join(line for line in ROWS.splitlines() if "01-02" in line)
    ingest(inline_spec(only_day2), **stores)
    store = open_metadata_store(stores["metadata"])
    used = sorted((str(s.interval)[:10], s.version) for s in store.used_segments("t"))
    store.close()
    assert [d for d, _ in used] == ["2020-01-01", "2020-01-02"] and used[0][1] < used[1][1]


def test_append_adds_partitions_to_latest_version(stores):
    first = ingest(inline_spec(ROWS), **stores)
    spec = inline_spec('{"ts": "2020-01-01T05:00:00Z", "k": "new", "n": 9}')
    spec["ioConfig"]["appendToExisting"] = True
    appended = ingest(spec, **stores)
    (seg,) = [w.segment for w in appended.segments]
    assert seg.version == first.version and seg.partition_num == 1
    assert seg.shard_spec.type == "numbered" and seg.shard_spec.partitions == 1
    store = open_metadata_store(stores["metadata"])
    day1 = [s for s in store.used_segments("t") if str(s.interval).startswith("2020-01-01")]
    store.close()
    assert sorted(s.partition_num for s in day1) == [0, 1]
    assert sum(pq.read_metadata(s.load_spec["path"]).num_rows for s in day1) == 4


def test_append_with_other_granularity_is_refused(stores):
    ingest(inline_spec(ROWS), **stores)
    spec = inline_spec('{"ts": "2020-01-01T05:00:00Z", "k": "new", "n": 9}')
    spec["ioConfig"]["appendToExisting"] = True
    spec["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    with pytest.raises(IngestionError, match="same segmentGranularity"):
        ingest(spec, **stores)
