"""The corpus's cluster: Druid's test tables ingested, one real historical and one real broker.

The tables are rebuilt from the data and ingestion specs in `tables/` (and the Wikipedia sample
shipped in the package), each as one segment like Druid's test harness builds them. The broker
follows the historical over HTTP (no ZooKeeper needed); both stop when the context exits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.processes import StrataProcess
from strata.data import WIKIPEDIA_SAMPLE
from strata.ingestion.api import ingest
from tests.cluster.cluster_kit import wait_settled

TABLES = Path(__file__).parent / "tables"
DATA_SOURCES = ("foo", "foo2", "numfoo", "wikipedia")


def ingest_tables(root: Path) -> None:
    for name in DATA_SOURCES:
        spec = json.loads((TABLES / f"{name}-index.json").read_text())
        base = WIKIPEDIA_SAMPLE.parent if name == "wikipedia" else TABLES
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(base.resolve())
        ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db", engine="local")


@contextmanager
def corpus_cluster(root: Path, timeout: float = 60) -> Iterator[StrataProcess]:
    """Yields the broker once it sees every segment of the test tables."""
    ingest_tables(root)
    with serving(root, timeout) as broker:
        yield broker


@contextmanager
def serving(root: Path, timeout: float = 60) -> Iterator[StrataProcess]:
    """A historical and a broker over the segments published in `root/deep` and `root/meta.db`;
    yields the broker once it sees every used segment, stops both on exit."""
    historical = StrataProcess(
        "historical",
        ["--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
         "--segment-cache", str(root / "cache"), "--poll-period", "1"],
        root / "historical.log",
    )  # fmt: skip
    broker = StrataProcess(
        "broker", ["--discovery", "http", "--nodes", historical.address], root / "broker.log"
    )
    started: list[StrataProcess] = []
    try:
        started.append(historical.start(timeout=timeout))
        started.append(broker.start(timeout=timeout))
        wait_settled(broker, root / "meta.db", [historical], timeout)
        yield broker
    finally:
        for process in reversed(started):
            process.stop()
