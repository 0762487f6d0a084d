"""`strata segments cleanup`'s decisions on a local deep storage: what no metadata row names goes,
what a row names stays, and young objects wait."""

from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from strata.storage import open_metadata_store
from strata.storage.deep_storage import LocalDeepStorage
from strata.storage.segment_cleanup import delete_objects, find_orphans
from timeline import DataSegment, Interval


def _push(deep: LocalDeepStorage, day: int) -> DataSegment:
    staging = deep.staging_dir()
    pq.write_table(pa.table({"__time": [day]}), staging / "index.parquet")
    return deep.push(staging, DataSegment("w", Interval.parse(f"2020-01-0{day}/2020-01-0{day + 1}"), "v1"))


def test_orphans_are_what_no_row_names(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    published, orphan = _push(deep, 1), _push(deep, 2)
    leftover = deep.staging_dir()  # an ingestion killed while building
    (leftover / "rows.arrow").write_bytes(b"x" * 10)
    with closing(open_metadata_store(tmp_path / "m.db")) as store:
        store.publish([published], overwrite=False)
        rows = [r.segment for r in store.segments(include_unused=True)]
    found = find_orphans(deep, rows, min_age_s=0)
    assert sorted(o.location for o in found.objects) == sorted([deep.location_of(orphan), str(leftover)])
    assert found.named == 1 and found.bytes > 10
    young = find_orphans(deep, rows, min_age_s=3600)
    assert young.objects == [] and young.kept_young == 2
    assert delete_objects(deep, found.objects) == 2
    assert [o.location for o in deep.stored()] == [deep.location_of(published)]
    assert not (tmp_path / "deep" / "w" / "2020-01-02T00:00:00.000Z_2020-01-03T00:00:00.000Z").exists()


def test_an_old_object_is_an_orphan_once_past_the_minimum_age(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    orphan = _push(deep, 1)
    index = Path(deep.location_of(orphan)) / "index.parquet"
    old = time.time() - 7200
    os.utime(index, (old, old))
    assert [o.location for o in find_orphans(deep, [], min_age_s=3600).objects] == [deep.location_of(orphan)]
