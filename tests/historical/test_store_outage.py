"""A historical whose metadata store is away keeps what it serves and picks up again after."""

from __future__ import annotations

import asyncio
from pathlib import Path

from historical_service.cluster_view import StaticClusterView
from historical_service.control_loop import ControlLoop
from historical_service.loader import SegmentLoader
from historical_service.metrics import HistoricalMetrics
from strata.data_node.change_feed import ChangeHistory
from strata.data_node.served import ServedSegments
from strata.engine import mapped_source
from strata.storage import LocalDeepStorage, MetadataStoreError
from tests.historical.segment_factory import build_segment
from timeline import DataSegment


class FlakyStore:
    def __init__(self) -> None:
        self.segments: list[DataSegment] = []
        self.down = False

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]:
        if self.down:
            raise MetadataStoreError("metadata store postgresql://strata@db1/strata is unreachable")
        return list(self.segments)


def test_a_pass_without_the_store_changes_nothing(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    segments = [build_segment(deep, "wiki", d) for d in range(2)]
    store, served = FlakyStore(), ServedSegments()

    async def scenario() -> None:
        loader = SegmentLoader(tmp_path / "cache", deep)
        loop = ControlLoop(name="h:1", metadata=store, loader=loader, announcer=ChangeHistory(), served=served,
                           cluster=StaticClusterView({"h:1"}), metrics=HistoricalMetrics(), replicas=1)  # fmt: skip
        try:
            store.segments = segments[:1]
            await loop.run_once()
            assert set(loop.loaded) == {segments[0].id}
            store.down, store.segments = True, segments[1:]
            await loop.run_once()  # no exception, nothing dropped
            assert set(loop.loaded) == {segments[0].id} and len(served) == 1
            store.down = False
            await loop.run_once()
            assert set(loop.loaded) == {segments[1].id}
        finally:
            loader.close()
            for s in segments:  # the memory-mapped copies are registered process-wide
                mapped_source.unregister(str(tmp_path / "cache" / s.id / "index.parquet"))

    asyncio.run(scenario())
