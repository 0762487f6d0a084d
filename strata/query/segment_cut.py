"""Which rows Druid's topN engine keeps of one segment: its cut, ties included, vectorised.

Druid feeds a segment's values to `TopNNumericResultBuilder` in dictionary order
(`PooledTopNAlgorithm.updateResults` walks dictionary ids; a persisted segment's dictionary is
sorted, null first), into a heap of `keep` ordered worst first by (metric, value). A value joins
while the heap has room or when its metric beats the heap's worst strictly; past `keep` the worst
leaves (lowest metric, then smallest value). So every value better than the keep-th best metric
stays, and of those tied with it: the ones among the first `keep` of the better-or-tied values in
dictionary order join, and better values arriving later push out the smallest of them. What stays
of the ties is the largest of those that joined, as many as there is room for.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_LOOPED_GROUPS = 2048  # up to this many groups, each group's cut is found by a partition of its own


def segment_cut(groups: np.ndarray, rank: np.ndarray, order: np.ndarray, keep: int) -> npt.NDArray[np.bool_]:
    """Mask of the rows Druid keeps: `groups` labels each row's (segment, bucket) (integers),
    `rank` its metric as an ascending key (best first), `order` its value's dictionary order
    (ascending integers, distinct within a group)."""
    n = len(rank)
    if n == 0:
        return np.zeros(0, bool)
    by_group = np.argsort(groups, kind="stable")  # a radix sort of integer labels
    sorted_groups = groups[by_group]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    sizes = np.diff(np.r_[starts, n])
    group = np.empty(n, np.intp)
    group[by_group] = np.repeat(np.arange(len(starts)), sizes)
    cut = _keepth_best(rank[by_group], starts, sizes, keep)[group]
    better, tied = rank < cut, rank == cut
    room = keep - np.bincount(group, weights=better, minlength=len(starts)).astype(np.int64)
    # the better-or-tied values in dictionary order: ties among the first `keep` of them joined
    contenders = np.flatnonzero(better | tied)
    walk = contenders[np.lexsort((order[contenders], group[contenders]))]
    walked_group = group[walk]
    first = np.flatnonzero(np.r_[True, walked_group[1:] != walked_group[:-1]])
    lengths = np.diff(np.r_[first, len(walk)])
    position = np.arange(len(walk)) - np.repeat(first, lengths)
    joined = tied[walk] & (position < keep)
    # of those, the largest stay: count the joined ties after each one in its group
    joined_count = np.cumsum(joined)
    group_total = np.add.reduceat(joined.astype(np.int64), first)
    before_group = joined_count[first] - joined[first]
    after = np.repeat(group_total + before_group, lengths) - joined_count
    kept = better.copy()
    kept[walk[joined & (after < room[walked_group])]] = True
    return kept


def _keepth_best(grouped_rank: np.ndarray, starts: np.ndarray, sizes: np.ndarray, keep: int) -> np.ndarray:
    """Each group's keep-th best rank (its worst, where it holds fewer rows), for `grouped_rank`
    laid out group after group: a partition per group where groups are few, else one sort."""
    if len(starts) <= _LOOPED_GROUPS:
        return np.array(
            [
                part.max() if len(part) <= keep else np.partition(part, keep - 1)[keep - 1]
                for part in np.split(grouped_rank, starts[1:])
            ],
            grouped_rank.dtype,
        )
    labels = np.repeat(np.arange(len(starts)), sizes)
    ranked: np.ndarray = grouped_rank[np.lexsort((grouped_rank, labels))]
    return np.asarray(ranked[starts + np.minimum(sizes, keep) - 1])
