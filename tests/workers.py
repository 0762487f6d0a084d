"""How `pytest -n 2` (scripts/test.sh) shares the suite between its two workers.

A unit of work is a whole test module, so a module's cluster starts once; the modules that use
the Spark session form one unit, so one JVM runs, and so do the network-namespace labs, so two
never pick a subnet at the same moment. The units that take minutes are handed out first, so no
worker is left alone with one of them at the end. Every worker has its own session fixtures
(ZooKeeper, memcached, the wikipedia cluster), free ports and its own temporary directory.

The order is set where each worker collects (`order_items`), not in the scheduler: xdist names a
test to a worker by its index in that worker's collection, so both must hold the same order.
"""

from __future__ import annotations

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

# path prefixes -> the unit their modules share
SHARED_UNITS = {
    "tests/spark/": "spark",
    "tests/spark_ingest/": "spark",
    "tests/deep_storage/test_s3_spark": "spark",
    "tests/multihost/": "multihost",
}
# units of a half minute and more, longest first: seconds summed per unit from `--junitxml` of a
# whole `-n 2` run (`python -m tests.unit_times junit.xml`; a run of 19 min 50 s at a load of 2-6,
# then less where this stop sped a unit up); the slow units first, so neither worker is left
# alone with one at the end, and the half-minute ones after them, so none comes last
# (this stop: docs, multihost, the CLI-on-a-cluster Spark test and quickstart re-estimated from their
# CPU before and after, measured side by side at a load of 20-25; a quiet whole run will correct them)
SLOW_UNITS = (
    "spark",  # 247 s, less about 10 s (the CLI-on-a-cluster test's JVMs at the JIT's first tier)
    "tests/differential/test_differential.py",  # 221 s, less the oracle's parses of the sample
    "tests/docs/test_readme_commands.py",  # 237 s, about 20-30 % less (one Spark JVM, 1 s polls)
    "multihost",  # 178 s, about 25 % less (stores started together, first-tier JIT)
    "tests/coordinator/test_lifecycle_differential.py",  # 77 s
    "tests/sql_corpus/test_druid_qa.py",  # 104 s, less an ingestion of every dataset, two clusters at once
    "tests/sql_api/test_sql_api.py",  # 55 s
    "tests/differential/test_sql_reference.py",  # 55 s, less the oracle's parses
    "tests/cluster/test_broker_failures.py",  # 50 s
    "tests/sql_api/test_query_bounds.py",  # 49 s
    "tests/cluster/test_cache_cluster.py",  # 46 s
    "tests/console/test_console.py",  # 45 s
    "tests/sql_ingest/test_sql_ingest.py",  # 38 s
    "tests/coordinator/test_spark_tasks.py",  # 36 s
    "tests/realtime/test_push.py",  # 34 s
    "tests/cluster/test_broker_segmentation.py",  # 34 s
    "tests/differential/test_mv_differential.py",  # 32 s
    "tests/lifecycle/test_quickstart_lifecycle.py",  # 31 s
    "tests/deep_storage/test_s3_faults.py",  # 53 s, less 20 s of fault proxies waiting to stop
)


def unit_of(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return next((unit for prefix, unit in SHARED_UNITS.items() if module.startswith(prefix)), module)


def rank(nodeid: str) -> int:
    """The slow units by their place in SLOW_UNITS, then every other unit in collection order."""
    unit = unit_of(nodeid)
    return SLOW_UNITS.index(unit) if unit in SLOW_UNITS else len(SLOW_UNITS)


def order_items(items: list[pytest.Item]) -> None:
    """The slow units first; stable, so a module's tests keep their order and stay together."""
    items.sort(key=lambda item: rank(item.nodeid))


class ModuleUnits(LoadScopeScheduling):
    """xdist's scope scheduling with our units, handed out in the workers' collection order."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # the order is the collection's: slow units first

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
