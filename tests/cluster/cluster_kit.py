"""Shared pieces of the real-cluster tests: start nodes, ingest, wait, and check answers against DuckDB.

Every answer check runs the same four queries (timeseries, topN, groupBy, scan) through the broker
and compares them with DuckDB over the rows that should be visible, so a test only has to say
which rows those are.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx

from harness.processes import StrataProcess, running
from strata.ingestion.api import ingest
from strata.storage import open_metadata_store


def raw(sql: str, rows: Path) -> list[tuple[Any, ...]]:
    """DuckDB over a JSON-lines file (optionally gzipped); `RAW` in the SQL names it."""
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone='UTC'")
        rel = f"read_json('{rows}', format='newline_delimited')"
        return con.execute(sql.replace("RAW", rel)).fetchall()
    finally:
        con.close()


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


SYNTHETIC_DIMENSIONS: list[Any] = ["k", {"name": "n", "type": "long"}]


def synthetic_spec(data_source: str, rows: Path, granularity: str, *, partitions: dict[str, Any] | None = None,
                   append: bool = False, dimensions: list[Any] = SYNTHETIC_DIMENSIONS) -> dict[str, Any]:  # fmt: skip
    """An ingestion spec over rows `{"ts", "k", "n"}` written by `write_rows` (and whatever other
    `dimensions` the rows carry), no rollup."""
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": data_source,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": dimensions},
                "granularitySpec": {
                    "segmentGranularity": granularity,
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "appendToExisting": append,
                "inputSource": {"type": "local", "baseDir": str(rows.parent), "filter": rows.name},
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": {
                "type": "index_parallel",
                **({"partitionsSpec": partitions} if partitions else {}),
            },
        },
    }


def ingest_wikipedia_by_hour(root: Path, sample: Path, index_spec: Path) -> None:
    """The Wikipedia sample as 24 hourly segments in `root/deep`, published in `root/meta.db`."""
    spec = json.loads(index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(sample.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")


def query(broker: StrataProcess, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=timeout)


WIKIPEDIA_HOURS = 24  # the sample's hourly segments


def served_segments(broker: StrataProcess) -> int:
    """How many wikipedia segments the broker answers for (-1 while it cannot answer)."""
    resp = query(broker, {"queryType": "segmentMetadata", "dataSource": "wikipedia",
                          "intervals": ["2015-09-12/2015-09-13"], "analysisTypes": []})  # fmt: skip
    return len(resp.json()) if resp.status_code == 200 else -1


def wait_for_segments(broker: StrataProcess, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while served_segments(broker) != count:
        assert time.monotonic() < deadline, f"broker never saw {count} segments:\n{broker.log_text()[-3000:]}"
        time.sleep(0.3)


@contextmanager
def wikipedia_cluster(root: Path, zk_hosts: str, sample: Path, spec: Path, *, historical_args: Sequence[str] = (),
                      broker_args: Sequence[str] = ()) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Two historicals (one replica of each segment) and a broker over the sample in hourly
    segments, every process stopped whatever happens; yields {"broker", "historicals", "root",
    "base"} once the broker answers for every segment."""
    ingest_wikipedia_by_hour(root, sample, spec)
    base = f"/strata-e2e-{uuid.uuid4().hex[:8]}"
    common = ["--zk", zk_hosts, "--zk-base", base, "--deep-storage", str(root / "deep"),
              "--metadata", str(root / "meta.db"), "--replicas", "1", "--poll-period", "1", *historical_args]  # fmt: skip
    historicals = [
        StrataProcess(
            "historical", [*common, "--segment-cache", str(root / f"cache{i}")], root / f"hist{i}.log"
        )
        for i in range(2)
    ]
    started: list[StrataProcess] = []
    try:
        for h in historicals:
            started.append(h.start())
        flags = ["--zk", zk_hosts, "--zk-base", base, *broker_args]
        broker = StrataProcess("broker", flags, root / "broker.log").start()
        started.append(broker)
        wait_for_segments(broker, WIKIPEDIA_HOURS)
        yield {"broker": broker, "historicals": historicals, "root": root, "base": base}
    finally:
        for p in reversed(started):
            p.stop()


