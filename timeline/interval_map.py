"""A map from intervals to values, sorted by (start, end), held in blocks of a few hundred rows.

A timeline keeps one per datasource and visible map, with a million segments' intervals across
them: one flat sorted list moves half its length on every insert (absorbing a million segments
grew with their square), a list of blocks moves a block. Each block is two parallel lists (the
starts, for bisecting on plain integers, and the rows) rather than an object per row, since a
broker holds a row per segment in three such maps. `sortedcontainers` keeps one sequence per
list of blocks; this keeps starts and rows side by side, with no tuple or object per row.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Generic, TypeVar

from timeline.interval import Interval

V = TypeVar("V")

_LOAD = 512  # a block is split in halves beyond twice this many rows


class IntervalMap(Generic[V]):
    __slots__ = ("_firsts", "_keys", "_len", "_starts", "_values")

    def __init__(self) -> None:
        self._firsts: list[int] = []  # each block's first start, for finding a block
        self._starts: list[list[int]] = []
        self._keys: list[list[Interval]] = []
        self._values: list[list[V]] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    # -- positions: (block, row) -----------------------------------------------------------------
    def _position(self, key: Interval) -> tuple[int, int]:
        """Where `key` is or would go: the first row not ordered before it. Found in the last
        block whose first start is before `key`'s; rows of equal starts (ordered by end) may
        straddle blocks, and only then is there a walk."""
        firsts = self._firsts
        if not firsts:
            return 0, 0
        start = key.start
        b = max(bisect.bisect_left(firsts, start) - 1, 0)
        starts = self._starts[b]
        j = bisect.bisect_left(starts, start)
        if j < len(starts):
            if starts[j] > start:
                return b, j
        elif b + 1 == len(firsts) or firsts[b + 1] > start:
            return b, j
        while True:  # rows starting where `key` does: ordered by their ends
            keys = self._keys[b]
            while j < len(keys) and keys[j].start == start and keys[j].end < key.end:
                j += 1
            if j < len(keys) or b + 1 == len(firsts) or firsts[b + 1] > start:
                return b, j
            b, j = b + 1, 0

    def _found(self, key: Interval) -> tuple[int, int] | None:
        b, j = self._position(key)
        if b < len(self._keys) and j < len(self._keys[b]) and self._keys[b][j] == key:
            return b, j
        return None

    # -- map --------------------------------------------------------------------------------------
    def get(self, key: Interval) -> V | None:
        at = self._found(key)
        return None if at is None else self._values[at[0]][at[1]]

    def __contains__(self, key: Interval) -> bool:
        return self._found(key) is not None

    def set(self, key: Interval, value: V) -> None:
        b, j = self._position(key)
        if not self._starts:
            self._firsts.append(key.start)
            self._starts.append([key.start])
            self._keys.append([key])
            self._values.append([value])
            self._len = 1
            return
        keys = self._keys[b]
        if j < len(keys) and keys[j] == key:
            self._values[b][j] = value
            return
        self._starts[b].insert(j, key.start)
        keys.insert(j, key)
        self._values[b].insert(j, value)
        self._len += 1
        if j == 0:
            self._firsts[b] = key.start
        if len(keys) > 2 * _LOAD:
            self._split(b)

    def _split(self, b: int) -> None:
        for column in (self._starts, self._keys, self._values):
            block = column[b]
            column.insert(b + 1, block[_LOAD:])  # type: ignore[arg-type]
            del block[_LOAD:]
        self._firsts.insert(b + 1, self._starts[b + 1][0])

    def pop(self, key: Interval) -> V | None:
        at = self._found(key)
        if at is None:
            return None
        b, j = at
        del self._starts[b][j], self._keys[b][j]
        value = self._values[b].pop(j)
        self._len -= 1
        if not self._starts[b]:
            del self._firsts[b], self._starts[b], self._keys[b], self._values[b]
        elif j == 0:
            self._firsts[b] = self._starts[b][0]
        return value

    # -- order ------------------------------------------------------------------------------------
    def lower_key(self, key: Interval) -> Interval | None:
        """The greatest key ordered before `key`."""
        return self.around(key)[1]

    def higher_key(self, key: Interval) -> Interval | None:
        """The least key ordered after `key`."""
        return self.around(key)[2]

    def around(self, key: Interval) -> tuple[V | None, Interval | None, Interval | None]:
        """`key`'s value, the key before it and the key after it, in one search."""
        b, j = self._position(key)
        keys = self._keys
        lower = keys[b][j - 1] if j > 0 else (keys[b - 1][-1] if b > 0 else None)
        value = None
        if b < len(keys) and j < len(keys[b]) and keys[b][j] == key:
            value = self._values[b][j]
            j += 1
        while b < len(keys):
            if j < len(keys[b]):
                return value, lower, keys[b][j]
            b, j = b + 1, 0
        return value, lower, None

    def rows_from(self, start: int) -> Iterator[tuple[Interval, V]]:
        """Rows in order from the last one starting at or before `start` (the first row if none)."""
        if not self._starts:
            return
        b = max(bisect.bisect_right(self._firsts, start) - 1, 0)
        j = max(bisect.bisect_right(self._starts[b], start) - 1, 0)
        while b < len(self._keys):
            keys, values = self._keys[b], self._values[b]
            for i in range(j, len(keys)):
                yield keys[i], values[i]
            b, j = b + 1, 0

    def starting_in(self, low: int, high: int) -> tuple[list[Interval], list[V]]:
        """Keys and values of the rows with `low <= start < high`, in order."""
        if not self._starts or high <= low:
            return [], []
        b = max(bisect.bisect_left(self._firsts, low) - 1, 0)
        return self._slice(b, bisect.bisect_left(self._starts[b], low), high)

    def overlapping(self, interval: Interval) -> tuple[list[Interval], list[V]]:
        """Keys and values of the rows overlapping `interval`, in order, for keys that do not
        overlap one another (a timeline's visible pieces): a bisect, then slices."""
        if not self._starts:
            return [], []
        b = max(bisect.bisect_right(self._firsts, interval.start) - 1, 0)
        j = max(bisect.bisect_right(self._starts[b], interval.start) - 1, 0)
        if self._keys[b][j].end <= interval.start:
            j += 1
        return self._slice(b, j, interval.end)

    def _slice(self, b: int, j: int, high: int) -> tuple[list[Interval], list[V]]:
        """Rows from (b, j) on while their start is before `high`."""
        keys: list[Interval] = []
        values: list[V] = []
        while b < len(self._starts):
            starts = self._starts[b]
            stop = bisect.bisect_left(starts, high, j)
            keys += self._keys[b][j:stop]
            values += self._values[b][j:stop]
            if stop < len(starts):
                break
            b, j = b + 1, 0
        return keys, values

    def keys(self) -> Iterator[Interval]:
        for block in self._keys:
            yield from block

    def values(self) -> Iterator[V]:
        for block in self._values:
            yield from block

    def items(self) -> Iterator[tuple[Interval, V]]:
        for keys, values in zip(self._keys, self._values, strict=True):
            yield from zip(keys, values, strict=True)
