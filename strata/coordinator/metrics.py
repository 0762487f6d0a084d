"""The overlord's task metrics under Druid's names (its Prometheus emitter's): `druid_task_run_time`
{dataSource, taskType, taskStatus} in seconds when a task completes, `druid_task_success_count` and
`druid_task_failed_count` {dataSource}, and the gauges `druid_task_{running,pending,waiting}_count`
{dataSource} read at scrape time from the queue's last pass."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from strata.server.druid_metrics import DRUID_BUCKETS, add_process_metrics
from strata.storage.task_store import TaskRow

_GAUGES = {"RUNNING": "running", "PENDING": "pending", "WAITING": "waiting"}


class TaskMetrics(Collector):
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r, ds = self.registry, ["dataSource"]
        labels = ["dataSource", "taskType", "taskStatus"]
        self.run_time = Histogram("druid_task_run_time", "Seconds taken to run a task.", labels,
                                  buckets=DRUID_BUCKETS, registry=r)  # fmt: skip
        self.success = Counter("druid_task_success_count", "Number of successful tasks.", ds, registry=r)
        self.failed = Counter("druid_task_failed_count", "Number of failed tasks.", ds, registry=r)
        self._active: Tally[tuple[str, str]] = Tally()
        r.register(self)
        add_process_metrics(r)

    def completed(self, row: TaskRow) -> None:
        state = str(row.status.get("status", "FAILED"))
        seconds = max(0, int(row.status.get("duration") or 0)) / 1000
        self.run_time.labels(row.datasource, row.type, state).observe(seconds)
        (self.success if state == "SUCCESS" else self.failed).labels(row.datasource).inc()

    def active(self, rows: Iterable[TaskRow]) -> None:
        """The active tasks of the queue's latest pass."""
        self._active = Tally((r.runner_state, r.datasource) for r in rows)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for state, name in _GAUGES.items():
            family = GaugeMetricFamily(
                f"druid_task_{name}_count", f"Number of {name} tasks.", labels=["dataSource"]
            )
            for (runner, ds), count in sorted(self._active.items()):
                if runner == state:
                    family.add_metric([ds], count)
            yield family