def wait_until(
    ready: Callable[[], bool], what: str, timeout: float = 60, logs: Sequence[StrataProcess] = ()
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() >= deadline:
            tails = "\n".join(f"--- {p.subcommand} {p.address}\n{p.log_text()[-2500:]}" for p in logs)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{tails}")
        time.sleep(0.3)


def broker_status(broker: StrataProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{broker.url}/status", timeout=10).json())


def used_segment_ids(metadata: Path) -> set[str]:
    store = open_metadata_store(metadata)
    try:
        return {s.id for s in store.used_segments()}
    finally:
        store.close()


def served_ids(node: StrataProcess) -> set[str]:
    """The segments a data node announces, from the full snapshot of its HTTP change feed."""
    resp = httpx.get(
        f"{node.url}/druid-internal/v1/segments", params={"counter": -1, "timeout": 1000}, timeout=10
    )
    resp.raise_for_status()
    return {r["identifier"] for r in resp.json()["requests"] if r["action"] == "load"}


def wait_settled(
    broker: StrataProcess, metadata: Path, nodes: Sequence[StrataProcess], timeout: float = 60
) -> None:
    """Wait until the data nodes serve exactly the used segments and the broker counts that many.

    The count alone could match a stale view (one segment added, another not yet removed), which
    is why answers are then checked with `assert_answers_eventually`.
    """
    want = used_segment_ids(metadata)
    wait_until(lambda: set().union(*(served_ids(n) for n in nodes)) == want,
               f"the data nodes to serve the {len(want)} used segments", timeout, nodes)  # fmt: skip
    wait_until(lambda: broker_status(broker)["segments"] == len(want), f"the broker to see {len(want)} segments",
               timeout, [broker, *nodes])  # fmt: skip


@dataclass(frozen=True)
class Columns:
    """Which columns of the raw rows play time, dimension and long metric."""

    time: str
    dim: str
    metric: str


SYNTHETIC = Columns("ts", "k", "n")
WIKIPEDIA = Columns("time", "channel", "added")


def _check(ok: bool, what: str, got: Any, want: Any) -> list[str]:
    return [] if ok else [f"{what}:\n  broker: {got!r}\n  duckdb: {want!r}"]


def mismatches(
    broker: StrataProcess, data_source: str, interval: str, rows: Path, cols: Columns
) -> list[str]:
    """Run the four query types through the broker; describe every disagreement with DuckDB (empty: all agree)."""
    t, d, m = cols.time, cols.dim, cols.metric
    lo, hi = interval.split("/")
    where = f"WHERE {t}::TIMESTAMP >= '{lo}'::TIMESTAMP AND {t}::TIMESTAMP < '{hi}'::TIMESTAMP"
    out: list[str] = []

    def ask(body: dict[str, Any]) -> Any:
        resp = query(broker, {"dataSource": data_source, "intervals": [interval], **body})
        if resp.status_code != 200:
            out.append(f"{body['queryType']}: HTTP {resp.status_code} {resp.text[:500]}")
            return None
        context = json.loads(resp.headers.get("X-Druid-Response-Context", "{}"))
        if context.get("missingSegments"):
            out.append(f"{body['queryType']}: missing segments {context['missingSegments']}")
        return resp.json()

    ts = ask({"queryType": "timeseries", "granularity": "hour", "context": {"skipEmptyBuckets": True},
              "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "m", "fieldName": m}]})  # fmt: skip
    want_ts = raw(f"SELECT strftime(date_trunc('hour', {t}::TIMESTAMP), '%Y-%m-%dT%H:00:00.000Z'), count(*), "
                  f"sum({m}) FROM RAW {where} GROUP BY 1 ORDER BY 1", rows)  # fmt: skip
    if ts is not None:
        got = [(r["timestamp"], r["result"]["rows"], r["result"]["m"]) for r in ts]
        out += _check(got == [tuple(w) for w in want_ts], "timeseries", got, want_ts)

    groups = dict(
        ((k, (c, s)) for k, c, s in raw(f"SELECT {d}, count(*), sum({m}) FROM RAW {where} GROUP BY 1", rows))
    )
    gb = ask({"queryType": "groupBy", "granularity": "all", "dimensions": [d],
              "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "m", "fieldName": m}]})  # fmt: skip
    if gb is not None:
        got_gb = {r["event"][d]: (r["event"]["rows"], r["event"]["m"]) for r in gb}
        out += _check(got_gb == groups and len(gb) == len(groups), "groupBy", got_gb, groups)

    # minTopNThreshold above the number of values makes topN exact over any segmentation
    top = ask({"queryType": "topN", "granularity": "all", "dimension": d, "metric": "rows", "threshold": 5,
               "aggregations": [{"type": "count", "name": "rows"}], "context": {"minTopNThreshold": 100000}})  # fmt: skip
    if top is not None:
        entries = [(e[d], e["rows"]) for r in top for e in r["result"]]
        want_counts = sorted((c for c, _ in groups.values()), reverse=True)[:5]
        ok = [c for _, c in entries] == want_counts and all(
            groups.get(k, (None,))[0] == c for k, c in entries
        )
        out += _check(ok, "topN", entries, want_counts)

    scan = ask({"queryType": "scan", "columns": [d, m]})
    if scan is not None:
        events = [e for batch in scan for e in batch["events"]]
        got_scan = (len(events), sum(e[m] for e in events))
        ((count, total),) = raw(f"SELECT count(*), coalesce(sum({m}), 0) FROM RAW {where}", rows)
        out += _check(got_scan == (count, total), "scan (rows, sum)", got_scan, (count, total))
    return out


def assert_answers(broker: StrataProcess, data_source: str, interval: str, rows: Path, cols: Columns) -> None:
    problems = mismatches(broker, data_source, interval, rows, cols)
    assert not problems, "\n".join(problems)


def assert_answers_eventually(broker: StrataProcess, data_source: str, interval: str, rows: Path, cols: Columns,
                              timeout: float = 20) -> None:  # fmt: skip
    """After the data nodes settled, the broker's view must converge to the right answers and stay there."""
    deadline = time.monotonic() + timeout
    while (problems := mismatches(broker, data_source, interval, rows, cols)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not problems, "\n".join(problems)
    time.sleep(1.0)
    assert_answers(broker, data_source, interval, rows, cols)


@dataclass
class Nodes:
    broker: StrataProcess
    historicals: list[StrataProcess]

    @property
    def all(self) -> list[StrataProcess]:
        return [*self.historicals, self.broker]


@contextmanager
def cluster(root: Path, zk: str, base: str, *, historicals: int = 2, replicas: int = 1,
            broker_args: Sequence[str] = ()) -> Iterator[Nodes]:  # fmt: skip
    """Historicals over `root`/deep and `root`/meta.db and one broker; all stopped on exit."""
    common = ["--zk", zk, "--zk-base", base, "--deep-storage", str(root / "deep"),
              "--metadata", str(root / "meta.db"), "--replicas", str(replicas), "--poll-period", "1"]  # fmt: skip
    nodes = [StrataProcess("historical", [*common, "--segment-cache", str(root / f"cache{i}")], root / f"hist{i}.log")
             for i in range(historicals)]  # fmt: skip
    broker = StrataProcess("broker", ["--zk", zk, "--zk-base", base, *broker_args], root / "broker.log")
    with running([*nodes, broker]):
        for node in nodes:
            node.start()
        broker.start()
        yield Nodes(broker, nodes)
