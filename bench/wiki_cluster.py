"""A real cluster over Druid's wikipedia sample (24 hourly segments), for the benchmarks that send it
hostile or mixed load (bench.hostile, bench.overload, bench.soak): ZooKeeper, historicals and a
broker as processes, stopped by pid whatever happens."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.cluster_setup import Cluster, cluster, wait_for_segments
from bench.measure import log
from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
from strata.ingestion.api import ingest

WIKIPEDIA_ROWS = 39_244
WIKIPEDIA_SEGMENTS = 24


def ingest_wikipedia(root: Path) -> None:
    """The sample as hourly segments in `root/deep`, published in `root/meta.db`."""
    spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")


@contextmanager
def wikipedia_cluster(
    broker_args: Sequence[str] = (),
    *,
    historicals: int = 2,
    replicas: int = 1,
    more_data: Callable[[Path], int] | None = None,
    keep: Path | None = None,
) -> Iterator[Cluster]:
    """The running cluster; `more_data(root)` may publish more segments first (it returns how many).
    Its directory is removed afterwards unless `keep` names one to use."""
    root = keep or Path(tempfile.mkdtemp(prefix="strata-wiki-"))
    try:
        with cluster(root) as c:
            log("ingesting the wikipedia sample into hourly segments")
            ingest_wikipedia(root)
            segments = WIKIPEDIA_SEGMENTS + (more_data(root) if more_data is not None else 0)
            c.start_data_nodes(historicals, replicas=replicas)
            broker = c.start_broker("--cache", "none", *broker_args)
            wait_for_segments(broker, segments, nodes=c.historicals if replicas == 1 else ())
            yield c
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
