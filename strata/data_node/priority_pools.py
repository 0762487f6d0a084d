"""Query workers by priority: Druid's context `priority` made a claim on the CPU.

Druid's historicals take queued work highest priority first. On a data node with a few cores a
queue order is not enough: a heavy groupBy already running holds the cores, and a cheap query
behind it waits. So queries of negative priority (what Druid's `hilo` laning calls low: BI
extracts, batch jobs) run on workers of their own whose threads run at a raised nice value, and so
do the DuckDB threads their connections start (a thread inherits its creator's nice value): the
kernel then gives the cores to other queries first, and to low ones whatever is left. Linux only;
elsewhere the workers run at the usual priority.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

from strata.server.thread_priority import LOW_NICE, lower_own_priority


class PriorityPools:
    """The normal query workers, and the low-priority ones (`low_workers`, nice `nice`)."""

    def __init__(self, workers: int = 4, low_workers: int = 2, nice: int = LOW_NICE):
        self.normal = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="query")
        self.low = ThreadPoolExecutor(
            max_workers=low_workers, thread_name_prefix="query-low", initializer=lower_own_priority,
            initargs=(nice,),
        )  # fmt: skip

    def for_priority(self, priority: int) -> Executor:
        return self.low if priority < 0 else self.normal

    def shutdown(self) -> None:
        self.normal.shutdown(wait=False, cancel_futures=True)
        self.low.shutdown(wait=False, cancel_futures=True)
