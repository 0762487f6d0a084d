"""Splitting a large SQL selection into native scans over a few segments each, in time order.

A `SELECT` that reads rows (not aggregates) can be as large as the datasource. The broker answers
it as consecutive scans over a few segments' time ranges and writes each chunk's rows before asking
for the next, so the broker holds one chunk at a time. Chunks grow 1, 2, 4, ... up to
`SEGMENTS_PER_CHUNK` segments, so the first rows leave after one segment's scan.
Time ranges follow the segments' intervals, so chunks in time order keep `ORDER BY __time`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from timeline import Interval, condense_intervals

SEGMENTS_PER_CHUNK = 4


def scan_chunks(
    query_intervals: Sequence[str],
    segment_intervals: Iterable[Interval],
    *,
    descending: bool = False,
    per_chunk: int = SEGMENTS_PER_CHUNK,
) -> list[list[str]]:
    """The query's intervals cut into groups holding about `per_chunk` segments each."""
    wanted = condense_intervals(Interval.parse(i) for i in query_intervals)
    counts: dict[Interval, int] = {}
    for seg in segment_intervals:
        for q in wanted:
            piece = seg.overlap(q)
            if piece is not None:
                counts[piece] = counts.get(piece, 0) + 1
    chunks: list[list[Interval]] = []
    size = limit = 0  # the first piece opens the first chunk
    for piece, weight in _disjoint(counts):
        if not chunks or (size + weight > limit and chunks[-1]):
            limit = min(per_chunk, max(1, 2 * size))  # twice what the last chunk held
            chunks.append([])
            size = 0
        chunks[-1].append(piece)
        size += weight
    out = [[str(iv) for iv in condense_intervals(c)] for c in chunks if c]
    return out[::-1] if descending else out


def _disjoint(counts: dict[Interval, int]) -> list[tuple[Interval, int]]:
    """Overlapping pieces (segments of several versions) cut at every boundary, each with the
    number of segments covering it (a sweep over the boundaries)."""
    delta: dict[int, int] = {}
    for iv, n in counts.items():
        delta[iv.start] = delta.get(iv.start, 0) + n
        delta[iv.end] = delta.get(iv.end, 0) - n
    out: list[tuple[Interval, int]] = []
    active = 0
    points = sorted(delta)
    for a, b in itertools.pairwise(points):
        active += delta[a]
        if active > 0:
            out.append((Interval(a, b), active))
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
