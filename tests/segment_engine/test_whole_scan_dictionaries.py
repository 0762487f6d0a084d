"""A whole scan reads dictionary-encoded string columns as Arrow dictionaries and expands them per
batch: the batches must equal Parquet's own plain read of the file (pyarrow, the oracle) whatever
the batch size against the row groups, nulls included; a column whose writer fell back to plain
pages is read plain."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.engine.footer import read_footer
from strata.engine.segment_input import SegmentInput
from strata.engine.whole_scan import dictionary_columns, whole_scan_batches
from strata.storage.segment_file import write_segment_pieces
from timeline import Interval, SegmentDescriptor

START_MS = 1_577_836_800_000  # 2020-01-01
HOUR = Interval(START_MS, START_MS + 3_600_000)
ROWS = 90_000  # three row groups (one per piece) of 30,000


def _pieces() -> list[pa.Table]:
    pieces = []
    for p in range(3):
        ids = range(p * 30_000, (p + 1) * 30_000)
        pieces.append(
            pa.table(
                {
                    "__time": pa.array([START_MS + i for i in ids], pa.timestamp("ms", tz="UTC")),
                    # low cardinality, with nulls: a small dictionary, indices only on the pages
                    "channel": pa.array([None if i % 7 == 0 else f"#ch{i % 13}" for i in ids]),
                    # every value distinct and long: the dictionary passes pyarrow's 1 MiB limit
                    # within each row group, and the rest of its pages are plain
                    "session": pa.array([f"session-{i:012d}-{'x' * 24}" for i in ids]),
                    "added": pa.array(list(ids), pa.int64()),
                }
            )
        )
    return pieces


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("whole_scan") / "index.parquet"
    pieces = _pieces()
    write_segment_pieces(pieces[0].schema, pieces, path, {"dataSource": "ds", "interval": str(HOUR)})
    return path


def test_only_columns_dictionary_encoded_throughout_are_read_as_dictionaries(segment: Path) -> None:
    meta = read_footer(str(segment)).meta
    assert meta.num_row_groups == 3
    assert dictionary_columns(meta, ["channel", "session", "no_such_column"]) == ["channel"]
    assert dictionary_columns(meta, []) == []


@pytest.mark.parametrize("batch_rows", [65_536, 7_000, 30_000])
def test_batches_equal_the_plain_read(segment: Path, batch_rows: int) -> None:
    schema = pa.schema(
        [("__time", pa.int64()), ("channel", pa.string()), ("session", pa.string()), ("added", pa.int64())]
    )
    inp = SegmentInput(str(segment), SegmentDescriptor(HOUR, "v1", 0), str(segment), HOUR)
    batches = list(whole_scan_batches(schema, [inp], batch_rows))
    assert all(b.schema == schema for b in batches)  # plain strings, never a dictionary type
    assert max(b.num_rows for b in batches) <= batch_rows
    got = pa.Table.from_batches(batches, schema)
    plain = pq.read_table(segment, columns=schema.names)
    expected = plain.set_column(0, "__time", plain.column("__time").cast(pa.int64()))
    assert got.num_rows == ROWS
    assert got.column("channel").null_count == len(range(0, ROWS, 7))
    assert got.equals(expected.cast(schema))
