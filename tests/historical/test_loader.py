"""The segment loader over a real local deep storage."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from historical_service.loader import LoadFailed, SegmentLoader
from strata.storage import LocalDeepStorage
from tests.historical.segment_factory import build_segment


def test_load_reuse_and_failures(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    good = build_segment(deep, "wiki", 0, rows=50)
    truncated = build_segment(deep, "wiki", 1)
    source = Path(truncated.load_spec["path"])
    source.write_bytes(source.read_bytes()[:-20])
    missing = build_segment(deep, "wiki", 2)
    Path(missing.load_spec["path"]).unlink()

    async def scenario() -> None:
        loader = SegmentLoader(tmp_path / "cache", deep, initial_backoff_s=30)
        try:
            first = await loader.load(good)
            assert not first.reused and first.path == tmp_path / "cache" / good.id / "index.parquet"
            assert first.bytes == good.size == first.path.stat().st_size
            assert pq.read_table(first.path).num_rows == 50
            inode = first.path.stat().st_ino
            second = await loader.load(good)
            assert second.reused and second.path.stat().st_ino == inode
            for bad in (truncated, missing):
                with pytest.raises(LoadFailed):
                    await loader.load(bad)
                assert loader.has_failed(bad.id) and not loader.may_try(bad.id)
                assert not (tmp_path / "cache" / bad.id).exists()
            assert sorted(loader.cached_ids()) == [good.id]
            await loader.delete(good.id)
            assert loader.cached_ids() == []
        finally:
            loader.close()

    asyncio.run(scenario())


def test_corrupt_cached_copy_is_replaced(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    segment = build_segment(deep, "wiki", 0)

    async def scenario() -> None:
        loader = SegmentLoader(tmp_path / "cache", deep)
        try:
            loaded = await loader.load(segment)
            loaded.path.write_bytes(b"PAR1 not really")
            again = await loader.load(segment)
            assert not again.reused and again.path.stat().st_size == segment.size
        finally:
            loader.close()

    asyncio.run(scenario())
