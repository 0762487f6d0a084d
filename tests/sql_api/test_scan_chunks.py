"""How a large selection is cut into native scans: time order, growth, overlapping versions."""

from __future__ import annotations

import itertools
import random

from strata.sql.scan_chunks import chunk_query, scan_chunks
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


def test_known_rows_bound_each_chunk() -> None:
    """Segments of 30,000 rows under a 50,000-row bound: one per chunk; of 10,000: the segment
    growth as before (1, 2, 4); unknown rows count as nothing; a segment larger than the bound
    still makes a chunk of its own."""
    day = ["1970-01-01T00:00:00Z/1970-01-02T00:00:00Z"]
    big = [(iv, 30_000) for iv in hours(4)]
    assert spans(scan_chunks(day, big, rows_per_chunk=50_000)) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    small = [(iv, 10_000) for iv in hours(7)]
    assert spans(scan_chunks(day, small, rows_per_chunk=50_000)) == [(0, 1), (1, 3), (3, 7)]
    assert scan_chunks(day, [(iv, None) for iv in hours(7)]) == scan_chunks(day, hours(7))
    huge = [(iv, 1_000_000) for iv in hours(2)]
    assert spans(scan_chunks(day, huge, rows_per_chunk=50_000)) == [(0, 1), (1, 2)]


def test_every_chunk_holds_at_most_the_bound_unless_one_piece_is_larger() -> None:
    rng = random.Random(5)
    for _ in range(200):
        rows = [rng.choice([None, 0, 5, 20_000, 60_000]) for _ in range(rng.randint(1, 30))]
        segments = list(zip(hours(len(rows)), rows, strict=True))
        chunks = scan_chunks(["1970-01-01T00:00:00Z/1970-01-03T00:00:00Z"], segments, rows_per_chunk=50_000)
        seen = []
        for start, end in spans(chunks):
            held = [r or 0 for r in rows[start:end]]
            assert sum(held) <= 50_000 or len(held) == 1
            seen += list(range(start, end))
        assert seen == list(range(len(rows)))  # every segment once, in time order
