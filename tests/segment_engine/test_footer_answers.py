"""Timeseries count/min/max answered from Parquet footers equal DuckDB over the raw rows.

The oracle is hand-written DuckDB SQL over the rows the segments were written from. Each case
also checks whether the footers answered (the engine's counter), and one case proves it by
clobbering every data page of the files: footers still answer, a scan would fail.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.engine import SegmentInput, run_merged, run_partials, run_to_json
from strata.engine.footer_answers import ANSWERED, row_facts
from strata.query import parse_query
from tests.query.segment_fixtures import clip, write_segments
from timeline import Interval, RowFacts, format_instant

START = 1_577_836_800_000  # 2020-01-01
HOUR = 3_600_000
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"


def sorted_times(rng: np.random.Generator, hours: range, n: int) -> pa.Array:
    millis = START + hours.start * HOUR + rng.integers(0, len(hours) * HOUR, n)
    return pa.array(np.sort(millis), pa.int64()).cast(pa.timestamp("ms", tz="UTC"))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, list[SegmentInput]]:
    """Four hours with `bytes` (nulls, one row group all-null), then one hour without `bytes`."""
    rng = np.random.default_rng(11)
    n = 400
    bytes_ = rng.integers(-50, 1000, n)
    main = pa.table(
        {
            "__time": sorted_times(rng, range(4), n),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 4, n)]),
            "bytes": pa.array(bytes_, pa.int64(), mask=rng.random(n) < 0.1),
            "small": pa.array(rng.integers(-3, 3, n), pa.int32()),
            "allnull": pa.nulls(n, pa.int64()),
            "latency": pa.array(np.where(rng.random(n) < 0.05, np.nan, rng.random(n))),
        }
    )
    out = tmp_path_factory.mktemp("footers")
    inputs = write_segments(main, out, "hour", data_source="t", dimensions=["country"])
    # the second hour again, in row groups of 5 whose first ones hold only null `bytes`
    second = pq.read_table(inputs[1].path)
    masked = pa.array([None] * 12 + second.column("bytes").to_pylist()[12:], pa.int64())
    second = second.set_column(second.schema.get_field_index("bytes"), "bytes", masked)
    pq.write_table(second, inputs[1].path, row_group_size=5)
    assert pq.read_metadata(inputs[1].path).row_group(0).column(2).statistics.has_min_max is False
    m = 50
    other = pa.table(
        {
            "__time": sorted_times(rng, range(5, 6), m),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 4, m)]),
            "small": pa.array(rng.integers(-9, 9, m), pa.int32()),
            "allnull": pa.nulls(m, pa.int64()),
            "latency": pa.array(rng.random(m)),
        }
    )
    inputs += write_segments(other, out, "hour", data_source="t", dimensions=["country"])
    raw = pa.concat_tables([pq.read_table(i.path) for i in inputs], promote_options="permissive")
    return raw, inputs


AGGS = [
    {"type": "count", "name": "rows"},
    {"type": "longMin", "name": "lo", "fieldName": "bytes"},
    {"type": "longMax", "name": "hi", "fieldName": "bytes"},
    {"type": "doubleMax", "name": "dhi", "fieldName": "bytes"},
    {"type": "longMin", "name": "slo", "fieldName": "small"},
    {"type": "longMin", "name": "first", "fieldName": "__time"},
    {"type": "longMax", "name": "last", "fieldName": "__time"},
    {"type": "doubleMin", "name": "dfirst", "fieldName": "__time"},
    {"type": "longMax", "name": "none", "fieldName": "allnull"},
    {"type": "longMin", "name": "missing", "fieldName": "nothere"},
]
ORACLE_SQL = (
    "count(*), min(bytes), max(bytes), CAST(max(bytes) AS DOUBLE), min(small), min(epoch_ms(__time)), "
    "max(epoch_ms(__time)), CAST(min(epoch_ms(__time)) AS DOUBLE), max(allnull), NULL"
)


def query(interval: str, granularity: str = "all", **extra: Any) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": "t", "intervals": [interval],
            "granularity": granularity, "aggregations": AGGS, **extra}  # fmt: skip


def oracle(raw: pa.Table, interval: Interval, where: str = "true", hourly: bool = False) -> list[list[Any]]:
    """[bucket or None, aggregates...] per hour with rows (or one row overall), from raw rows."""
    conn = duckdb.connect()
    conn.register("raw", raw)
    bucket = f"epoch_ms(__time) // {HOUR} * {HOUR}" if hourly else "NULL"
    sql = (
        f"SELECT {bucket} AS b, {ORACLE_SQL} FROM raw WHERE epoch_ms(__time) >= {interval.start} "
        f"AND epoch_ms(__time) < {interval.end} AND {where} GROUP BY ALL ORDER BY 1"
    )
    return [list(r) for r in conn.execute(sql).fetchall()]


def sql_value(raw: pa.Table, expr: str) -> Any:
    conn = duckdb.connect()
    conn.register("raw", raw)
    row = conn.execute(f"SELECT {expr} FROM raw").fetchone()
    assert row is not None
    return row[0]


def strata(rows: list[dict[str, Any]], hourly: bool) -> list[list[Any]]:
    from timeline import parse_instant

    names = [a["name"] for a in AGGS]
    return [
        [parse_instant(r["timestamp"]) if hourly else None, *[r["result"][n] for n in names]] for r in rows
    ]


def both_paths(q: dict[str, Any], inputs: list[SegmentInput]) -> Iterator[list[dict[str, Any]]]:
    """The data node's own answer, and a broker's (per-segment partials merged, then finalised)."""
    parsed = parse_query(q)
    yield run_to_json(parsed, inputs)
    yield parsed.finalize(parsed.merge([run_partials(parsed, inputs)]))


@pytest.mark.parametrize("granularity", ["all", "hour"])
def test_whole_segments_come_from_footers(
    data: tuple[pa.Table, list[SegmentInput]], granularity: str
) -> None:
    raw, inputs = data
    hourly = granularity == "hour"
    want = oracle(raw, Interval(-(2**62), 2**62), hourly=hourly)
    before = ANSWERED.segments
    for rows in both_paths(query(ETERNITY, granularity), inputs):
        assert strata(rows, hourly) == want
    assert ANSWERED.segments - before == 2 * len(inputs)  # every segment, on both paths


def test_all_granularity_timestamp_is_first_row(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    raw, inputs = data
    rows = run_to_json(parse_query(query(ETERNITY)), inputs)
    assert rows[0]["timestamp"] == format_instant(sql_value(raw, "min(epoch_ms(__time))"))


def test_filtered_query_scans(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    raw, inputs = data
    flt = {"type": "selector", "dimension": "country", "value": "c1"}
    want = oracle(raw, Interval(-(2**62), 2**62), where="country = 'c1'")
    before = ANSWERED.segments
    for rows in both_paths(query(ETERNITY, filter=flt), inputs):
        assert strata(rows, False) == want
    assert ANSWERED.segments == before


def test_partly_read_segments_scan(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    raw, inputs = data
    part = Interval(START + HOUR // 3, START + 5 * HOUR + HOUR // 2)  # cuts the first and last
    clipped = clip(inputs, part)
    interval = f"{format_instant(part.start)}/{format_instant(part.end)}"
    for granularity in ("all", "hour"):
        hourly = granularity == "hour"
        want = oracle(raw, part, hourly=hourly)
        before = ANSWERED.segments
        for rows in both_paths(query(interval, granularity, context={"skipEmptyBuckets": True}), clipped):
            got = strata(rows, hourly)
            assert [r[1:] for r in got] == [r[1:] for r in want]
            if hourly:
                assert [r[0] for r in got] == [r[0] for r in want]
        assert ANSWERED.segments - before == 2 * (len(clipped) - 2)  # the middle ones, on both paths


def test_floating_columns_scan(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    """Statistics skip NaN, which max returns: a double column is never read from the footer."""
    raw, inputs = data
    q = {**query(ETERNITY), "aggregations": [{"type": "doubleMax", "name": "m", "fieldName": "latency"}]}
    before = ANSWERED.segments
    got = run_to_json(parse_query(q), inputs)[0]["result"]["m"]
    assert ANSWERED.segments == before
    assert got == "NaN" and np.isnan(sql_value(raw, "max(latency)"))


def test_segment_read_twice_scans(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    """Under two query intervals a segment's rows are read per interval, as a scan does."""
    _, inputs = data
    first = inputs[0]
    twice = [first, SegmentInput(first.segment_id, first.descriptor, first.path, first.interval)]
    parsed = parse_query(query(ETERNITY))
    before = ANSWERED.segments
    merged = run_merged(parsed, twice)
    assert ANSWERED.segments == before
    assert merged.column("a0").to_pylist() == [2 * pq.read_metadata(first.path).num_rows]


