"""Where a full Spark read through Strata spends its time, stage by stage.

    python -m bench.spark_read_stages [--rows 2000000] [--segments 20] [--repeat 3]

Serves the synthetic datasource of `bench.spark_read` and measures:
- CPU-seconds per process during timed full reads (Spark's `noop` sink), from `/proc`: the Spark
  JVM, its Python workers, the historicals, the broker; for each path a table read can take
  (`segmentFiles` true and false) and for Spark reading the Parquet files directly;
- in this process, one task's Python stages over every segment: fetching the data nodes' Arrow
  answers, reading the segment files as the historicals' whole scan does, and `conform_batch`
  (Spark's exact Arrow schema);
- with `--profile DIR`, in rounds of their own, py-spy on Spark's Python workers during reads from
  the segment files: where a task's worker spends its time, per file or per row, and which side
  waits for the other (`bench.spark_worker_time`; stacks kept in DIR).
Wall times on a shared machine are noisy; CPU-seconds much less so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.spark_read import served

TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """A process's own CPU-seconds (user + system)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _tree(root: int) -> dict[int, str]:
    """pid -> kind ('jvm', 'python') of every process under `root`."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in out:
                try:
                    exe = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
                except OSError:
                    continue
                out[child] = "jvm" if exe.endswith("java") else "python"
                frontier.append(child)
    return out


class CpuMeter:
    """CPU-seconds per group of processes, sampled every `period` s: Spark's Python workers come
    and go (a planner per query), so each process is followed from the first time it is seen."""

    def __init__(self, classify: Callable[[], dict[int, str]], period: float = 0.1) -> None:
        self.classify = classify
        self.period = period
        self.last: dict[int, float] = {}
        self.total: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for pid, group in self.classify().items():
            now = _cpu(pid)
            self.total[group] = self.total.get(group, 0.0) + max(0.0, now - self.last.get(pid, now))
            self.last[pid] = now

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def __enter__(self) -> CpuMeter:
        self._sample()
        self.total.clear()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def measured(fn: Callable[[], Any], classify: Callable[[], dict[int, str]], repeat: int) -> dict[str, float]:
    """Mean wall seconds and CPU-seconds per process group of `repeat` runs of `fn`."""
    with CpuMeter(classify) as meter:
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        wall = (time.perf_counter() - t) / repeat
    out = {"wall_s": round(wall, 3)}
    for name, seconds in sorted(meter.total.items()):
        out[f"{name}_cpu_s"] = round(seconds / repeat, 3)
    return out


def python_stages(broker_url: str, data_source: str, metadata: str) -> dict[str, float]:
    """One reader over every segment, in this process: fetch + decode, file read, conform."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from strata.spark.results import conform_batch
    from strata.spark.source import StrataDataSource

    out: dict[str, float] = {}
    for files in ("false", "true"):
        source = StrataDataSource({"broker": broker_url, "datasource": data_source, "partitions": "1",
                                   "metadata": metadata, "segmentFiles": files})  # fmt: skip
        reader: Any = source.reader(source.schema())
        (part,) = reader.partitions()
        target = to_arrow_schema(reader.schema, timezone="UTC")
        fetched = conformed = 0.0
        t = time.process_time()
        batches = list(reader.raw_batches(part))
        fetched = time.process_time() - t
        t = time.process_time()
        for b in batches:
            conform_batch(b, target)
        conformed = time.process_time() - t
        label = "files" if files == "true" else "data nodes"
        out[f"{label}: read (CPU s)"] = round(fetched, 3)
        out[f"{label}: conform (CPU s)"] = round(conformed, 3)
    return out


def profile_workers(workers: list[int], read: Callable[[], Any], reads: int, out: Path) -> dict[str, float]:
    """Seconds per read in each of `bench.spark_worker_time`'s categories, over `reads` runs of
    `read` with py-spy sampling every thread of each Python worker (running or waiting)."""
    from bench.profile_stacks import py_spy
    from bench.spark_worker_time import RATE_HZ, worker_seconds

    out.mkdir(parents=True, exist_ok=True)

    def spy(pid: int) -> subprocess.Popen[bytes]:
        argv = [py_spy(), "record", "--pid", str(pid), "--idle", "--threads", "-r", str(RATE_HZ),
                "-f", "raw", "-o", str(out / f"worker-{pid}.txt"), "--nonblocking"]  # fmt: skip
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    spies = [spy(pid) for pid in workers]
    try:
        time.sleep(1.0)  # py-spy attached
        for _ in range(reads):
            read()
    finally:
        for process in spies:
            process.send_signal(2)  # py-spy writes its stacks on SIGINT
        for process in spies:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    raw = "".join(p.read_text() for p in out.glob("worker-*.txt"))
    return worker_seconds(raw, reads)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--segments", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="also py-spy Spark's Python workers; stacks kept here")
    args = parser.parse_args(argv)

    with served(args.rows, args.segments, "strata-bench-spark-stages") as (c, data, broker, spark):
        servers = {h.pid: "historicals" for h in c.historicals} | {broker.pid: "broker"}

        metadata = str(c.root / "meta.db")

        def classify() -> dict[int, str]:
            spark_side = {p: f"spark_{k}" for p, k in _tree(os.getpid()).items() if p not in servers}
            return {**spark_side, **servers}

        def strata_read(files: str) -> Callable[[], Any]:
            df = (spark.read.format("strata").option("broker", broker.url).option("datasource", "bench")
                  .option("metadata", metadata).option("segmentFiles", files).load())  # fmt: skip
            return lambda: df.write.format("noop").mode("overwrite").save()

        direct_df = spark.read.parquet(*data.files)
        reads = {
            "strata, data nodes": strata_read("false"),
            "strata, segment files": strata_read("true"),
            "spark direct": lambda: direct_df.write.format("noop").mode("overwrite").save(),
        }
        for _ in range(args.warmup):
            for fn in reads.values():
                fn()
        figures: dict[str, Any] = {name: measured(fn, classify, args.repeat) for name, fn in reads.items()}
        stages = python_stages(broker.url, "bench", metadata)
        figures["python stages, one task over every segment"] = stages
        if args.profile is not None:
            workers = [p for p, kind in _tree(os.getpid()).items() if kind == "python" and p not in servers]
            figures["python workers, seconds per read from segment files (py-spy)"] = profile_workers(
                workers, reads["strata, segment files"], args.repeat, args.profile
            )
    print(f"{args.rows:,} rows in {args.segments} segments, Spark local[2], 2 cores", file=sys.stderr)
    print(json.dumps({"rows": args.rows, "segments": args.segments, **figures}, indent=1))


if __name__ == "__main__":
    main()
