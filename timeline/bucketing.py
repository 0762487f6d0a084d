"""Vectorised bucketing for granularities whose rule is only available as a scalar function.

Calendar granularities in a time zone (days, weeks, months... across DST) have no closed numpy
form, but their bucket start is a monotone step function of time. So the data's time span is
cut into runs of constant bucket start by walking the buckets once: a few scalar calls per
bucket, not per row. Each run's end is checked with the scalar rule itself (and bisected when the
calendar step overshoots, e.g. a midnight that falls in a DST gap), so the result equals the
scalar `bucket_start` exactly. Rows are then mapped with one numpy gather or searchsorted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

BLOCK_MS = 900_000  # zone offsets in use since ~1900 are multiples of 15 minutes
_MAX_TABLE_BLOCKS = 4_000_000  # ~114 years of 15-minute blocks in a lookup table
_DENSE_WALK_BUCKETS = 200_000  # beyond this (or the row count) walk only the occupied buckets

StartOf = Callable[[int], int]


def bucket_starts_by_runs(
    times: npt.NDArray[np.int64], start_of: StartOf, next_start: StartOf
) -> npt.NDArray[np.int64]:
    """`start_of` applied to every element of the int64 array `times`.

    `start_of(t)` must be monotone non-decreasing; `next_start(s)` is a guess of the bucket after
    the one starting at `s` (the period added to it), verified before it is trusted.
    """
    lo, hi = int(times.min()), int(times.max())
    first = start_of(lo)
    step = max(1, next_start(first) - first)
    if (hi - lo) // step <= min(_DENSE_WALK_BUCKETS, times.size):
        lo_aligned = lo // BLOCK_MS * BLOCK_MS
        xs, vs = _walk(start_of, next_start, lo_aligned, hi, occupied=None)
        if (hi // BLOCK_MS - lo // BLOCK_MS) < _MAX_TABLE_BLOCKS and all(x % BLOCK_MS == 0 for x in xs):
            # one table entry per 15-minute block of the span, then a plain gather
            first_block = lo_aligned // BLOCK_MS
            n_blocks = hi // BLOCK_MS - first_block + 1
            run_blocks = np.asarray(xs, dtype=np.int64) // BLOCK_MS - first_block
            lengths = np.diff(np.append(run_blocks, n_blocks))
            table = np.repeat(np.asarray(vs, dtype=np.int64), lengths)
            return table[times // BLOCK_MS - first_block]
    else:
        xs, vs = _walk(start_of, next_start, lo, hi, occupied=np.unique(times))
    run = np.searchsorted(np.asarray(xs, dtype=np.int64), times, side="right") - 1
    return np.asarray(vs, dtype=np.int64)[run]


def _walk(
    start_of: StartOf, next_start: StartOf, lo: int, hi: int, occupied: np.ndarray | None
) -> tuple[list[int], list[int]]:
    """Runs covering [lo, hi]: run i is [xs[i], xs[i+1]) and every instant in it maps to vs[i].

    With `occupied` (sorted distinct times) the walk jumps over stretches holding no data, so a
    sparse span costs per occupied bucket; those stretches then map to the run before them.
    """
    xs: list[int] = []
    vs: list[int] = []
    x = lo
    while x <= hi:
        s = start_of(x)
        xs.append(x)
        vs.append(s)
        x = exact_bucket_end(start_of, next_start, x, s)
        if occupied is not None:
            i = int(np.searchsorted(occupied, x))
            if i == occupied.size:
                break
            x = max(x, int(occupied[i]))
    return xs, vs


def exact_bucket_end(start_of: StartOf, next_start: StartOf, x: int, s: int) -> int:
    """First instant after `x` whose bucket start differs from `s` (= start_of(x)).

    The period added to `s` is right almost always; it is verified on both sides because a
    calendar step can overshoot (a midnight in a DST gap) or undershoot (a month clamped to a
    shorter one when counting from an origin on the 31st).
    """
    end = next_start(s)
    if end <= x:
        return _probe_end(start_of, s, x)
    if start_of(end - 1) != s:
        return _first_change(start_of, s, x + 1, end - 1)
    if start_of(end) == s:
        return _probe_end(start_of, s, end)
    return end


def _first_change(start_of: StartOf, s: int, a: int, b: int) -> int:
    """Smallest t in [a, b] with start_of(t) != s, given start_of(b) != s (monotone bisection)."""
    while a < b:
        mid = (a + b) // 2
        if start_of(mid) != s:
            b = mid
        else:
            a = mid + 1
    return a


def _probe_end(start_of: StartOf, s: int, x: int) -> int:
    """End of the bucket holding x when the period guess fell short: doubling probes, then bisect."""
    width = 1
    while start_of(x + width) == s:
        width *= 2
    return _first_change(start_of, s, x + 1, x + width)


_OFFSET_SAMPLE_MS = 6 * 3_600_000  # zone rules never change offset twice within six hours


def zone_offsets(times: npt.NDArray[np.int64], offset_at: StartOf) -> npt.NDArray[np.int64]:
    """`offset_at` (a zone's UTC offset in ms) for every element of `times`, vectorised.

    The offset is sampled every six hours over the span and each change is bisected to its exact
    transition instant, so the cost grows with the span, not the row count.
    """
    lo, hi = int(times.min()), int(times.max())
    if (hi - lo) // _OFFSET_SAMPLE_MS > times.size:  # few rows over a long span: ask per row
        return np.fromiter((offset_at(int(t)) for t in times), np.int64, times.size)
    bounds, values = [lo], [offset_at(lo)]
    prev = lo
    first = lo - lo % _OFFSET_SAMPLE_MS + _OFFSET_SAMPLE_MS
    for sample in range(first, hi + _OFFSET_SAMPLE_MS, _OFFSET_SAMPLE_MS):
        at = min(sample, hi)
        if offset_at(at) != values[-1]:
            a, b = prev + 1, at  # first instant after prev whose offset differs
            while a < b:
                mid = (a + b) // 2
                if offset_at(mid) != values[-1]:
                    b = mid
                else:
                    a = mid + 1
            bounds.append(a)
            values.append(offset_at(a))
        prev = at
    run = np.searchsorted(np.asarray(bounds, dtype=np.int64), times, side="right") - 1
    return np.asarray(values, dtype=np.int64)[run]
