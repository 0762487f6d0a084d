"""How a large selection is cut into native scans: time order, growth, overlapping versions."""

from __future__ import annotations

import itertools

from strata_sql.scan_chunks import chunk_query, scan_chunks
from timeline import Interval

HOUR = 3_600_000


def hours(n: int, start: int = 0) -> list[Interval]:
    return [Interval((start + h) * HOUR, (start + h + 1) * HOUR) for h in range(n)]


def spans(chunks: list[list[str]]) -> list[tuple[int, int]]:
    out = []
    for chunk in chunks:
        parsed = [Interval.parse(i) for i in chunk]
        out.append((min(i.start for i in parsed) // HOUR, max(i.end for i in parsed) // HOUR))
    return out


def test_chunks_grow_then_cap_and_cover_the_query_once() -> None:
    chunks = scan_chunks(["1970-01-01T00:00:00Z/1970-01-02T00:00:00Z"], hours(24), per_chunk=8)
    assert spans(chunks) == [(0, 1), (1, 3), (3, 7), (7, 15), (15, 23), (23, 24)]


def test_partitions_of_one_interval_count_as_segments() -> None:
    chunks = scan_chunks(["1970-01-01T00:00:00Z/1970-01-01T04:00:00Z"], hours(4) * 4, per_chunk=8)
    # 4 partitions per hour: 1 hour, then 2 hours (8 segments), then 1 hour
    assert spans(chunks) == [(0, 1), (1, 3), (3, 4)]


def test_query_intervals_clip_and_descending_reverses() -> None:
    query = ["1970-01-01T02:30:00Z/1970-01-01T05:00:00Z", "1970-01-01T01:00:00Z/1970-01-01T03:00:00Z"]
    chunks = scan_chunks(query, hours(10), per_chunk=2)
    assert chunks == [
        ["1970-01-01T01:00:00.000Z/1970-01-01T02:00:00.000Z"],
        ["1970-01-01T02:00:00.000Z/1970-01-01T04:00:00.000Z"],
        ["1970-01-01T04:00:00.000Z/1970-01-01T05:00:00.000Z"],
    ]
    assert scan_chunks(query, hours(10), per_chunk=2, descending=True) == chunks[::-1]


def test_overlapping_versions_and_gaps() -> None:
    day = Interval(0, 24 * HOUR)  # an older DAY segment under newer hourly ones
    chunks = scan_chunks(
        ["1970-01-01T00:00:00Z/1970-01-03T00:00:00Z"], [day, *hours(3), *hours(2, 30)], per_chunk=4
    )
    covered = sorted(Interval.parse(i) for c in chunks for i in c)
    assert covered[0].start == 0 and any(i.end == 24 * HOUR for i in covered)
    assert all(a.end <= b.start for a, b in itertools.pairwise(covered))  # disjoint
    assert spans(chunks)[-1][1] == 32


def test_chunk_query_moves_offset_out_and_sets_the_limit() -> None:
    native = {"queryType": "scan", "intervals": ["x"], "limit": 10, "offset": 5}
    assert chunk_query(native, ["a"], 15) == {"queryType": "scan", "intervals": ["a"], "limit": 15}
    assert "limit" not in chunk_query(native, ["a"], None)
