"""Sorting py-spy's samples of Spark's Python workers (bench.spark_worker_time) by what a task does."""

from __future__ import annotations

from bench.spark_worker_time import worker_seconds

MAIN = "thread (101): MainThread;main (pyspark/worker.py:3000);process (pyspark/worker.py:2900)"
AHEAD = "thread (102): strata-read-ahead;Thread._bootstrap (threading.py:1002);produce (strata/spark/read_ahead.py:50)"
READ = f"{AHEAD};conformed_batches (strata/spark/reader.py:230);raw_batches (strata/spark/reader.py:200)"

RAW = "\n".join(
    [
        f"{MAIN};ArrowStreamSerializer.dump_stream (pyspark/sql/pandas/serializers.py:73) 400",
        f"{MAIN};read_ahead (strata/spark/read_ahead.py:62);Queue.get (queue.py:171);Condition.wait (threading.py:327) 100",
        f"{MAIN};read_int (pyspark/serializers.py:602) 999",  # between tasks: not a read's time
        f"{READ};split_by_file (strata/spark/segment_files.py:85);_whole_scan (strata/spark/segment_files.py:70) 20",
        f"{READ};read_files (strata/spark/segment_files.py:102);whole_scan_batches (strata/engine/whole_scan.py:64);"
        "ParquetFile.__init__ (pyarrow/parquet/core.py:336) 20",
        f"{READ};read_files (strata/spark/segment_files.py:102);whole_scan_batches (strata/engine/whole_scan.py:65) 300",
        f"{READ};conform_batch (strata/spark/results.py:170);cast (pyarrow/compute.py:415) 100",
        f"{AHEAD};put (strata/spark/read_ahead.py:40);Queue.put (queue.py:140);Condition.wait (threading.py:331) 200",
        "thread (103): Thread-7;run (other.py:1) 500",  # neither of a task's threads
    ]
)


def test_samples_are_sorted_into_per_file_per_row_and_waiting() -> None:
    got = worker_seconds(RAW, reads=2, rate_hz=100)
    assert got == {
        "main: waiting for the read-ahead thread's next batch": 0.5,
        "main: writing a batch to the JVM (waits while the JVM converts the last)": 2.0,
        "read-ahead: per file (schema check, opening and closing files)": 0.2,
        "read-ahead: per row (decoding pages, conforming batches)": 2.0,
        "read-ahead: waiting, two batches ready (Spark is slower)": 1.0,
    }
