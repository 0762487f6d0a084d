"""The corpus's cluster: Druid's test tables ingested, one real historical and one real broker.

The tables are rebuilt from the data and ingestion specs in `tables/` (and the Wikipedia sample
shipped in the package), each as one segment like Druid's test harness builds them. The broker
follows the historical over HTTP (no ZooKeeper needed); both stop when the context exits. With
lookups, a coordinator holds them and both nodes load them from it, as a Druid cluster's do: the
corpus's are Druid's test lookups (its LookylooModule's maps).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from harness.processes import NO_MERGE_WORKER, StrataProcess, start_all
from strata.data import WIKIPEDIA_SAMPLE
from strata.ingestion.api import ingest
from tests.cluster.cluster_kit import wait_settled, wait_until
from tests.coordinator.kit import coordinator

TABLES = Path(__file__).parent / "tables"
DATA_SOURCES = ("foo", "foo2", "numfoo", "wikipedia")
# Druid's SQL tests' lookups (sql/src/test/.../calcite/util/LookylooModule.java): name -> (map, injective)
LOOKUPS: dict[str, tuple[dict[str, str], bool]] = {
    "lookyloo": ({"a": "xa", "abc": "xabc", "nosuchkey": "mysteryvalue", "6": "x6"}, False),
    "lookyloo-chain": ({"xa": "za", "xabc": "zabc", "x6": "z6"}, False),
    "lookyloo121": ({"": "x", "10.1": "x10.1", "2": "x2", "1": "x1", "def": "xdef", "abc": "xabc"}, True),
}
LOOKUP_API = "/druid/coordinator/v1/lookups"


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
    with serving(root, timeout, lookups=LOOKUPS) as broker:
        yield broker


def configure_lookups(coord: StrataProcess, lookups: Mapping[str, tuple[dict[str, str], bool]]) -> None:
    """The `__default` tier's map lookups, through Druid's configuration API."""
    url = coord.url + LOOKUP_API + "/config"
    tier = {name: {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": pairs, "injective": one}}
            for name, (pairs, one) in lookups.items()}  # fmt: skip
    for body in ({}, {"__default": tier}):
        resp = httpx.post(url, json=body, timeout=30)
        assert resp.status_code == 202, resp.text


def lookups_loaded(coord: StrataProcess, names: Iterable[str], count: int) -> bool:
    """Every one of `count` nodes reported holding each of `names`."""
    nodes = httpx.get(coord.url + LOOKUP_API + "/nodeStatus/__default", timeout=10).json()
    return len(nodes) == count and all(set(names) <= set(n.get("current", {})) for n in nodes.values())


@contextmanager
def serving(root: Path, timeout: float = 60,
            lookups: Mapping[str, tuple[dict[str, str], bool]] | None = None,
            broker_args: Iterable[str] = NO_MERGE_WORKER) -> Iterator[StrataProcess]:  # fmt: skip
    """A historical and a broker over the segments published in `root/deep` and `root/meta.db`;
    yields the broker once it sees every used segment (and both hold `lookups`), stops all on exit.
    The broker merges in its own process unless `broker_args` say otherwise."""
    coord = coordinator(root, str(root / "meta.db")) if lookups else None
    from_coord = ["--coordinator", coord.address, "--lookup-poll-period", "0.5"] if coord else []
    historical = StrataProcess(
        "historical",
        ["--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
         "--segment-cache", str(root / "cache"), "--poll-period", "1", *from_coord],
        root / "historical.log",
    )  # fmt: skip
    # Druid's test tables: a few thousand rows at most
    broker = StrataProcess("broker", ["--discovery", "http", "--nodes", historical.address, *from_coord,
                                      *broker_args], root / "broker.log")  # fmt: skip
    started: list[StrataProcess] = []
    try:
        if coord is not None and lookups:
            started.append(coord.start(timeout=timeout))
            configure_lookups(coord, lookups)
        started += [historical, broker]
        start_all([historical, broker], timeout)
        wait_settled(broker, root / "meta.db", [historical], timeout)
        if coord is not None and lookups:
            wait_until(lambda: lookups_loaded(coord, lookups, 2), "the nodes to load the lookups", timeout,
                       [historical, broker])  # fmt: skip
        yield broker
    finally:
        for process in reversed(started):
            process.stop()
