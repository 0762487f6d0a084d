"""The Arrow copy a historical keeps beside each cached segment: written once, memory-mapped, reused
on restart, rewritten when damaged, registered while the segment is served and gone when dropped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from historical_service.arrow_copy import mapped_copy
from historical_service.cluster_view import StaticClusterView
from historical_service.control_loop import ControlLoop
from historical_service.loader import SegmentLoader
from historical_service.metrics import HistoricalMetrics
from strata.data_node.change_feed import ChangeHistory
from strata.data_node.served import ServedSegments
from strata.engine import mapped_source, run_to_json
from strata.query import parse_query
from strata.storage import LocalDeepStorage
from strata.storage.segment_file import write_segment_pieces
from tests.historical.segment_factory import build_segment
from timeline import DataSegment


def _load(
    cache: Path, deep: LocalDeepStorage, segment: DataSegment, *, arrow: bool = True
) -> pa.Table | None:
    async def go() -> pa.Table | None:
        loader = SegmentLoader(cache, deep, arrow=arrow)
        try:
            return (await loader.load(segment)).table
        finally:
            loader.close()

    return asyncio.run(go())


def test_copy_holds_the_segment_rows_memory_mapped(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    segment = build_segment(deep, "wiki", 0, rows=40)
    table = _load(tmp_path / "cache", deep, segment)
    assert table is not None
    copy = tmp_path / "cache" / segment.id / "index.arrow"
    assert copy.is_file()
    assert pa.types.is_dictionary(table.schema.field("page").type)
    assert table.to_pylist() == pq.read_table(deep.root / segment.load_spec["path"]).to_pylist()
    before = pa.total_allocated_bytes()
    again = _load(tmp_path / "cache", deep, segment)  # a restart: mapped again, nothing read to the heap
    assert again is not None and again.equals(table)
    assert pa.total_allocated_bytes() - before < 4096


def test_copy_dictionaries_are_sorted(tmp_path: Path) -> None:
    """Each string column's dictionary is in ascending order (Druid's), whatever order the rows first
    hold the values in and over several row groups, nulls kept: copies holding the same values share
    one dictionary, so a request groups on their codes without mapping them."""
    values = ["zulu", None, "alpha", "mike", "alpha", None, "échelle", "Zebra", "mike", "bravo"]
    table = pa.table({
        "__time": pa.array(range(len(values)), pa.timestamp("ms", tz="UTC")),
        "name": pa.array(values, pa.string()), "other": pa.array(["b", "a"] * 5, pa.string()),
    })  # fmt: skip
    path = tmp_path / "index.parquet"
    write_segment_pieces(table.schema, [table.slice(0, 4), table.slice(4)], path, {"dataSource": "x"})
    copy = mapped_copy(path)
    for column in ("name", "other"):
        chunks = copy.column(column).chunks
        dictionary = chunks[0].dictionary.to_pylist()
        assert dictionary == sorted(v for v in set(table.column(column).to_pylist()) if v is not None)
        assert all(c.dictionary.equals(chunks[0].dictionary) for c in chunks)
    assert (
        copy.select(["name", "other"])
        .cast(table.select(["name", "other"]).schema)
        .equals(table.select(["name", "other"]))
    )


def test_restart_reuses_the_copy_and_a_damaged_one_is_written_again(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    segment = build_segment(deep, "wiki", 0, rows=30)
    cache = tmp_path / "cache"
    assert _load(cache, deep, segment) is not None
    expected = pq.read_table(deep.root / segment.load_spec["path"]).to_pylist()
    copy = cache / segment.id / "index.arrow"
    written = copy.stat()
    _load(cache, deep, segment)
    assert (copy.stat().st_ino, copy.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    whole = copy.read_bytes()
    for damaged in (whole[: len(whole) // 2], b"ARROW1 garbage", b""):
        copy.unlink()  # a new file: rows mapped from the old one stay as they were
        copy.write_bytes(damaged)
        table = _load(cache, deep, segment)
        assert table is not None and table.to_pylist() == expected
        assert copy.read_bytes() == whole
    assert [p.name for p in (cache / segment.id).iterdir() if p.name.startswith(".")] == []


def test_parquet_format_keeps_no_copy(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    segment = build_segment(deep, "wiki", 0)
    cache = tmp_path / "cache"
    _load(cache, deep, segment)
    assert (cache / segment.id / "index.arrow").is_file()
    assert _load(cache, deep, segment, arrow=False) is None
    assert not (cache / segment.id / "index.arrow").exists()  # the earlier run's copy is removed


class _Used:
    def __init__(self) -> None:
        self.segments: list[DataSegment] = []

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]:
        return list(self.segments)


def test_dropped_segment_is_unregistered_and_a_reload_serves_it_again(tmp_path: Path) -> None:
    deep = LocalDeepStorage(tmp_path / "deep")
    segments = [build_segment(deep, "wiki", day, rows=20 + day) for day in range(3)]
    used = _Used()
    served = ServedSegments()
    cache = tmp_path / "cache"
    count = parse_query({"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
                         "intervals": ["2015-09-01/2015-09-10"],
                         "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}]})  # fmt: skip

    def answer() -> int:
        return int(run_to_json(count, served.inputs_for_intervals(count))[0]["result"]["n"])

    def path(segment: DataSegment) -> str:
        return str(cache / segment.id / "index.parquet")

    async def scenario() -> None:
        loader = SegmentLoader(cache, deep)
        loop = ControlLoop(name="h:1", metadata=used, loader=loader, announcer=ChangeHistory(), served=served,
                           cluster=StaticClusterView({"h:1"}), metrics=HistoricalMetrics(), replicas=1)  # fmt: skip
        try:
            used.segments = segments
            await loop.run_once()
            assert all(mapped_source.mapped(path(s)) is not None for s in segments)
            assert answer() == 20 + 21 + 22
            used.segments = segments[1:]
            await loop.run_once()
            assert mapped_source.mapped(path(segments[0])) is None
            assert not (cache / segments[0].id).exists()
            assert answer() == 21 + 22
            used.segments = segments
            await loop.run_once()
            assert mapped_source.mapped(path(segments[0])) is not None
            assert answer() == 20 + 21 + 22
        finally:
            loader.close()
            for s in segments:
                mapped_source.unregister(path(s))

    asyncio.run(scenario())
