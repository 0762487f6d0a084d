"""A real-time node's buckets as pending segments in the metadata store (Druid's
`druid_pendingSegments`), so no compaction replaces a time chunk under rows not handed off yet.

A bucket is registered (its segment's interval and version) before the first push into it is
acknowledged. Pushes never wait on the metadata store's health: when it cannot be written the push
goes on (the node takes events without the store, as before) and the next push into the bucket
registers it; until then a compaction could replace its chunk. A bucket whose version a used
segment (a compaction that committed meanwhile) already outdates takes a newer version first, so
its rows are never hidden. The handoff's publish removes the row in its own transaction
(strata.realtime.handoff); a bucket handed off without rows is removed by itself. On start the
node registers its live buckets again and forgets rows of its own that no live bucket holds (a
push that registered and then failed).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

from strata.realtime.index import LiveIndex
from strata.storage.metadata_store import MetadataStore, TransactionGuard
from strata.storage.pending_segments import PendingSegments

log = logging.getLogger(__name__)

REVERSION_TRIES = 3


class BucketRegistry:
    def __init__(self, store: MetadataStore, base_dir: Path) -> None:
        self._store = store
        self.allocator = f"{socket.gethostname()}:{base_dir.resolve()}"  # stays across restarts
        self._pending: PendingSegments | None = None

    async def _table(self) -> PendingSegments:
        if self._pending is None:
            self._pending = await asyncio.to_thread(PendingSegments, self._store)
        return self._pending

    async def start(self, index: LiveIndex) -> None:
        """Register the recovered live buckets and forget this node's stale rows (best effort: the
        store may be away at start, and the next pushes register what they need)."""
        try:
            pending = await self._table()
            live = {sink.segment.id for sink in index.sinks.values()}
            stale = (
                set(await asyncio.to_thread(pending.of_allocator, index.spec.data_source, self.allocator))
                - live
            )
            if stale:
                await asyncio.to_thread(pending.remove, sorted(stale))
            await self._register(index, [s for s in index.sinks if s not in index.registered])
        except Exception as e:
            log.warning("cannot register the live buckets as pending segments yet: %s", e)

    async def ensure(self, index: LiveIndex, starts: list[int]) -> None:
        """Register the buckets not registered yet (those the store refuses: at the next push)."""
        todo = [s for s in starts if s not in index.registered]
        if not todo:
            return
        try:
            await self._register(index, todo)
        except Exception as e:
            log.warning("cannot register new buckets as pending segments (retried at the next push): %s", e)

    async def _register(self, index: LiveIndex, todo: list[int]) -> None:
        pending = await self._table()
        for start in todo:
            for _ in range(REVERSION_TRIES):
                segment = index.segment_for(start)
                newer = await asyncio.to_thread(pending.register, segment, self.allocator)
                if newer is None:
                    break
                if start in index.sinks:  # rows taken already (an older node's store): keep its version
                    log.warning(
                        "bucket %s is outdated by version %s; it keeps its version", segment.id, newer
                    )
                    break
                index.rebase(start, newer)
            index.registered.add(start)

    def removed_on_publish(self, segment_id: str) -> TransactionGuard | None:
        return None if self._pending is None else self._pending.removed_on_publish([segment_id])

    async def forget(self, segment_id: str) -> None:
        if self._pending is not None:
            await asyncio.to_thread(self._pending.remove, [segment_id])