def _clobber_data_pages(path: str) -> None:
    """Zero everything between the magic bytes and the footer: any data page read now fails."""
    blob = bytearray(Path(path).read_bytes())
    footer_len = int.from_bytes(blob[-8:-4], "little")
    end = len(blob) - 8 - footer_len
    blob[4:end] = bytes(end - 4)
    Path(path).write_bytes(bytes(blob))


def test_footers_answer_without_reading_a_data_page(
    data: tuple[pa.Table, list[SegmentInput]], tmp_path: Path
) -> None:
    raw, inputs = data
    copies = []
    for i, inp in enumerate(inputs):
        path = tmp_path / f"{i}.parquet"
        shutil.copy(inp.path, path)
        _clobber_data_pages(str(path))
        copies.append(SegmentInput(inp.segment_id, inp.descriptor, str(path), inp.interval))
    want = oracle(raw, Interval(-(2**62), 2**62))
    for rows in both_paths(query(ETERNITY), copies):
        assert strata(rows, False) == want
    summed = {**query(ETERNITY), "aggregations": [{"type": "longSum", "name": "s", "fieldName": "bytes"}]}
    with pytest.raises(duckdb.Error):  # the scan meets a corrupt page
        run_to_json(parse_query(summed), copies)


def test_footer_parsed_once(
    data: tuple[pa.Table, list[SegmentInput]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, inputs = data
    parsed = parse_query(query(ETERNITY))
    first = run_to_json(parsed, inputs)

    def no_io(*_: Any, **__: Any) -> None:
        raise AssertionError("footer read again")

    monkeypatch.setattr("strata.engine.footer.pq.read_metadata", no_io)
    assert run_to_json(parsed, inputs) == first


def test_announced_row_facts_are_the_files_row_count_and_time_span(
    data: tuple[pa.Table, list[SegmentInput]], tmp_path: Path
) -> None:
    """What a historical announces: checked against the rows themselves, read whole."""
    for inp in data[1]:
        times = pq.read_table(inp.path).column("__time").cast(pa.int64()).to_pylist()
        assert row_facts(inp.path) == RowFacts(len(times), (min(times), max(times)))
    table = pq.read_table(data[1][0].path)
    pq.write_table(table, tmp_path / "nostats.parquet", write_statistics=False)
    assert row_facts(str(tmp_path / "nostats.parquet")) is None  # unknown: never guessed
    pq.write_table(table.slice(0, 0), tmp_path / "empty.parquet")
    assert row_facts(str(tmp_path / "empty.parquet")) == RowFacts(0, None)
    assert row_facts(str(tmp_path / "absent.parquet")) is None
