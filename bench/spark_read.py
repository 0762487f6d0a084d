"""Spark reading a datasource through the broker (`format("strata")`) beside Spark reading the same
Parquet segment files directly, and DuckDB over those files as the baseline.

    python -m bench.spark_read [--rows 2000000] [--segments 8] [--repeat 3]

A real cluster (ZooKeeper, two historicals, one broker) serves synthetic hourly segments
(bench.cluster_setup). Two reads:
- full: every row and every column, materialised (Spark's `noop` sink);
- filtered: `channel = '#ch3' AND country = 'country07'` (about 1 row in 1,000), counted.
The Strata read is given the metadata store (option `metadata`), so a full read's tasks read the
segment files from deep storage; it sends the filter to the data nodes; the direct read pushes it
into its Parquet scan. The full read is also timed through the data nodes (`segmentFiles` false:
the path of a secured cluster, or of a caller without the metadata store), beside the others.

Both Spark reads run through the same JVM code after the scan (rows out of Arrow or Parquet
batches, the sink), which its JIT compiles over the first few reads: the full read through the
broker took 11.0, 5.9, 4.8, 3.3 s in its first four runs, the direct read 4.6, 3.4, 2.6, 2.2 s.
So `--warmup` untimed rounds (3) run first, then `--repeat` timed rounds; each round runs the
broker read, the direct read and DuckDB one after the other, so all see the same JIT and machine
load, and medians are compared. (Timing one read's runs and then the other's favoured whichever
went second: it found the JIT warmer.)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import duckdb

from bench.cluster_setup import Cluster, Dataset, cluster, wait_for_segments, write_dataset
from harness.processes import StrataProcess
from harness.spark_session import local_session

# Arrow's own checks on every value Spark reads from a Python data source's batches (docs/spark.md)
ARROW_UNCHECKED = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
JAVA_OPTIONS_HELP = f"options of Spark's JVM, e.g. '{ARROW_UNCHECKED}'"


@contextlib.contextmanager
def served(
    rows: int, segments: int, app: str, java_options: str = ""
) -> Iterator[tuple[Cluster, Dataset, StrataProcess, Any]]:
    """The synthetic datasource `bench` served by two historicals and a broker, and a local Spark
    session (its JVM started with `java_options`): (cluster, dataset, broker, session), all
    stopped on the way out."""
    with cluster() as c:
        data = write_dataset(c.root, "bench", rows, segments)
        c.start_data_nodes(2)
        broker = c.start_broker()
        wait_for_segments(broker, segments)
        spark = local_session(app, java_options=java_options)
        try:
            yield c, data, broker, spark
        finally:
            spark.stop()


def alternated(fns: Sequence[Callable[[], Any]], warmup: int, repeat: int) -> tuple[list[float], list[Any]]:
    """Median seconds of each of `fns` over `repeat` rounds that run each once in turn, after
    `warmup` untimed rounds; and each one's last result."""
    results: list[Any] = [None] * len(fns)
    samples: list[list[float]] = [[] for _ in fns]
    for round_ in range(warmup + repeat):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            results[i] = fn()
            if round_ >= warmup:
                samples[i].append(time.perf_counter() - t)
    return [statistics.median(s) for s in samples], results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (medians)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (the JVM's JIT)")
    parser.add_argument("--java-options", default="", help=JAVA_OPTIONS_HELP)
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    app = "strata-bench-spark-read"
    with served(args.rows, args.segments, app, args.java_options) as (c, data, broker, spark):

        def strata(segment_files: str) -> Any:
            # a reader of its own each: `DataFrameReader.option` sets the option on the reader it is
            # called on, so deriving one read from the other turned both into data-node reads
            return (
                spark.read.format("strata")
                .option("broker", broker.url)
                .option("datasource", "bench")
                .option("metadata", str(c.root / "meta.db"))
                .option("segmentFiles", segment_files)
            )

        through_broker, via_nodes = strata("true"), strata("false")
        direct = spark.read.parquet(*data.files)
        selective = (F.col("channel") == "#ch3") & (F.col("country") == "country07")

        def full(df: Any) -> Callable[[], Any]:
            return lambda: df.write.format("noop").mode("overwrite").save()

        def filtered(df: Any) -> Callable[[], int]:
            return lambda: df.where(selective).count()

        if through_broker.load().count() != direct.count():
            raise SystemExit("full read: row counts differ between the broker and the files")
        rows: list[tuple[str, float, float, float]] = []
        duck = duckdb.connect()
        files = data.parquet_list()
        where = "channel = '#ch3' AND country = 'country07'"

        def duck_full() -> int:
            return int(duck.sql(f"SELECT * FROM read_parquet({files})").to_arrow_table().num_rows)

        def duck_filtered() -> Any:
            return duck.execute(f"SELECT count(*) FROM read_parquet({files}) WHERE {where}").fetchall()

        for name, broker_fn, direct_fn, duck_fn in (
            ("full read", full(through_broker.load()), full(direct), duck_full),
            ("full read via data nodes", full(via_nodes.load()), full(direct), duck_full),
            ("filtered read", filtered(through_broker.load()), filtered(direct), duck_filtered),
        ):
            (t_broker, t_direct, t_duck), (got, want, _) = alternated(
                (broker_fn, direct_fn, duck_fn), args.warmup, args.repeat
            )
            if got != want:
                raise SystemExit(f"{name}: through the broker {got} rows, direct {want}")
            rows.append((name, t_broker, t_direct, t_duck))

    # the table for people on stderr, the figures as one JSON line last on stdout (`python -m bench`)
    say = functools.partial(print, file=sys.stderr)
    say(f"\n{args.rows:,} rows in {args.segments} hourly segments, 2 historicals, Spark local[2], 2 cores")
    say(f"{'':24} {'via Strata':>11} {'Spark direct':>13} {'DuckDB':>8}  Strata/direct")
    for name, t_broker, t_direct, t_duck in rows:
        mrows = args.rows / t_broker / 1e6
        say(
            f"{name:24} {t_broker:10.2f}s {t_direct:12.2f}s {t_duck:7.2f}s  {t_broker / t_direct:5.2f}x"
            f"   ({mrows:.2f} M rows scanned/s via Strata)"
        )
    figures = {
        name: {"broker_s": round(b, 3), "spark_direct_s": round(d, 3), "duckdb_s": round(k, 3),
               "broker_over_direct": round(b / d, 2)}
        for name, b, d, k in rows
    }  # fmt: skip
    print(json.dumps({"rows": args.rows, "segments": args.segments, **figures}))


if __name__ == "__main__":
    main()
