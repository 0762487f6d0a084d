"""Hourly segment files for the dictionary-code tests, and copies with dictionaries of their own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from strata.engine import SegmentInput
from strata.storage.segment_file import write_segment_file
from timeline import Interval, SegmentDescriptor

HOUR = 3_600_000
START = 1_704_067_200_000  # 2024-01-01T00:00Z
VERSION = "2024-01-02T00:00:00.000Z"


def write_hourly(
    root: Path, data_source: str, tables: Sequence[pa.Table]
) -> list[tuple[SegmentInput, pa.Table]]:
    """Table `h` of `tables` as the segment of hour `h` from START (string columns `dim`, `dim2` where
    present as dimensions, `n` a longSum), each with its input over the whole hour."""
    out = []
    for hour, table in enumerate(tables):
        interval = Interval(START + hour * HOUR, START + (hour + 1) * HOUR)
        path = root / f"seg{hour}" / "index.parquet"
        path.parent.mkdir()
        dims = [{"name": d, "type": "string"} for d in ("dim", "dim2") if d in table.column_names]
        facts = {"dataSource": data_source, "interval": str(interval), "version": VERSION, "dimensions": dims,
                 "metrics": [{"type": "longSum", "name": "n", "fieldName": "n"}],
                 "queryGranularity": "none", "rollup": False}  # fmt: skip
        write_segment_file(table, path, facts)
        descriptor = SegmentDescriptor(interval, VERSION, 0)
        out.append((SegmentInput(f"{data_source}_{hour}", descriptor, str(path), interval), table))
    return out


def reencoded(table: pa.Table, column: str, *, reverse: bool) -> pa.Table:
    """`table` with `column` given a dictionary of its own (sorted, or reverse sorted)."""
    if column not in table.column_names:
        return table
    values = table.column(column).cast(pa.string()).combine_chunks().to_pylist()
    uniques = sorted({v for v in values if v is not None}, reverse=reverse)
    indices = pa.array([None if v is None else uniques.index(v) for v in values], pa.int32())
    encoded = pa.DictionaryArray.from_arrays(indices, pa.array(uniques, pa.string()))
    return table.set_column(table.schema.get_field_index(column), column, encoded)
