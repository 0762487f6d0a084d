"""Broker throughput beside its framework's floor, driven by wrk (issues 31 and 40).

    python -m bench.throughput [--rows 1000000] [--segments 100] [--seconds 5] [--repeat 3]
                               [--connections 16] [--sweep 1,4,16,64] [--profile DIR]
                               [--cache lru,hybrid,memcached] [--only 'per-segment hits']

One cluster (ZooKeeper, two historicals, one `--cache lru` broker process) and, beside it, a bare
Starlette app on the same uvicorn set-up (bench.throughput_floor) answering the broker's own
response bytes and headers for each query. wrk (one thread, `--connections` keep-alive
connections) drives, back to back in each round: the floor, whole-answer cache hits, per-segment
cache hits (the first 24 segments and all of them) and cold queries (no cache; 24 segments),
each right after a floor run over the same answer. A timeseries by hour, the dashboard's shape.
`--cache` names more broker processes, one per cache kind (`hybrid` and `memcached` each on a
memcached of their own), measured on per-segment hits only (the other levels do not read it).
Each figure is the median of `--repeat` rounds; each ratio is taken against the floor run just
before it (seconds apart, so a neighbour's load on a shared machine hits both alike) and the
median of those is reported against the targets: whole-answer hits >= 0.7x the
floor, per-segment hits over 100 segments >= 0.7x (issue 40; 0.4x in issue 31). Beside each
figure: wrk's CPU and the server's, in cores, and the server's CPU per query (`cpu_ratio`: the
floor's CPU per query over the broker's, the same comparison blind to time other processes take,
the figure to judge by on a shared machine). A sweep over connection
counts gives q/s and latency against connections. `--profile DIR` also records the broker with
py-spy under load (collapsed stacks per scenario) and prints where its time goes. Every answer
is checked equal across the cache levels first. Nothing is asserted; a JSON line ends the output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.cache import COLD, SEGMENT_LEVEL, first_difference
from bench.cluster_setup import AGGS, HOUR_MS, START_MS, Cluster, cluster, wait_for_segments, write_dataset
from bench.measure import cpu_seconds, log
from bench.wrk import WrkResult, run_wrk
from harness.processes import StrataProcess
from strata.cli.local_servers import free_port
from timeline import format_instant

REPO = Path(__file__).resolve().parent.parent
TARGETS = {"whole-answer hits": 0.7, "per-segment hits": 0.7}
CACHE_KINDS = ("lru", "hybrid", "memcached")
_SKIPPED_HEADERS = {"content-length", "date", "server", "content-type"}


@dataclass(frozen=True)
class Scenario:
    name: str  # e.g. "per-segment hits, 100 segments"
    level: str  # floor | whole-answer hits | per-segment hits | cold
    segments: int
    body: bytes  # the request wrk sends
    cache: str = "lru"  # the kind of the broker that answers it


def timeseries(data_source: str, hours: int, context: dict[str, Any]) -> bytes:
    interval = f"{format_instant(START_MS)}/{format_instant(START_MS + hours * HOUR_MS)}"
    query = {"queryType": "timeseries", "dataSource": data_source, "intervals": [interval],
             "granularity": "hour", "aggregations": AGGS, "context": context}  # fmt: skip
    return orjson.dumps(query)


def scenarios(data_source: str, segments: int, caches: tuple[str, ...] = ("lru",)) -> list[Scenario]:
    """The LRU broker at every level; a broker of another cache kind on per-segment hits."""
    out = []
    for n in sorted({min(24, segments), segments}):
        out += [
            Scenario(f"floor, {n} segments' answer", "floor", n, timeseries(data_source, n, {})),
            Scenario(f"whole-answer hits, {n} segments", "whole-answer hits", n,
                     timeseries(data_source, n, {})),
            Scenario(f"per-segment hits, {n} segments", "per-segment hits", n,
                     timeseries(data_source, n, SEGMENT_LEVEL)),
        ]  # fmt: skip
        out += [
            Scenario(f"per-segment hits, {n} segments, {kind}", "per-segment hits", n,
                     timeseries(data_source, n, SEGMENT_LEVEL), kind)
            for kind in caches if kind != "lru"
        ]  # fmt: skip
    n = min(24, segments)
    out.append(Scenario(f"cold, {n} segments", "cold", n, timeseries(data_source, n, COLD)))
    return out


def record_answers(urls: dict[str, str], chosen: list[Scenario]) -> list[dict[str, Any]]:
    """Each query's answer from its broker (three times: the first populates the caches, the
    others take the warm paths), checked equal across cache levels and kinds (a per-segment hit's
    bytes equal to the LRU broker's), as the floor's answers: request body -> bytes and headers."""
    answers: list[dict[str, Any]] = []
    by_segments: dict[int, Any] = {}
    per_segment: dict[int, bytes] = {}
    with httpx.Client(timeout=120) as client:
        for s in chosen:
            for _ in range(3):
                resp = client.post(
                    urls[s.cache] + "/druid/v2/", content=s.body, headers={"Content-Type": "application/json"}
                )
                if resp.status_code != 200:
                    raise RuntimeError(f"{s.name}: HTTP {resp.status_code}: {resp.text[:500]}")
            decoded = resp.json()
            known = by_segments.setdefault(s.segments, decoded)
            difference = first_difference(known, decoded)
            if difference:
                raise RuntimeError(f"{s.name}: the answer differs from another cache level's at {difference}")
            same = per_segment.setdefault(s.segments, resp.content) == resp.content
            if s.level == "per-segment hits" and not same:
                raise RuntimeError(f"{s.name}: not the bytes of the other cache kinds' per-segment hits")
            if s.cache != "lru":
                continue  # the floor answers each request body once: the LRU broker's bytes
            headers = {k: v for k, v in resp.headers.items() if k.lower() not in _SKIPPED_HEADERS}
            answers.append(
                {"request": s.body.decode(), "response": resp.content.decode(), "headers": headers}
            )
    return answers


class Floor:
    """The bare Starlette app as its own process, stopped by pid."""

    def __init__(self, root: Path, answers: list[dict[str, Any]]):
        path = root / "floor-answers.json"
        path.write_text(json.dumps(answers))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable,
            "-m",
            "bench.throughput_floor",
            "--port",
            str(self.port),
            "--answers",
            str(path),
        ]
        self._log = (root / "floor.log").open("ab")
        self.proc = subprocess.Popen(argv, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/status/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the floor app did not start: {(root / 'floor.log').read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def measure(url: str, pid: int, body: bytes, connections: int, seconds: float) -> dict[str, Any]:
    """One wrk run, with the server's CPU in cores beside wrk's."""
    cpu, began = cpu_seconds(pid), time.monotonic()
    result: WrkResult = run_wrk(url + "/druid/v2/", body, connections=connections, seconds=seconds)
    used = cpu_seconds(pid) - cpu
    server_cpu = used / (time.monotonic() - began)
    per_query = 1e6 * used / result.requests if result.requests else 0.0
    return {**result.summary(), "server_cpu": round(server_cpu, 2), "cpu_us_per_query": round(per_query)}


def _median_row(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("qps", "p50_ms", "p99_ms", "wrk_cpu", "server_cpu", "cpu_us_per_query", "ratio", "cpu_ratio")
    out: dict[str, Any] = {"scenario": name}
    for k in keys:
        values = [r[k] for r in rows if k in r]
        if values:
            out[k] = round(statistics.median(values), 2)
    out["qps_rounds"] = " ".join(str(r["qps"]) for r in rows)
    out["errors"] = sum(r["errors"] for r in rows)
    return out


def rounds(
    brokers: dict[str, StrataProcess],
    floor: Floor,
    chosen: list[Scenario],
    repeat: int,
    connections: int,
    seconds: float,
) -> list[dict[str, Any]]:
    """Each broker scenario right after a floor run over the same answer: the ratio compares runs
    seconds apart, so a neighbour's load on this shared machine hits both alike."""
    floors = {s.segments: s for s in chosen if s.level == "floor"}
    per: dict[str, list[dict[str, Any]]] = {s.name: [] for s in chosen}

    def show(r: int, name: str, row: dict[str, Any]) -> None:
        log(f"  round {r + 1} {name:44s} {row['qps']:6d} q/s  p50 {row['p50_ms']:6.2f}  "
            f"p99 {row['p99_ms']:6.2f} ms  wrk {row['wrk_cpu']:.2f}  server {row['server_cpu']:.2f} cores "
            f"{row['cpu_us_per_query']:5d} µs/q" + _ratios(row))  # fmt: skip

    for r in range(repeat):
        for s in chosen:
            if s.level == "floor":
                continue
            base = floors[s.segments]
            row = measure(floor.url, floor.pid, base.body, connections, seconds)
            per[base.name].append(row)
            show(r, base.name, row)
            broker = brokers[s.cache]
            mine = measure(broker.url, broker.pid, s.body, connections, seconds)
            mine["ratio"] = round(mine["qps"] / row["qps"], 3) if row["qps"] else 0.0
            # the floor's CPU per query over the broker's: the same ratio, blind to stolen time
            if mine["cpu_us_per_query"]:
                mine["cpu_ratio"] = round(row["cpu_us_per_query"] / mine["cpu_us_per_query"], 3)
            per[s.name].append(mine)
            show(r, s.name, mine)
    return [{**_median_row(s.name, per[s.name]), "level": s.level, "segments": s.segments} for s in chosen]


def _ratios(row: dict[str, Any]) -> str:
    """The q/s ratio to the floor and the CPU ratio (the floor's CPU per query over the broker's)."""
    if "ratio" not in row:
        return ""
    return f"  {row['ratio']:.2f}x floor, {row.get('cpu_ratio') or 0:.2f}x by CPU"


def sweep(
    brokers: dict[str, StrataProcess], floor: Floor, chosen: list[Scenario], counts: list[int], seconds: float
) -> list[dict[str, Any]]:
    rows = []
    for n in counts:
        for s in chosen:
            broker = brokers[s.cache]
            url, pid = (floor.url, floor.pid) if s.level == "floor" else (broker.url, broker.pid)
            row = {"scenario": s.level, "connections": n, **measure(url, pid, s.body, n, seconds)}
            log(f"  {n:3d} connections {s.level:18s} {row['qps']:6d} q/s  p50 {row['p50_ms']:6.2f}  "
                f"p99 {row['p99_ms']:6.2f} ms  wrk {row['wrk_cpu']:.2f} cores")  # fmt: skip
            rows.append(row)
    return rows


def profile(
    brokers: dict[str, StrataProcess], chosen: list[Scenario], seconds: float, out: Path
) -> dict[str, list[str]]:
    """py-spy's collapsed stacks of the broker under wrk load, per scenario, and the top frames."""
    from bench.profile_stacks import py_spy, top_frames

    out.mkdir(parents=True, exist_ok=True)
    tops: dict[str, list[str]] = {}
    for s in chosen:
        broker = brokers[s.cache]
        path = out / (s.name.replace(",", "").replace(" ", "_") + ".txt")
        argv = [py_spy(), "record", "-p", str(broker.pid), "-d", f"{seconds:.0f}", "-r", "250", "-f", "raw",
                "-o", str(path), "--nonblocking"]  # fmt: skip
        spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            run_wrk(broker.url + "/druid/v2/", s.body, connections=16, seconds=seconds + 1)
        finally:
            spy.wait(seconds + 30)
        tops[s.name] = top_frames(path.read_text(), 15)
        log(f"  {s.name}: {path}")
        for line in tops[s.name]:
            log(f"    {line}")
    return tops


def start_broker(c: Cluster, kind: str) -> StrataProcess:
    """A broker of that cache kind, a memcached of its own behind a remote kind."""
    args = ["--cache", kind, "--cache-size", str(1024**3)]
    if kind != "lru":
        args += ["--memcached", c.start_memcached()]
    return c.start_broker(*args)


def targets(table: list[dict[str, Any]], segments: int) -> list[dict[str, Any]]:
    out = []
    for row in table:
        target = TARGETS.get(row["level"])
        wanted = row["level"] == "whole-answer hits" or row["segments"] == segments
        if target is not None and wanted:
            out.append({"scenario": row["scenario"], "ratio_to_floor": row["ratio"], "target": target,
                        "met": row["ratio"] >= target, "cpu_ratio": row.get("cpu_ratio")})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each wrk run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--sweep", default="1,4,16,64", help="connection counts for the plot ('' to skip)")
    ap.add_argument("--profile", type=Path, default=None, help="record the broker with py-spy into DIR")
    ap.add_argument("--only", default="", help="comma-separated levels, e.g. 'floor,per-segment hits'")
    ap.add_argument("--cache", default="lru", help=f"broker cache kinds, of {','.join(CACHE_KINDS)}; the LRU "
                    "broker always runs (whole-answer hits and cold queries are its)")  # fmt: skip
    args = ap.parse_args(argv)
    caches = ("lru", *(k for k in dict.fromkeys(args.cache.split(",")) if k and k != "lru"))
    if not set(caches) <= set(CACHE_KINDS):
        ap.error(f"--cache: kinds of {', '.join(CACHE_KINDS)}, got {args.cache!r}")

    report: dict[str, Any] = {"rows": args.rows, "segments": args.segments, "connections": args.connections,
                              "seconds_per_run": args.seconds, "repeat": args.repeat,
                              "caches": caches}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="strata-throughput-") as tmp, cluster(Path(tmp)) as c:
        began = time.monotonic()
        ds = write_dataset(c.root, "bench", args.rows, args.segments)
        c.start_data_nodes(2)
        brokers = {kind: start_broker(c, kind) for kind in caches}
        for broker in brokers.values():
            wait_for_segments(broker, args.segments, nodes=c.historicals)
        chosen = scenarios(ds.name, args.segments, caches)
        if args.only:
            levels = {"floor", *args.only.split(",")}
            chosen = [s for s in chosen if s.level in levels]
        answers = record_answers({kind: b.url for kind, b in brokers.items()}, chosen)
        floor = Floor(c.root, answers)
        log(f"{args.rows:,} rows in {args.segments} segments; ZooKeeper, 2 historicals, "
            f"{len(brokers)} broker(s) ({', '.join(caches)}), the floor "
            f"app up after {time.monotonic() - began:.1f}s; wrk 1 thread, {args.connections} connections, "
            f"{args.seconds:g}s a run, {args.repeat} rounds")  # fmt: skip
        stop: Callable[[], None] = floor.stop
        try:
            table = rounds(brokers, floor, chosen, args.repeat, args.connections, args.seconds)
            report["results"] = table
            report["targets"] = targets(table, args.segments)
            counts = [int(n) for n in args.sweep.split(",") if n]
            if counts:
                log("sweep over connections:")
                swept = [s for s in chosen if s.segments == args.segments and s.level != "cold"]
                report["sweep"] = sweep(brokers, floor, swept, counts, args.seconds)
            if args.profile is not None:
                log("py-spy on the broker under load:")
                broker_side = [s for s in chosen if s.level != "floor"]
                report["profile"] = profile(brokers, broker_side, args.seconds, args.profile)
        finally:
            stop()
    log("medians of the rounds (ratio: broker q/s over the floor's in the same round):")
    for row in report["results"]:
        log(f"  {row['scenario']:44s} {row['qps']:8.0f} q/s  p50 {row['p50_ms']:6.2f}  "
            f"p99 {row['p99_ms']:6.2f} ms  wrk {row['wrk_cpu']:.2f}  server {row['server_cpu']:.2f} cores "
            f"{row['cpu_us_per_query']:5.0f} µs/q" + _ratios(row))  # fmt: skip
    for t in report["targets"]:
        log(f"  target {t['scenario']}: {t['ratio_to_floor']:.2f}x floor, wanted >= {t['target']}: "
            f"{'met' if t['met'] else 'NOT met'} (by CPU per query: {t['cpu_ratio'] or 0:.2f}x)")  # fmt: skip
    print(json.dumps(report))


if __name__ == "__main__":
    main()
