"""The local engine holds a block and a few time chunks in memory, never the whole input, and still
cuts the segments every row in memory would give.

Oracle: plain Python over the raw rows of the Parquet files (in input order): Druid's segment order
(chunk, `__time`, dimensions with nulls first, ties in input order) and dynamic partitioning cut
in that order. Blocks and chunk builds are made small so one ingestion crosses many of each.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import strata.ingestion.local_engine as local_engine
import strata.ingestion.readers as readers
import strata.ingestion.segment_build as segment_build
import strata.ingestion.staged_rows as staged_rows
from strata.ingestion import ingest
from strata.ingestion.readers import InputFile, consecutive_runs, read_blocks
from strata.ingestion.rollup import CHUNK
from strata.ingestion.spec import InputFormat
from strata.ingestion.staged_rows import Piece

HOUR = 3_600_000
MAX_ROWS = 30
HOURS = 24
BUDGET = 12_000  # bytes: each hour's rows take about 2,000


def _write_inputs(directory: Path, seed: int) -> list[dict[str, Any]]:
    """Three files of small row groups, times all over a day of hours (so every block feeds several
    chunks and chunks come back out of order), duplicate keys, and a dimension only the last file
    has (discovered late). Returns every raw row in input order."""
    rnd = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for f in range(3):
        part = []
        for _ in range(400):
            row = {
                "ts": rnd.randrange(0, HOURS * HOUR, 600_000),  # ten-minute steps: many ties
                "d": rnd.choice([None, "a", "b", "c"]),
                "n": len(rows) + len(part),  # a metric that shows each row's input position
            }
            if f == 2:
                row["late"] = rnd.choice([None, "x", "y"])
            part.append(row)
        table = pa.Table.from_pylist(part)
        table = table.set_column(0, "ts", table.column("ts").cast(pa.timestamp("ms")))
        pq.write_table(table, directory / f"part{f}.parquet", row_group_size=rnd.choice([37, 64, 150]))
        rows += part
    return rows


def _oracle(rows: list[dict[str, Any]]) -> dict[tuple[int, int], list[int]]:
    """(chunk start, partition number) -> the `n` of its rows, in segment order."""

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        dims = [(0, "") if r.get(k) is None else (1, r[k]) for k in ("d", "late")]
        return (r["ts"] // HOUR, r["ts"], *dims)

    ordered = sorted(rows, key=key)  # stable: ties keep input order
    out: dict[tuple[int, int], list[int]] = {}
    for hour in sorted({r["ts"] // HOUR for r in rows}):
        mine = [r["n"] for r in ordered if r["ts"] // HOUR == hour]
        for p in range(math.ceil(len(mine) / MAX_ROWS)):
            out[(hour * HOUR, p)] = mine[p * MAX_ROWS : (p + 1) * MAX_ROWS]
    return out


def _spec(directory: Path) -> dict[str, Any]:
    return {
        "dataSchema": {
            "dataSource": "t",
            "timestampSpec": {"column": "ts", "format": "auto"},
            "dimensionsSpec": {"dimensions": [], "dimensionExclusions": ["n"]},
            "metricsSpec": [{"type": "longSum", "name": "n", "fieldName": "n"}],
            "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False},
        },
        "ioConfig": {
            "inputSource": {"type": "local", "baseDir": str(directory), "filter": "*.parquet"},
            "inputFormat": {"type": "parquet"},
        },
        "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": MAX_ROWS}},
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_segments_match_the_in_memory_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(readers, "PARQUET_BATCH_ROWS", 100)
    monkeypatch.setattr(local_engine, "BUILD_BYTES", BUDGET)
    monkeypatch.setattr(local_engine, "BUILD_WORKERS", 2)
    inputs = tmp_path / "in"
    inputs.mkdir()
    rows = _write_inputs(inputs, seed)
    built: list[tuple[dict[int, int], int]] = []  # per build: rows of each chunk, staged bytes
    running: list[int] = []  # staged bytes of the builds running now
    over: list[list[int]] = []  # builds side by side that held more than BUILD_BYTES together
    staged_bytes: dict[int, int] = {}  # id of what read_pieces returned -> its pieces' bytes
    lock = threading.Lock()
    real_read, real_build = staged_rows.read_pieces, segment_build.build_segments

    def read(pieces: list[Piece], dims: Any) -> list[pa.Table]:
        parts = real_read(pieces, dims)
        with lock:
            staged_bytes[id(parts)] = sum(p.nbytes for p in pieces)
        return parts

    def watched(parts: list[pa.Table], *args: Any, **kw: Any) -> Any:
        size = staged_bytes[id(parts)]
        with lock:
            built.append((Counter(c for p in parts for c in p.column(CHUNK).to_pylist()), size))
            running.append(size)
            if len(running) > 1 and sum(running) > BUDGET:
                over.append(list(running))
        try:
            return real_build(parts, *args, **kw)
        finally:
            with lock:
                running.remove(size)

    monkeypatch.setattr(local_engine, "read_pieces", read)
    monkeypatch.setattr(local_engine, "build_segments", watched)
    summary = ingest(
        _spec(inputs), deep_storage=tmp_path / "deep", metadata=tmp_path / "meta.db", engine="local"
    )
    want = _oracle(rows)
    got = {}
    for w in summary.segments:
        table = pq.read_table(w.segment.load_spec["path"])
        got[(w.segment.interval.start, w.segment.partition_num)] = table.column("n").to_pylist()
        assert table.column_names[:3] == ["__time", "d", "late"]
    assert got == want
    assert [(s.segment.interval.start, s.segment.partition_num) for s in summary.segments] == sorted(want)
    # every chunk whole in one build, several small chunks per build up to BUILD_BYTES / BUILD_WORKERS
    # (a larger chunk alone); builds side by side hold at most BUILD_BYTES
    chunk_rows = Counter(r["ts"] // HOUR * HOUR for r in rows)
    assert sorted(c for b, _ in built for c in b) == sorted(chunk_rows)
    assert all(b[c] == chunk_rows[c] for b, _ in built for c in b)
    assert all(len(b) == 1 or size <= BUDGET // 2 for b, size in built)
    assert len(chunk_rows) > len(built) > 2
    assert not over
    assert not list((tmp_path / "deep").glob("**/*.arrow"))  # the staged rows are gone


def test_parquet_blocks_are_runs_of_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks never exceed the batch size unless one row group does, and then it is streamed in
    batches; every row comes once, in order, with its row number."""
    monkeypatch.setattr(readers, "PARQUET_BATCH_ROWS", 100)
    path = tmp_path / "in.parquet"
    with pq.ParquetWriter(path, pa.schema([("n", pa.int64())])) as w:
        start = 0
        for size in (30, 30, 50, 250, 10, 100, 5):
            w.write_table(pa.table({"n": pa.array(range(start, start + size), pa.int64())}))
            start += size
    blocks = list(read_blocks(InputFile(str(path), path=path), InputFormat("parquet")))
    assert [b.table.num_rows for b in blocks] == [60, 50, 100, 100, 50, 10, 100, 5]
    assert [b.first_line for b in blocks] == [1, 61, 111, 211, 311, 361, 371, 471]
    assert [n for b in blocks for n in b.table.column("n").to_pylist()] == list(range(475))
    assert sum(b.progress_bytes for b in blocks) <= path.stat().st_size


@pytest.mark.parametrize(
    ("sizes", "runs"),
    [
        ([30, 30, 50, 250, 10, 100, 5], [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)]),
        ([100, 100], [(0, 1), (1, 2)]),
        ([40, 40, 20, 1], [(0, 3), (3, 4)]),
        ([], []),
    ],
)
def test_consecutive_runs(sizes: list[int], runs: list[tuple[int, int]]) -> None:
    assert list(consecutive_runs(sizes, 100)) == runs
