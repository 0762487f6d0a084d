"""The coordinator-overlord as one object: the metadata store, the task queue, the duty loop, the
lead and the ZooKeeper announcement; the HTTP layer (strata.coordinator.app) reads and drives it.

Only one coordinator runs the tasks of a database: at start it takes the lead row
(`strata_coordinator_lead`), refusing to start while another address heartbeats it, and keeps it
by a heartbeat duty. A coordinator that finds the lead taken from it stops its task queue and
exits, leaving the tasks to the holder.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from strata.coordinator.announce import NodeAnnouncer
from strata.coordinator.auto_compaction import compact_segments
from strata.coordinator.duties import Duty, DutyLoop
from strata.coordinator.lookup_reports import LookupReports
from strata.coordinator.rule_duty import RuleRunStats, run_rules
from strata.coordinator.task_logs import TaskLogs
from strata.coordinator.task_processes import ProcessLauncher, RunnerSettings
from strata.coordinator.task_queue import TaskQueue
from strata.storage.config_store import ConfigStore
from strata.storage.metadata_store import MetadataStore
from strata.storage.rule_store import RuleStore
from strata.storage.task_store import TaskStore, now_iso

log = logging.getLogger("strata.coordinator")

LEAD_TTL_S = 15.0
HEARTBEAT_S = 3.0


class LeadTaken(RuntimeError):
    """Another coordinator runs this database's tasks."""


@dataclass(frozen=True)
class CoordinatorSettings:
    host: str  # advertised host
    port: int
    runner: RunnerSettings
    task_log_dir: str
    zk: str | None = None
    zk_base: str = "/druid"
    period_s: float = 60.0  # Druid's druid.coordinator.period: the rule duty
    indexing_period_s: float = 1800.0  # druid.coordinator.period.indexingPeriod: auto-compaction

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class Coordinator:
    def __init__(self, settings: CoordinatorSettings, metadata: MetadataStore) -> None:
        self.settings = settings
        self.metadata = metadata
        self.tasks = TaskStore(metadata)
        self.rules = RuleStore(metadata)
        self.logs = TaskLogs(settings.task_log_dir)
        location = {"host": settings.host, "port": settings.port, "tlsPort": -1}
        self.queue = TaskQueue(self.tasks, ProcessLauncher(settings.runner, self.logs), self.logs, location)
        self.duties = DutyLoop(self)
        self.duties.add(Duty("lead-heartbeat", HEARTBEAT_S, _heartbeat))
        self.rule_stats = RuleRunStats()
        self.duties.add(Duty("run-rules", settings.period_s, run_rules))
        self.configs = ConfigStore(metadata)
        self.lookup_reports = LookupReports()
        self.compaction_status: dict[
            str, dict[str, Any]
        ] = {}  # the last auto-compaction run's, per data source
        self.duties.add(Duty("compact-segments", settings.indexing_period_s, compact_segments))
        self.announcer: NodeAnnouncer | None = None
        self.started = time.time()
        self.start_time = now_iso()
        self.leading = False

    def claim_lead(self) -> None:
        """Take the lead or raise `LeadTaken` (blocking: before serving)."""
        other = self.tasks.claim_lead(self.settings.address, _now_ms(), int(LEAD_TTL_S * 1000))
        if other is not None:
            raise LeadTaken(f"another coordinator ({other}) runs the tasks of this metadata store; "
                            "stop it first, or wait for its lead to lapse")  # fmt: skip
        self.leading = True

    async def start(self) -> None:
        await self.queue.start()
        await self.duties.start()
        s = self.settings
        if s.zk:
            self.announcer = NodeAnnouncer(s.zk, s.zk_base, s.host, s.port, self.start_time)
            try:
                await self.announcer.start()
            except Exception as e:  # tasks and the API go on; brokers can be told --coordinator
                log.warning("cannot announce in ZooKeeper %s: %s", s.zk, e)

    async def stop(self) -> None:
        if self.announcer is not None:
            await self.announcer.stop()
        await self.duties.stop()
        await self.queue.stop()
        if self.leading:
            try:
                self.tasks.release_lead(self.settings.address)
            except Exception as e:
                log.warning("cannot release the lead: %s", e)
        self.metadata.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _heartbeat(coordinator: Coordinator) -> None:
    other = coordinator.tasks.claim_lead(coordinator.settings.address, _now_ms(), int(LEAD_TTL_S * 1000))
    if other is not None and coordinator.leading:
        coordinator.leading = False
        log.error("coordinator %s took the lead of this metadata store: stopping", other)
        os.kill(os.getpid(), signal.SIGTERM)
