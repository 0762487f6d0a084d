"""Shapes of a full Strata table read (reader options), in alternation with Spark reading the
files: what each costs in CPU, and how well Spark's JVM and its Python workers overlap.

    python -m bench.spark_read_variants [--rows 10000000] [--segments 100] [--repeat 3]
        [--variant NAME:OPTION=VALUE,... ...] [--jfr DIR] [--task-log FILE]

e.g. `--variant default: --variant b16k:batchRows=16384 --variant p4:partitions=4`. A task's JVM
thread turns its Python worker's Arrow batches into rows while the worker makes the next ones; on
2 cores the two tasks' JVM threads and workers share the cores. Per read: the wall time; the
machine's idle core-seconds (on a quiet machine, the time neither side had work: the two did not
overlap); CPU-seconds of Spark's task threads (the JVM's `Executor task` threads), of the JVM's
other threads, of the Python workers and of the historicals, from /proc (which another process's
load barely changes), and the task threads' seconds runnable but waiting for a core. `--jfr DIR`
records each timed read's JVM with Java Flight Recorder (`jfr print --events jdk.ExecutionSample`
shows where the task threads' CPU goes). `--task-log FILE` has every task of a Strata read log its
start, first batch and end (`strata.spark.task_timing`) and cuts each read's wall time into phases
(`bench.spark_task_phases`: planning, first batches, tasks ending apart); `--event-log DIR` keeps
Spark's event log and adds, for every read including Spark's direct one, its tasks' phases by
Spark's clock (`bench.spark_event_log`); `--thread-states` samples how often the read's threads
left a core without work (`bench.spark_thread_states`). Rounds alternate the
variants and Spark's direct read, after `--warmup` untimed rounds; medians are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import spark_event_log
from bench.spark_read import JAVA_OPTIONS_HELP, served
from bench.spark_read_stages import TICK, _cpu, _tree
from bench.spark_task_phases import TaskLog, phases
from bench.spark_thread_states import ThreadStates
from strata.spark import task_timing

Sample = dict[tuple[int, int], tuple[str, int, int]]  # (pid, tid) -> (group, on-CPU ns, runnable ns)


def _is_spark(pid: int) -> bool:
    """Spark's JVM, not ZooKeeper's (both are this process's children)."""
    try:
        return b"org.apache.spark" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _group(pid: int, tid: int) -> str:
    """Spark's task threads apart from the JVM's others (JIT, GC, scheduler, netty)."""
    try:
        name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        return "jvm other"
    return "jvm task" if name.startswith("Executor task") else "jvm other"


def sample(processes: dict[int, str]) -> Sample:
    out: Sample = {}
    for pid, kind in processes.items():
        if kind != "jvm":  # a process's own CPU counts its threads that ended (a task's read-ahead)
            group = "historicals" if kind == "historical" else "python workers"
            out[(pid, 0)] = (group, int(_cpu(pid) * 1e9), 0)
            continue
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            try:
                run, wait, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
            except (OSError, ValueError):
                continue
            out[(pid, tid)] = (_group(pid, tid), int(run), int(wait))
    return out


def _idle() -> float:
    """Core-seconds the whole machine has been idle (or waiting for I/O) since boot."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / TICK


def measure(
    fn: Callable[[], Any], processes: Callable[[], dict[int, str]], states: bool = False
) -> dict[str, float]:
    """Wall seconds of `fn()`, the machine's idle core-seconds meanwhile (on a quiet machine: the
    time neither side of a task had work), and per thread group CPU and runnable seconds; with
    `states`, how often the read's threads left a core without work (`ThreadStates`)."""
    before = sample(processes())
    idle = _idle()

    def spark_side() -> dict[int, str]:
        return {p: k for p, k in processes().items() if k in ("jvm", "python")}

    sampler = ThreadStates(spark_side, os.cpu_count() or 2) if states else None
    t, started = time.perf_counter(), time.time()
    if sampler is None:
        fn()
    else:
        with sampler:
            fn()
    wall, ended = time.perf_counter() - t, time.time()
    idle = _idle() - idle
    after = sample(processes())
    out: dict[str, float] = {"wall": wall, "idle core-s": idle, "start": started, "end": ended}
    if sampler is not None:
        out.update(sampler.figures())
    for key, (group, run, wait) in after.items():
        _, run0, wait0 = before.get(key, (group, 0, 0))
        out[f"{group} cpu"] = out.get(f"{group} cpu", 0.0) + (run - run0) / 1e9
        out[f"{group} runnable"] = out.get(f"{group} runnable", 0.0) + (wait - wait0) / 1e9
    return out


