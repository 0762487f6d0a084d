"""The real-time node's engine room: log, live index, persists, handoffs, recovery.

Order of a push: rows parsed (worker thread) -> bucket versions fixed -> one log record queued ->
written and fsynced with whatever else is queued (group commit) -> applied to the live index in
lsn order -> acknowledged. Persists and handoffs are serialized by one lock so a checkpoint
always describes a consistent cut: every record up to its lsn is in a part or handed off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strata.data_node.announcer import SegmentAnnouncer
from strata.data_node.served import ServedSegments
from strata.discovery import ZkPaths
from strata.realtime.handoff import historicals_serving, publish_final
from strata.realtime.index import LiveIndex
from strata.realtime.pending import BucketRegistry
from strata.realtime.persist import (
    load_part,
    read_checkpoint,
    remove_unlisted_parts,
    write_checkpoint,
    write_part,
)
from strata.realtime.producers import Producers
from strata.realtime.sink import Sink, WrittenPart
from strata.realtime.spec import RealtimeSpec
from strata.realtime.wal import WalRecord, WriteAheadLog, first_lsn, read_file, wal_files
from strata.storage.deep_storage import DeepStorage
from strata.storage.metadata_store import MetadataStore
from timeline import DataSegment

log = logging.getLogger(__name__)


@dataclass
class NodeStats:
    persists: int = 0
    persist_failures: int = 0
    handoffs: int = 0
    last_persist: float = field(default_factory=time.monotonic)
    last_error: str | None = None


class RealtimeNode:
    def __init__(
        self,
        spec: RealtimeSpec,
        base_dir: Path,
        served: ServedSegments,
        announcer: SegmentAnnouncer,
        deep: DeepStorage,
        store: MetadataStore,
        *,
        zk: Callable[[], Any] | None = None,
        zk_paths: ZkPaths | None = None,
        drop_delay_s: float = 30.0,
        handoff_poll_s: float = 1.0,
    ):
        self.spec = spec
        self.base = base_dir
        self.served, self.announcer = served, announcer
        self.deep, self.store = deep, store
        self.zk, self.zk_paths = zk, zk_paths
        self.drop_delay_s, self.handoff_poll_s = drop_delay_s, handoff_poll_s
        self.index = LiveIndex(spec)
        self.buckets = BucketRegistry(store, base_dir)
        self.stats = NodeStats()
        self.wal = WriteAheadLog(base_dir / "wal", 1, self._on_commit)
        self._lock = asyncio.Lock()  # persists and handoff steps, one at a time
        self._inflight: set[asyncio.Future[WalRecord]] = set()
        self._handoffs: dict[int, asyncio.Task[None]] = {}
        self._persisting: asyncio.Task[None] | None = None
        self._announce_queue: list[DataSegment] = []
        self._cut: tuple[int, dict[str, Any]] = (0, {})  # the last checkpoint's lsn and producers

    @property
    def parts_dir(self) -> Path:
        return self.base / "parts"

    # -- start and recovery -------------------------------------------------------------------------
    async def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        replayed = await asyncio.to_thread(self._recover)
        loop = asyncio.get_running_loop()
        self.wal.start(loop)
        for sink in self.index.sinks.values():
            sink.publish_rows()
            self.served.add(sink.segment, sink.key)
        await self.announcer.announce([s.segment for s in self.index.sinks.values()])
        log.info(
            "real-time %s: %d live segments, %d log records replayed, next lsn %d",
            self.spec.data_source,
            len(self.index.sinks),
            replayed,
            self.wal.next_lsn,
        )
        await self.buckets.start(self.index)
        for start, sink in self.index.sinks.items():
            if sink.closed:
                self._handoffs[start] = asyncio.create_task(self._handoff(start))

    def _recover(self) -> int:
        """Checkpoint, then every later record of the log, in lsn order (a worker thread, before serving)."""
        state = read_checkpoint(self.base) or {}
        idx = self.index
        idx.applied_lsn = int(state.get("lsn", 0))
        idx.producers = Producers.from_json(state.get("producers") or {})
        idx.handed_off = {k: int(v) for k, v in (state.get("handedOff") or {}).items()}
        idx._merge_dimensions(state.get("dimensions") or [])
        idx.max_event_time = state.get("maxTime")
        self._cut = (idx.applied_lsn, state.get("producers") or {})
        listed: set[str] = set()
        for entry in state.get("sinks") or []:
            segment = DataSegment.from_json(entry["segment"])
            sink, _ = idx.sink_for(segment.interval.start, segment.version)
            sink.closed, sink.published = bool(entry.get("closed")), bool(entry.get("published"))
            for path in entry.get("files") or []:
                sink.add_part(load_part(path))
                listed.add(path)
        remove_unlisted_parts(self.parts_dir, listed)
        replayed, next_lsn = 0, idx.applied_lsn + 1
        files = wal_files(self.wal.directory)
        for i, path in enumerate(files):
            last, good = first_lsn(path) - 1, 0
            for record, offset in read_file(path):
                last, good = record.lsn, offset
                next_lsn = max(next_lsn, record.lsn + 1)
                if record.lsn > idx.applied_lsn:
                    idx.apply(record)
                    replayed += 1
            if i == len(files) - 1 and good < path.stat().st_size:
                log.warning("write-ahead log %s ends with a torn record: cut at %d", path.name, good)
                with open(path, "r+b") as f:
                    f.truncate(good)
            self.wal.file_max_lsn[path] = last
        self.wal.next_lsn = next_lsn
        return replayed

    # -- pushes -------------------------------------------------------------------------------------
    def log_batch(self, header: dict[str, Any], body: bytes) -> asyncio.Future[WalRecord]:
        future = self.wal.append(header, body)
        self._inflight.add(future)
        future.add_done_callback(self._inflight.discard)
        return future

    def _on_commit(self, group: list[WalRecord]) -> None:
        touched: dict[str, Sink] = {}
        created: list[Sink] = []
        for record in group:
            t, c = self.index.apply(record)
            touched.update((s.key, s) for s in t)
            created += c
        for sink in touched.values():
            sink.publish_rows()
        for sink in created:
            self.served.add(sink.segment, sink.key)
        if created:
            self._announce_queue += [s.segment for s in created]
            asyncio.get_running_loop().create_task(self._announce_pending())
        if self.over_limits(1.0):
            self.request_persist()

    async def _announce_pending(self) -> None:
        pending, self._announce_queue = self._announce_queue, []
        await self.announcer.announce(pending)

    async def barrier(self) -> None:
        """Wait until every batch logged so far is applied (or failed)."""
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    # -- memory and persists ------------------------------------------------------------------------
    def over_limits(self, factor: float) -> bool:
        return (
            self.index.rows_in_memory() >= factor * self.spec.max_rows_in_memory
            or self.index.bytes_in_memory() >= factor * self.spec.max_bytes_in_memory
        )

    def request_persist(self) -> None:
        if self._persisting is None or self._persisting.done():
            self._persisting = asyncio.get_running_loop().create_task(self.persist())

    async def persist(self) -> None:
        async with self._lock:
            await self._persist_locked()

    async def _persist_locked(self) -> None:
        idx = self.index
        self.wal.rotate()
        lsn = idx.applied_lsn
        producers = idx.producers.to_json()
        work = [s for s in idx.sinks.values() if s.batches]
        for sink in work:
            sink.begin_persist()
        written = []
        try:
            for sink in work:
                part = await asyncio.to_thread(
                    write_part,
                    self.parts_dir / sink.segment.id,
                    sink.persisting,
                    idx.dimensions,
                    self.spec.metrics,
                    self.spec.granularity.rollup,
                )
                written.append((sink, part))
            new_parts = {sink.segment.id: [part] for sink, part in written}
            state = self._checkpoint(lsn, producers, new_parts)
            await asyncio.to_thread(write_checkpoint, self.base, state)
        except Exception as e:
            self.stats.persist_failures += 1
            self.stats.last_error = f"persist failed: {e}"
            log.error("persist failed (rows stay in memory and in the log): %s", e)
            for _, part in written:
                await asyncio.to_thread(Path(part.path).unlink, True)
            for sink in work:
                sink.abort_persist()
                sink.publish_rows()
            raise
        # no await from here: queries see the rows either in memory or in the part, never both
        for sink, part in written:
            sink.add_part(part)
            sink.end_persist()
            sink.publish_rows()
        self._cut = (lsn, producers)
        self.wal.delete_up_to(lsn)
        self.stats.persists += 1
        self.stats.last_persist = time.monotonic()

    def _checkpoint(
        self, lsn: int, producers: dict[str, Any], new_parts: dict[str, list[WrittenPart]] | None = None
    ) -> dict[str, Any]:
        idx = self.index
        sinks = []
        for sink in idx.sinks.values():
            ranges = {path: sink.part_ranges[path] for path in sink.files}
            extra = (new_parts or {}).get(sink.segment.id, [])
            ranges.update((p.path, p.time_range) for p in extra)
            sinks.append(
                {
                    "segment": sink.segment.to_json(),
                    "files": [*sink.files, *(p.path for p in extra)],
                    "timeRanges": ranges,
                    "closed": sink.closed,
                    "published": sink.published,
                }
            )
        return {
            "lsn": lsn,
            "producers": producers,
            "handedOff": idx.handed_off,
            "sinks": sinks,
            "dimensions": [
                {"name": d.name, "type": d.type, "multiValueHandling": d.multi_value_handling}
                for d in idx.dimensions
            ],
            "maxTime": idx.max_event_time,
        }

    # -- handoff ------------------------------------------------------------------------------------
    def handoff(self, starts: list[int] | None = None) -> list[str]:
        """Start handing off the given buckets (all open ones by default); returns their segment ids."""
        ids = []
        for start, sink in list(self.index.sinks.items()):
            if starts is not None and start not in starts:
                continue
            ids.append(sink.segment.id)
            task = self._handoffs.get(start)
            if task is None or task.done():
                sink.closed = True
                self._handoffs[start] = asyncio.create_task(self._handoff(start))
        return ids

    async def _handoff(self, start: int) -> None:
        try:
            await self._handoff_steps(start)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.stats.last_error = f"handoff failed: {e}"
            log.exception("handoff of bucket %d failed; retried later", start)
            self._handoffs.pop(start, None)

    async def _handoff_steps(self, start: int) -> None:
        sink = self.index.sinks[start]
        sink.closed = True
        await self.barrier()
        await self.persist()  # every row of the bucket in a part; the checkpoint says it is closed
        if not sink.files:  # nothing was ever taken for it: nothing to publish or wait for
            await self.buckets.forget(sink.segment.id)
            sink.published = True
        elif not sink.published:
            await asyncio.to_thread(
                publish_final,
                sink.segment,
                list(sink.files),
                self.index.dimensions,
                self.spec.metrics,
                self.spec.granularity.rollup,
                sink.facts,
                self.deep,
                self.store,
                self.buckets.removed_on_publish(sink.segment.id),
            )
            sink.published = True
            await self.persist()
        if sink.files:
            await self._wait_for_historical(sink.segment.id)
        async with self._lock:
            await self.announcer.unannounce([sink.segment])
            self.served.remove(sink.segment)
            self.index.handed_off[sink.segment.id] = start
            del self.index.sinks[start]
            # the last persist's cut still holds for every other bucket: only the handoff is new
            state = self._checkpoint(*self._cut)
            await asyncio.to_thread(write_checkpoint, self.base, state)
        self.stats.handoffs += 1
        log.info("handed off %s", sink.segment.id)
        await asyncio.sleep(self.drop_delay_s)  # queries already reading it finish
        sink.forget()
        await asyncio.to_thread(shutil.rmtree, self.parts_dir / sink.segment.id, True)

    async def _wait_for_historical(self, segment_id: str) -> None:
        if self.zk is None or self.zk_paths is None:
            log.warning("no ZooKeeper: %s stays served here until a restart with --zk", segment_id)
            await asyncio.Event().wait()
            return
        zk, paths = self.zk(), self.zk_paths
        while not await asyncio.to_thread(historicals_serving, zk, paths, segment_id):  # noqa: ASYNC110 - polls ZooKeeper
            await asyncio.sleep(self.handoff_poll_s)

    # -- the clock ----------------------------------------------------------------------------------
    async def tick_forever(self, period_s: float = 1.0) -> None:
        """Persist when memory or the persist period says so; hand off buckets whose window closed."""
        while True:
            await asyncio.sleep(period_s)
            try:
                await self._tick()
            except Exception as e:
                log.warning("real-time tick failed: %s", e)

    async def _tick(self) -> None:
        spec = self.spec
        period_due = time.monotonic() - self.stats.last_persist >= spec.persist_period_ms / 1000
        if self.over_limits(1.0) or (period_due and self.index.rows_in_memory()):
            self.request_persist()
        stalled = [s for s, sink in self.index.sinks.items() if sink.closed and s not in self._handoffs]
        if stalled:  # a handoff that failed (e.g. deep storage unreachable): try again
            self.handoff(stalled)
        if spec.rejection_policy == "none":
            return
        now = int(time.time() * 1000) if spec.rejection_policy == "serverTime" else self.index.max_event_time
        if now is None:
            return
        due = [
            s
            for s, sink in self.index.sinks.items()
            if not sink.closed and sink.interval.end + spec.window_ms <= now
        ]
        if due:
            self.handoff(due)

    def window_end(self) -> int | None:
        """Events after this instant are outside the window: Druid's serverTime policy takes
        events up to now + windowPeriod only, so a wrong clock cannot open buckets far ahead."""
        if self.spec.rejection_policy == "serverTime":
            return int(time.time() * 1000) + self.spec.window_ms
        return None

    def window_start(self) -> int | None:
        """Events before this instant are outside the window (None: every event is taken)."""
        spec = self.spec
        if spec.rejection_policy == "serverTime":
            return int(time.time() * 1000) - spec.window_ms
        if spec.rejection_policy == "messageTime" and self.index.max_event_time is not None:
            return self.index.max_event_time - spec.window_ms
        return None

    async def stop(self) -> None:
        for task in self._handoffs.values():
            task.cancel()
        await asyncio.gather(*self._handoffs.values(), return_exceptions=True)
        if self._persisting is not None:
            with contextlib.suppress(Exception):
                await self._persisting
        await asyncio.to_thread(self.wal.close)
