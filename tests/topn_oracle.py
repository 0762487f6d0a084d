"""Druid's approximate topN in plain Python, written apart from the engine: each segment's values
fed, in dictionary order, to a heap as Druid's `TopNNumericResultBuilder` keeps it; the kept parts
summed over every segment, ranked again (metric descending, ties by value) and cut to the threshold.

Druid also re-cuts each pairwise merge to `max(threshold, minTopNThreshold)` (`TopNBinaryFn`), in
whatever order results arrive; that step depends on the replica layout and is not modelled (nor
done by Strata: docs/query-api.md, "topN across segments").
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Parts = Mapping[str | None, Sequence[float]]  # value -> its aggregates in one segment


def rank_value(x: float | None) -> float:
    """A metric as the heap compares it: null and NaN lowest (as Strata ranks them)."""
    return -math.inf if x is None or x != x else float(x)


def segment_cut(parts: Parts, metric: int, keep: int) -> dict[str | None, Sequence[float]]:
    """The values Druid's engine keeps of one segment: fed in dictionary order (null first, then
    ascending), a value joins while the heap holds fewer than `keep` or when its metric beats the
    heap's worst strictly; past `keep` the worst (lowest metric, then smallest value) leaves."""
    heap: list[tuple[float, tuple[int, str], str | None]] = []
    for value in sorted(parts, key=lambda v: (v is not None, v or "")):
        m = rank_value(parts[value][metric])
        if len(heap) < keep or heap[0][0] < m:
            heapq.heappush(heap, (m, (value is not None, value or ""), value))
            if len(heap) > keep:
                heapq.heappop(heap)
    return {value: parts[value] for _, _, value in heap}


def summed(cuts: Iterable[Mapping[str | None, Sequence[float]]]) -> dict[str | None, list[float]]:
    out: dict[str | None, list[float]] = {}
    for cut in cuts:
        for value, aggs in cut.items():
            got = out.setdefault(value, [0.0] * len(aggs))
            for i, a in enumerate(aggs):
                got[i] += a
    return out


def ranked(sums: Mapping[str | None, Sequence[float]], metric: int) -> list[tuple[Any, ...]]:
    """(value, *aggregates), best first: metric descending, ties by value (null first)."""
    rows = [(v, *aggs) for v, aggs in sums.items()]
    return sorted(rows, key=lambda r: (-rank_value(r[1 + metric]), r[0] is not None, r[0] or ""))


def druid_topn(
    segments: Iterable[Parts], metric: int, threshold: int, min_topn: int = 1000
) -> list[tuple[Any, ...]]:
    """The answer: every segment cut at max(threshold, min_topn), summed, best `threshold`."""
    keep = max(threshold, min_topn)
    return ranked(summed(segment_cut(p, metric, keep) for p in segments), metric)[:threshold]