def recorded(fn: Callable[[], Any], processes: Callable[[], dict[int, str]], out: Path) -> dict[str, float]:
    """`measure`, with Java Flight Recorder sampling Spark's JVM into `out` meanwhile."""
    (jvm,) = [p for p, kind in processes().items() if kind == "jvm"]
    out.parent.mkdir(parents=True, exist_ok=True)
    jcmd = ["jcmd", str(jvm)]
    subprocess.run([*jcmd, "JFR.start", "name=read", "settings=profile", f"filename={out}"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    try:
        return measure(fn, processes)
    finally:
        subprocess.run([*jcmd, "JFR.stop", "name=read"], check=True, capture_output=True, timeout=60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--variant", action="append", default=[], help="NAME:OPTION=VALUE,... (reader options of one variant)"
    )
    parser.add_argument(
        "--jfr", type=Path, help="record each timed read with Java Flight Recorder into this folder"
    )
    parser.add_argument(
        "--thread-states", action="store_true", help="sample the read's threads: cores left without work"
    )
    parser.add_argument("--task-log", type=Path, help="per-task timestamps into this file, and phases")
    parser.add_argument("--java-options", default="", help=JAVA_OPTIONS_HELP)
    parser.add_argument(
        "--event-log", type=Path, help="Spark's event log into this (empty) folder: every read's tasks"
    )
    args = parser.parse_args(argv)
    if args.event_log:
        spark_event_log.enable(args.event_log)
    windows: list[tuple[str, dict[str, float], float, float]] = []  # each read: figures, start, end
    log = None
    if args.task_log:  # before the JVM starts: its Python workers inherit the environment
        os.environ[task_timing.ENV] = str(args.task_log.resolve())
        log = TaskLog(args.task_log)
    variants = [v.partition(":")[::2] for v in args.variant] or [("default", "")]

    app = "strata-bench-spark-variants"
    with served(args.rows, args.segments, app, args.java_options) as (c, data, broker, spark):
        metadata = str(c.root / "meta.db")
        historicals = {h.pid: "historical" for h in c.historicals}

        def processes() -> dict[int, str]:
            servers = {*historicals, broker.pid}
            spark_side = {p: k for p, k in _tree(os.getpid()).items() if p not in servers}
            return {**{p: k for p, k in spark_side.items() if k != "jvm" or _is_spark(p)}, **historicals}

        reads: dict[str, Callable[[], Any]] = {}
        for name, options in variants:
            reader = (spark.read.format("strata").option("broker", broker.url).option("datasource", "bench")
                      .option("metadata", metadata))  # fmt: skip
            for pair in filter(None, options.split(",")):
                key, _, value = pair.partition("=")
                reader = reader.option(key, value)
            df = reader.load()
            reads[name] = (lambda d: lambda: d.write.format("noop").mode("overwrite").save())(df)
        direct = spark.read.parquet(*data.files)
        reads["spark direct"] = lambda: direct.write.format("noop").mode("overwrite").save()
        samples: dict[str, list[dict[str, float]]] = {k: [] for k in reads}
        for round_ in range(args.warmup + args.repeat):
            for name, fn in reads.items():
                timed = round_ >= args.warmup
                recording = (
                    args.jfr / f"{name.replace(' ', '-')}-{round_}.jfr" if args.jfr and timed else None
                )
                if recording is None:
                    m = measure(fn, processes, args.thread_states)
                else:
                    m = recorded(fn, processes, recording)
                start, end = m.pop("start"), m.pop("end")
                windows.append((name, m, start, end))
                if log is not None:
                    m.update(phases(log.take(), start, end))
                if log is not None or args.thread_states:
                    print(f"  {name}: {json.dumps(m)}", file=sys.stderr)
                if timed:
                    samples[name].append(m)
                load = os.getloadavg()[0]
                print(f"round {round_} {name}: {m['wall']:.2f}s load {load:.1f}", file=sys.stderr)
    if args.event_log:  # complete once the session has stopped
        jobs = spark_event_log.read_jobs(args.event_log)
        for name, m, start, end in windows:
            m.update(spark_event_log.phases(jobs, start, end))
            spark_side = {k: v for k, v in m.items() if k.startswith("spark: ")}
            print(f"  {name}: {json.dumps(spark_side)}", file=sys.stderr)
    figures = {}
    for name, runs in samples.items():
        keys = sorted({k for r in runs for k in r})
        figures[name] = {k: round(statistics.median(r.get(k, 0.0) for r in runs), 3) for k in keys}
        direct_wall = statistics.median(r["wall"] for r in samples["spark direct"])
        figures[name]["wall / direct"] = round(figures[name]["wall"] / direct_wall, 2)
    print(f"{args.rows:,} rows in {args.segments} segments, load {os.getloadavg()}", file=sys.stderr)
    print(json.dumps({"rows": args.rows, "segments": args.segments, **figures}, indent=1))


if __name__ == "__main__":
    main()
