"""Splitting a large SQL selection into native scans over a few segments each, in time order.

A `SELECT` that reads rows (not aggregates) can be as large as the datasource. The broker answers
it as consecutive scans over a few segments' time ranges and writes each chunk's rows before asking
for the next, so the broker holds one chunk at a time. Chunks grow 1, 2, 4, ... up to
`SEGMENTS_PER_CHUNK` segments, so the first rows leave after one segment's scan, and hold no more
than `ROWS_PER_CHUNK` rows where the segments' row counts are known (a chunk still holds at least
one piece of time, however many rows its segments have): what the broker holds is bounded in rows.
Time ranges follow the segments' intervals, so chunks in time order keep `ORDER BY __time`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from timeline import Interval, condense_intervals

SEGMENTS_PER_CHUNK = 4
ROWS_PER_CHUNK = 50_000


def scan_chunks(
    query_intervals: Sequence[str],
    segments: Iterable[Interval | tuple[Interval, int | None]],
    *,
    descending: bool = False,
    per_chunk: int = SEGMENTS_PER_CHUNK,
    rows_per_chunk: int = ROWS_PER_CHUNK,
) -> list[list[str]]:
    """The query's intervals cut into groups holding about `per_chunk` segments and at most about
    `rows_per_chunk` rows each. `segments`: intervals, or (interval, rows) where rows are known."""
    wanted = condense_intervals(Interval.parse(i) for i in query_intervals)
    counts: dict[Interval, tuple[int, int]] = {}
    for seg in segments:
        interval, rows = seg if isinstance(seg, tuple) else (seg, None)
        for q in wanted:
            piece = interval.overlap(q)
            if piece is not None:
                n, r = counts.get(piece, (0, 0))
                counts[piece] = (n + 1, r + (rows or 0))
    chunks: list[list[Interval]] = []
    size = rows = limit = 0  # the first piece opens the first chunk
    for piece, (weight, weight_rows) in _disjoint(counts):
        full = size + weight > limit or rows + weight_rows > rows_per_chunk
        if not chunks or (full and chunks[-1]):
            limit = min(per_chunk, max(1, 2 * size))  # twice what the last chunk held
            chunks.append([])
            size = rows = 0
        chunks[-1].append(piece)
        size += weight
        rows += weight_rows
    out = [[str(iv) for iv in condense_intervals(c)] for c in chunks if c]
    return out[::-1] if descending else out


def _disjoint(counts: dict[Interval, tuple[int, int]]) -> list[tuple[Interval, tuple[int, int]]]:
    """Overlapping pieces (segments of several versions) cut at every boundary, each with the
    number of segments covering it and their rows (a sweep over the boundaries)."""
    delta: dict[int, tuple[int, int]] = {}
    for iv, (n, r) in counts.items():
        a, b = delta.get(iv.start, (0, 0))
        delta[iv.start] = (a + n, b + r)
        a, b = delta.get(iv.end, (0, 0))
        delta[iv.end] = (a - n, b - r)
    out: list[tuple[Interval, tuple[int, int]]] = []
    active = active_rows = 0
    points = sorted(delta)
    for a, b in itertools.pairwise(points):
        active += delta[a][0]
        active_rows += delta[a][1]
        if active > 0:
            out.append((Interval(a, b), (active, active_rows)))
    return out


def chunk_query(native: dict[str, Any], intervals: list[str], limit: int | None) -> dict[str, Any]:
    """The native scan for one chunk: its intervals, and at most `limit` rows (None: all)."""
    out = {**native, "intervals": intervals}
    out.pop("offset", None)
    if limit is None:
        out.pop("limit", None)
    else:
        out["limit"] = limit
    return out
