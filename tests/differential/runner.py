"""Run generated queries against real Strata nodes and compare with the oracle.

The wikipedia sample is ingested three ways (one DAY segment; HOUR segments; HOUR segments of at
most 1,000 rows, several partitions each); one historical serves them and every query goes to a
broker without cache, one with the LRU cache (asked twice: cold, then its whole-answer cache; then
twice more without whole answers: its per-segment cache, the second time on its warm path), and
one on memcached and one hybrid, both without whole answers (asked three times: cold, then their
per-segment caches, twice: the warm path's first answer and its remembered one). topN is compared
as Druid allows: the ranked values must be the true top values, each returned entry a true
group, ties at the cut in any order.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.processes import NO_MERGE_WORKER, StrataProcess, running, start_all
from tests.differential.fanout import Chain, Fanout
from tests.differential.generator import generate
from tests.differential.oracle import Oracle, Spec
from tests.historical_query.wiki_http import create_raw

SEGMENTATIONS: dict[str, dict[str, Any]] = {
    "diff_day": {"segmentGranularity": "day"},
    "diff_hour": {"segmentGranularity": "hour"},
    "diff_part": {"segmentGranularity": "hour", "maxRowsPerSegment": 1000},
}


def ingest_all(root: Path, sample: Path, index_spec: Path,
               names: Sequence[str] = tuple(SEGMENTATIONS)) -> dict[str, list[tuple[int, int]]]:  # fmt: skip
    """Ingest each segmentation named (every one unless told); returns each datasource's segments
    as (minTime, maxTime)."""
    from strata.ingestion.api import ingest

    ranges: dict[str, list[tuple[int, int]]] = {}
    for name in names:
        how = SEGMENTATIONS[name]
        spec = json.loads(index_spec.read_text())
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(sample.parent)
        spec["spec"]["dataSchema"]["dataSource"] = name
        spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = how["segmentGranularity"]
        if "maxRowsPerSegment" in how:
            spec["spec"]["tuningConfig"] = {"type": "index_parallel", "partitionsSpec": {
                "type": "dynamic", "maxRowsPerSegment": how["maxRowsPerSegment"]}}  # fmt: skip
        ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")
        ranges[name] = []
        for path in sorted((root / "deep" / name).rglob("*.parquet")):
            times = pq.read_table(path, columns=["__time"]).column("__time").cast("int64")
            bounds = pc.min_max(times).as_py()
            ranges[name].append((bounds["min"], bounds["max"]))
    return ranges


@contextmanager
def nodes(root: Path, memcached: str | None,
          names: Sequence[str] = tuple(SEGMENTATIONS)) -> Iterator[dict[str, StrataProcess]]:  # fmt: skip
    """The historical and brokers over what `ingest_all` ingested under `root` (the segmentations
    `names`), once every broker sees each of them."""
    historical = StrataProcess("historical", ["--deep-storage", str(root / "deep"), "--metadata",
                                              str(root / "meta.db"), "--segment-cache", str(root / "sc")],
                               root / "historical.log")  # fmt: skip
    # no merge worker: the wikipedia sample has 39,244 rows, tests.differential.mv_data's 3,000
    follow = ["--discovery", "http", "--nodes", historical.address, *NO_MERGE_WORKER]
    brokers = {
        "plain": StrataProcess("broker", follow, root / "plain.log"),
        "lru": StrataProcess("broker", [*follow, "--cache", "lru"], root / "lru.log"),
    }
    if memcached:
        # no whole answers: their second and third askings are answered from the per-segment cache
        for kind in ("memcached", "hybrid"):
            brokers[kind] = StrataProcess("broker", [*follow, "--cache", kind, "--memcached", memcached,
                                                     "--result-cache", "off"], root / f"{kind}.log")  # fmt: skip
    with running([historical, *brokers.values()]):
        start_all([historical, *brokers.values()])
        deadline = time.monotonic() + 90
        for b in brokers.values():
            while set(names) - set(httpx.get(b.url + "/druid/v2/datasources", timeout=5).json()):
                assert time.monotonic() < deadline, b.log_text()[-2000:]
                time.sleep(0.3)
        yield {"historical": historical, **brokers}


def raw_connection(sample: Path) -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect()
    conn.execute("SET TimeZone='UTC'")
    create_raw(conn, sample)
    return conn


@dataclass
class Outcome:
    ran: Counter[str] = field(default_factory=Counter)
    differed: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = sorted(self.ran)
        lines = [f"{k:13} ran {self.ran[k]:6,}  differed {self.differed[k]:5,}" for k in kinds]
        total_ran, total_diff = sum(self.ran.values()), sum(self.differed.values())
        return "\n".join([*lines, f"{'total':13} ran {total_ran:6,}  differed {total_diff:5,}"])


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _canon(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def agrees(spec: Spec, want: Any, got: Any) -> bool:
    if isinstance(want, dict) and "error" in want:  # an error answer: its status and Druid error code
        return got.get("status") == want["status"] and _error_code(got.get("body")) == want["error"]
    if isinstance(got, dict) and "status" in got:
        return False
    if spec.kind == "groupBy":
        return _close(_canon(want), _canon(got))
    if spec.kind == "scan":
        events = [(e[0], e[1], e[2]) for batch in got for e in batch["events"]]
        return sorted(events, key=repr) == sorted(want, key=repr)
    if spec.kind == "topN" and spec.order is not None:  # ranked by the dimension: exact
        return _close(want, got)
    if spec.kind == "topN":
        if not want:
            return got == []
        if len(got) != 1 or got[0]["timestamp"] != want[0]["timestamp"]:
            return False
        entries = want[0]["result"]
        ranked = sorted((e[spec.metric] for e in entries), reverse=True)[: spec.threshold]
        returned = got[0]["result"]
        truth = [json.dumps(e, sort_keys=True) for e in entries]
        return [e[spec.metric] for e in returned] == ranked and all(
            any(_close(json.loads(t), e) for t in truth) for e in returned
        )
    return _close(want, got)


def _error_code(body: Any) -> Any:
    try:
        return json.loads(body).get("error")
    except (TypeError, ValueError, AttributeError):
        return None


def run(n: int, seed: int, targets: dict[str, StrataProcess], conn: duckdb.DuckDBPyConnection,
        ranges: dict[str, list[tuple[int, int]]], *, show: int = 5,
        generate_query: Callable[[random.Random, str], Spec] = generate) -> Outcome:  # fmt: skip
    """`n` generated queries (`generate_query`), each against every datasource through every target."""
    rnd = random.Random(seed)
    outcome = Outcome()
    oracles = {ds: Oracle(conn, segs) for ds, segs in ranges.items()}
    with Fanout(_chains(targets), contexts=SEGMENT_LEVEL) as fanout:
        for _ in range(n):
            template = generate_query(rnd, "")
            for ds, oracle in oracles.items():
                spec = generate_for(template, ds)
                want = oracle.answer(spec)
                for label, resp in fanout.post("/druid/v2/", spec.json):
                    outcome.ran[spec.kind] += 1
                    got = (
                        resp.json()
                        if resp.status_code == 200
                        else {"status": resp.status_code, "body": resp.text}
                    )
                    if not agrees(spec, want, got):
                        outcome.differed[spec.kind] += 1
                        if len(outcome.failures) < show:
                            outcome.failures.append(
                                f"[{label} {ds}] {json.dumps(spec.json)}\n  expected {json.dumps(want)[:1500]}\n"
                                f"  got      {json.dumps(got)[:1500]}"
                            )
    return outcome


def generate_for(template: Spec, data_source: str) -> Spec:
    spec = Spec(**{**template.__dict__, "json": {**template.json, "dataSource": data_source}})
    return spec


# the LRU broker asked again without the whole-answer cache: its per-segment partials, the first time
# through the full path, the second through its warm path (broker_service.segment_path)
NO_WHOLE_ANSWER = {"useResultLevelCache": False, "populateResultLevelCache": False}
SEGMENT_LEVEL = {"lru-segments": NO_WHOLE_ANSWER, "lru-segments-warm": NO_WHOLE_ANSWER}


def _chains(targets: dict[str, StrataProcess]) -> list[Chain]:
    """Every target; the cached brokers asked in a row (cold, then from the cache: the LRU broker's
    whole answers, the memcached and hybrid brokers' per-segment partials, twice), the LRU broker
    twice more from its per-segment partials."""
    lru = [("lru", "lru"), ("lru-warm", "lru"), ("lru-segments", "lru"), ("lru-segments-warm", "lru")]
    chains = [[("historical", "historical")], [("plain", "plain")], lru,
              [("memcached", "memcached"), ("memcached-warm", "memcached"), ("memcached-again", "memcached")],
              [("hybrid", "hybrid"), ("hybrid-warm", "hybrid"), ("hybrid-again", "hybrid")]]  # fmt: skip
    return [
        [(label, targets[key]) for label, key in chain if key in targets]
        for chain in chains
        if chain[0][1] in targets
    ]
