"""The historical's control loop: desired segments from the metadata store, actual from disk.

Every poll period (or at once when membership changes) it reads the used segments, the retention
rules and the live historicals with their tiers, computes this node's share (the replicas the
rules give its tier, placed by rendezvous hashing over that tier's live historicals; every
historical for a broadcast rule; none for a drop rule), loads and then announces what is new, and
removes what is gone. A segment that is still used but now belongs to other nodes (a rebalance,
or a rule moving it to another tier) is dropped only after every one of its new owners announces
it, so a move never leaves a segment unserved; without ZooKeeper there are no other owners and
nothing is handed off. A segment marked unused is unannounced and deleted at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from historical_service.assignment import Assignment, owners
from historical_service.cluster_view import ClusterView
from historical_service.loader import SEGMENT_FILE, LoadFailed, SegmentLoader
from historical_service.metrics import HistoricalMetrics
from historical_service.rule_view import RulesSource, RuleView
from strata.data_node.announcer import SegmentAnnouncer
from strata.data_node.served import ServedSegments
from strata.engine import mapped_source
from strata.storage.retention_rules import DEFAULT_TIER, Placement
from timeline import DataSegment, with_row_facts

log = logging.getLogger(__name__)

LOAD_CHUNK = 16  # segments loaded concurrently
# Loaded segments are announced together once this many wait, or this long after the last
# announcement: announcing each chunk of 16 rewrote every 50-segment batch znode three or four
# times, and every broker parsed each rewrite whole (100,000 segments: ~300,000 segments parsed)
ANNOUNCE_AT = 500
ANNOUNCE_EVERY_S = 1.0


class UsedSegments(Protocol):
    def used_segments(self, data_source: str | None = None) -> list[DataSegment]: ...


class ControlLoop:
    def __init__(
        self,
        *,
        name: str,
        metadata: UsedSegments,
        loader: SegmentLoader,
        announcer: SegmentAnnouncer,
        served: ServedSegments,
        cluster: ClusterView,
        metrics: HistoricalMetrics,
        replicas: int = 2,
        poll_period_s: float = 5.0,
        handoff_check_s: float = 0.5,
        drop_delay_s: float = 0.0,
        tier: str = DEFAULT_TIER,
        rules: RulesSource | None = None,
    ):
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        self.name = name
        self.metadata = metadata
        self.loader = loader
        self.announcer = announcer
        self.served = served
        self.cluster = cluster
        self.metrics = metrics
        self.replicas = replicas
        self.poll_period_s = poll_period_s
        self.handoff_check_s = handoff_check_s
        self.drop_delay_s = drop_delay_s
        self._deleting: dict[str, asyncio.Task[None]] = {}
        self._waiting_replacement: set[str] = set()  # overwritten, kept until the new version is served
        self.loaded: dict[str, DataSegment] = {}
        self.assigned: set[str] = set()
        self.tier = tier
        self.rules = RuleView(rules, replicas)
        self.members: dict[str, str] = {name: tier}  # live historical -> its tier
        self.placements: dict[str, Placement] = {}
        self._assignment = Assignment(name)
        self.passes = 0
        self._settled: tuple[list[DataSegment], frozenset[tuple[str, str]], tuple[bytes, int]] | None = None
        self.pending_handoff: set[str] = set()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- readiness -------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Every assigned segment is loaded, or has failed (retried in the background, never announced)."""
        if self.passes == 0:
            return False
        return all(sid in self.loaded or self.loader.has_failed(sid) for sid in self.assigned)

    # -- waking ----------------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def wake_threadsafe(self) -> None:
        """For kazoo watch callbacks."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("control loop pass failed; retrying next period")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._next_pass_in())

    def _next_pass_in(self) -> float:
        """Soon while a hand-off waits or a failed load is due for retry, else the poll period."""
        if self.pending_handoff:
            return self.handoff_check_s
        retry_in = self.loader.next_retry_in()
        return self.poll_period_s if retry_in is None else min(self.poll_period_s, max(retry_in, 0.05))

    # -- one pass --------------------------------------------------------------------------------
    async def run_once(self) -> None:
        try:
            listed = await asyncio.to_thread(self.metadata.used_segments)
        except Exception as e:  # the store is away (PostgreSQL restarting): keep serving what is loaded
            log.warning(
                "cannot read the metadata store (%s); serving the %d loaded segments", e, len(self.loaded)
            )
            return
        try:
            self.members = {**await self.cluster.live_historicals(), self.name: self.tier}
        except Exception as e:  # ZooKeeper unreachable: keep the last membership
            log.warning("cannot read live historicals (%s); keeping the last known set", e)
        await self.rules.refresh()
        seen = (listed, frozenset(self.members.items()), self.rules.key())
        if seen == self._settled:  # the same segments (compared by identity first), members and rules
            self.passes += 1
            return
        used = {s.id: s for s in listed}
        self.placements = self.rules.placements(listed)
        self.assigned = self._assign()
        self.metrics.segments_assigned.set(len(self.assigned))
        self.loader.forget_failures(keep=self.assigned)

        wanted = [used[sid] for sid in sorted(self.assigned) if sid not in self.loaded]
        await self._load([s for s in wanted if self.loader.may_try(s.id)])
        unused = [self.loaded[sid] for sid in self.loaded if sid not in used]
        await self._drop(await self._replaced(unused, used), reason="unused")
        await self._hand_off(used)
        if self.passes == 0:
            await self._clean_cache(used)
        self.passes += 1
        # nothing left to do while the store and the members stay as they are: the next passes
        # skip the work above, which over 100,000 segments held the event loop for a second
        done = self.loaded.keys() == self.assigned and not self.loader.failures
        self._settled = seen if done and not (self.pending_handoff or self._waiting_replacement) else None

    def _assign(self) -> set[str]:
        """What this node serves: its tier's replicas of each segment (rendezvous over the tier's
        live historicals) and every broadcast segment."""
        mine = self.tier
        wanted = {sid: n for sid, p in self.placements.items() if (n := p.replicas_in(mine)) > 0}
        peers = [m for m, tier in self.members.items() if tier == mine]
        broadcast = {sid for sid, p in self.placements.items() if p.broadcast}
        return self._assignment.of(wanted, peers) | broadcast

    def owners_of(self, sid: str) -> list[str]:
        """Every historical the rules give the segment to, in every tier."""
        found = self.placements.get(sid)
        if found is None:
            return []
        if found.broadcast:
            return sorted(self.members)
        out = []
        for tier, n in found.tiers.items():
            if n > 0:
                out += owners(sid, [m for m, t in self.members.items() if t == tier], n)
        return out

    async def _load(self, segments: Sequence[DataSegment]) -> None:
        ready: list[DataSegment] = []
        last = time.monotonic()
        try:
            for start in range(0, len(segments), LOAD_CHUNK):
                chunk = segments[start : start + LOAD_CHUNK]
                ready += await self._load_chunk(chunk)
                if ready and (len(ready) >= ANNOUNCE_AT or time.monotonic() - last >= ANNOUNCE_EVERY_S):
                    await self._announce(ready)
                    ready, last = [], time.monotonic()
        finally:
            if ready:  # also when a load raised: what is served is announced
                await self._announce(ready)
            self._update_gauges()

    async def _load_chunk(self, chunk: Sequence[DataSegment]) -> list[DataSegment]:
        """Load `chunk` concurrently and serve what loaded; returns those segments."""
        for s in chunk:  # loaded again before its delayed deletion: keep the files
            pending = self._deleting.pop(s.id, None)
            if pending is not None:
                pending.cancel()
        results = await asyncio.gather(*(self.loader.load(s) for s in chunk), return_exceptions=True)
        ready = []
        for wanted, result in zip(chunk, results, strict=True):
            if isinstance(result, LoadFailed):
                self.metrics.load_failures.inc()
                continue
            if isinstance(result, BaseException):
                raise result
            # announced with its row count, so brokers count its rows without asking
            segment = with_row_facts(wanted, result.facts)
            self.served.add(segment, str(result.path))
            if result.table is not None:  # queries scan the memory-mapped Arrow copy instead
                mapped_source.register(str(result.path), result.table)
            self.loaded[segment.id] = segment
            ready.append(segment)
            self.metrics.loads.labels("cache" if result.reused else "deep_storage").inc()
            if not result.reused:
                self.metrics.bytes_copied.inc(result.bytes)
            self.metrics.load_seconds.observe(result.seconds)
        return ready

    async def _announce(self, ready: list[DataSegment]) -> None:
        await self.announcer.announce(ready)
        log.info("loaded and announced %d segments", len(ready))
        self._update_gauges()  # per announcement, not per chunk: the byte total sums every segment

    async def _replaced(
        self, unused: Sequence[DataSegment], used: dict[str, DataSegment]
    ) -> list[DataSegment]:
        """Unused segments that may go now. One overwritten by a newer version stays announced until
        every segment of that version over its interval is announced somewhere (what Druid's
        coordinator ensures by marking a segment overshadowed only once its replacement is
        loaded): a query in between reads the old rows, never a gap. Deleted ones go at once."""
        self._waiting_replacement = set()
        if not unused:
            return []
        newer = {u.id: [s.id for s in used.values() if _overwrites(s, u)] for u in unused}
        if not any(newer.values()):
            return list(unused)
        try:
            served = await self.cluster.served_by()
        except Exception as e:
            log.warning("cannot read who serves what (%s); keeping %d overwritten segments", e, len(unused))
            self._waiting_replacement = {u.id for u in unused if newer[u.id]}
            return [u for u in unused if not newer[u.id]]
        # without ZooKeeper this node is the cluster, and it has loaded what it could
        announced = set(self.loaded) if served is None else set().union(*served.values()) | set(self.loaded)
        ready = [u for u in unused if all(sid in announced for sid in newer[u.id])]
        self._waiting_replacement = {u.id for u in unused} - {u.id for u in ready}
        return ready

    async def _hand_off(self, used: dict[str, DataSegment]) -> None:
        leaving = [sid for sid in self.loaded if sid in used and sid not in self.assigned]
        self.pending_handoff = set(leaving) | self._waiting_replacement
        if not leaving:
            return
        try:
            served = await self.cluster.served_by()
        except Exception as e:
            log.warning("cannot read who serves what (%s); keeping %d segments for now", e, len(leaving))
            return
        done = []
        for sid in leaving:
            new_owners = [o for o in self.owners_of(sid) if o != self.name]
            if served is None or all(sid in served.get(o, ()) for o in new_owners):
                done.append(self.loaded[sid])
        await self._drop(done, reason="reassigned")
        self.pending_handoff -= {s.id for s in done}

    async def _drop(self, segments: Sequence[DataSegment], *, reason: str) -> None:
        if not segments:
            return
        await self.announcer.unannounce(segments)
        for segment in segments:
            del self.loaded[segment.id]
            if self.drop_delay_s > 0:
                # Druid's dropSegmentDelayMillis: unannounced at once, still answered until the delay
                # ends, so queries reading it finish and a broker that has not yet seen the new
                # owner's announcement gets an answer rather than "missing segment"
                self._deleting[segment.id] = asyncio.create_task(self._delete_later(segment))
            else:
                await self._unserve(segment)
        self.metrics.drops.labels(reason).inc(len(segments))
        log.info("dropped %d segments (%s)", len(segments), reason)
        self._update_gauges()

    async def _delete_later(self, segment: DataSegment) -> None:
        try:
            await asyncio.sleep(self.drop_delay_s)
            if segment.id not in self.loaded:
                await self._unserve(segment)
        finally:
            self._deleting.pop(segment.id, None)

    async def _unserve(self, segment: DataSegment) -> None:
        """Stop answering from the segment, then delete its files (mapped rows that queries still
        running hold stay readable: the kernel frees them when the last reference goes)."""
        self.served.remove(segment)
        mapped_source.unregister(str(self.loader.segment_dir(segment.id) / SEGMENT_FILE))
        await self.loader.delete(segment.id)

    async def _clean_cache(self, used: dict[str, DataSegment]) -> None:
        """Remove cached segments of an earlier run that are no longer used at all."""
        for sid in self.loader.cached_ids():
            if sid not in used:
                await self.loader.delete(sid)

    def _update_gauges(self) -> None:
        self.metrics.segments_loaded.set(len(self.loaded))
        self.metrics.segment_bytes.set(sum(s.size for s in self.loaded.values()))

    async def unannounce_all(self) -> None:
        await self.announcer.unannounce(list(self.loaded.values()))


def _overwrites(newer: DataSegment, older: DataSegment) -> bool:
    return (
        newer.data_source == older.data_source
        and newer.version > older.version
        and newer.interval.overlaps(older.interval)
    )
