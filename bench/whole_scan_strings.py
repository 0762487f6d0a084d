"""A Spark task's Python CPU reading segment files: string columns read as Arrow dictionaries and
expanded per batch (`strata.engine.whole_scan`, issue 41) against Parquet's own plain read.

    python -m bench.whole_scan_strings [--rows 2000000] [--segments 20] [--repeat 5]

Writes the synthetic segments of `bench.spark_read` (no cluster, no Spark) and reads every file
as a task does, `conform_batch` to Spark's exact Arrow schema included, in alternating rounds in
this one process: CPU-seconds per 10M rows, medians. Both reads must give the same batches.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.cluster_setup import write_dataset

Read = Callable[[str], Iterator[pa.RecordBatch]]


def reads(batch_rows: int) -> dict[str, Read]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from strata.engine.segment_input import SegmentInput
    from strata.engine.whole_scan import whole_scan_batches
    from strata.spark.results import conform_batch, table_schema

    types = {"__time": "LONG", "country": "STRING", "channel": "STRING", "page": "STRING",
             "added": "LONG", "score": "DOUBLE"}  # fmt: skip
    target = to_arrow_schema(table_schema(types), timezone="UTC")
    scanned = pa.schema([("__time", pa.int64()), *((f.name, f.type) for f in target if f.name != "__time")])

    def dictionaries(path: str) -> Iterator[pa.RecordBatch]:
        inp = SegmentInput(path, None, path, None)  # type: ignore[arg-type]  # the path is all it reads
        for batch in whole_scan_batches(scanned, [inp], batch_rows):
            yield conform_batch(batch, target)

    def plain(path: str) -> Iterator[pa.RecordBatch]:  # the whole scan before issue 41's change
        with pq.ParquetFile(path) as stored:
            for batch in stored.iter_batches(batch_size=batch_rows, columns=scanned.names, use_threads=False):
                arrays = [batch.column(n) for n in scanned.names]
                arrays[0] = arrays[0].view(pa.int64())
                yield conform_batch(pa.RecordBatch.from_arrays(arrays, schema=scanned), target)

    return {"dictionaries": dictionaries, "plain strings": plain}


def cpu_per_10m(read: Read, files: Sequence[str]) -> float:
    start, rows = time.process_time(), 0
    for path in files:
        for batch in read(path):
            rows += batch.num_rows
    return (time.process_time() - start) * 10_000_000 / max(rows, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--segments", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch-rows", type=int, default=65_536)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="whole-scan-strings-") as root:
        files = write_dataset(Path(root), "bench", args.rows, args.segments).files
        compared = reads(args.batch_rows)
        first, second = (
            pa.Table.from_batches([b for f in files for b in read(f)]) for read in compared.values()
        )
        if not first.equals(second):
            raise SystemExit("the two reads gave different batches")
        samples: dict[str, list[float]] = {name: [] for name in compared}
        for _ in range(args.repeat):
            for name, read in compared.items():
                samples[name].append(cpu_per_10m(read, files))
    figures = {f"{name}: CPU s per 10M rows": round(statistics.median(s), 3) for name, s in samples.items()}
    print(f"{args.rows:,} rows in {args.segments} segment files, one process", file=sys.stderr)
    print(json.dumps({"rows": args.rows, "segments": args.segments, **figures}))


if __name__ == "__main__":
    main()
