from __future__ import annotations

import hashlib

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.storage.deep_storage import DeepStorageError, LocalDeepStorage
from timeline import DataSegment, Interval, ShardSpec


def test_push_pull_delete_layout(tmp_path):
    deep = LocalDeepStorage(tmp_path / "deep")
    staging = deep.staging_dir()
    pq.write_table(pa.table({"__time": [1]}), staging / "index.parquet")
    segment = DataSegment(
        "w",
        Interval.parse("2020-01-01/2020-01-02"),
        "2020-02-01T00:00:00.000Z",
        shard_spec=ShardSpec.numbered(1, 2),
    )
    pushed = deep.push(staging, segment)
    where = tmp_path / "deep/w/2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z/2020-02-01T00:00:00.000Z/1"
    sha256 = hashlib.sha256((where / "index.parquet").read_bytes()).hexdigest()
    assert pushed.load_spec == {"type": "local", "path": str(where / "index.parquet"), "sha256": sha256}
    assert pushed.size == (where / "index.parquet").stat().st_size > 0
    descriptor = orjson.loads((where / "descriptor.json").read_bytes())
    assert DataSegment.from_json(descriptor) == segment and descriptor["shardSpec"]["partitions"] == 2
    assert not staging.exists()
    with pytest.raises(DeepStorageError, match="already exists"):
        again = deep.staging_dir()
        pq.write_table(pa.table({"__time": [1]}), again / "index.parquet")
        deep.push(again, segment)
    got = deep.pull(pushed, tmp_path / "cache")
    assert pq.read_table(got / "index.parquet").num_rows == 1
    deep.delete(pushed)
    assert not (tmp_path / "deep/w").exists()
