"""Half-open time intervals [start, end) in UTC epoch milliseconds, printed and parsed as Druid does."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from timeline.instant import TEXT_CACHE_ENTRIES, format_instant, parse_instant
from timeline.period import Period

# Druid's JodaUtils.MIN_INSTANT / MAX_INSTANT (Long.MIN_VALUE / 2, Long.MAX_VALUE / 2).
MIN_INSTANT = -4611686018427387904
MAX_INSTANT = 4611686018427387903
_ETERNITY_TEXT = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"


@dataclass(frozen=True, slots=True, order=True)
class Interval:
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"interval end before start: {self.start} > {self.end}")

    @classmethod
    def parse(cls, text: str) -> Interval:
        """`start/end`, `start/period`, `period/end`; instants with or without zone (UTC default)."""
        if not isinstance(text, str) or text.count("/") != 1:
            raise ValueError(f"not an ISO-8601 interval (expected start/end): {text!r}")
        return _parse_interval(text) if cls is Interval else cls._parse(text)

    @classmethod
    def parse_unshared(cls, text: str) -> Interval:
        """`parse` without the memo: for intervals parsed once and then held (a broker's segments)."""
        if not isinstance(text, str) or text.count("/") != 1:
            raise ValueError(f"not an ISO-8601 interval (expected start/end): {text!r}")
        return cls._parse(text)

    @classmethod
    def _parse(cls, text: str) -> Interval:
        if text.strip() == _ETERNITY_TEXT:
            return ETERNITY
        left, right = (p.strip() for p in text.split("/"))
        if left[:1].upper() == "P" and right[:1].upper() == "P":
            raise ValueError(f"interval cannot be two periods: {text!r}")
        if left[:1].upper() == "P":
            end = _instant(right, text)
            return cls(Period.parse(left).add_to(end, times=-1), end)
        start = _instant(left, text)
        if right[:1].upper() == "P":
            return cls(start, Period.parse(right).add_to(start))
        end = _instant(right, text)
        if end < start:
            raise ValueError(f"interval end is before its start: {text!r}")
        return cls(start, end)

    @classmethod
    def of(cls, start: str, end: str) -> Interval:
        return cls(parse_instant(start), parse_instant(end))

    def __str__(self) -> str:
        return _interval_text(self.start, self.end)

    def text_unshared(self) -> str:
        """`str(self)` without the text memos: for text built once and then held (a segment's id),
        whose memo entries would outweigh the text itself when a broker holds 100,000 segments."""
        if (self.start, self.end) == (ETERNITY.start, ETERNITY.end):
            return _ETERNITY_TEXT
        return f"{format_instant.__wrapped__(self.start)}/{format_instant.__wrapped__(self.end)}"

    def __repr__(self) -> str:
        return f"Interval({self})"

    @property
    def duration_ms(self) -> int:
        return self.end - self.start

    @property
    def is_empty(self) -> bool:
        return self.end == self.start

    def overlaps(self, other: Interval) -> bool:
        """Druid's overlap: intervals sharing at least one instant (an empty one never overlaps)."""
        return self.start < other.end and other.start < self.end

    def contains(self, other: Interval) -> bool:
        return self.start <= other.start and other.end <= self.end

    def contains_instant(self, ms: int) -> bool:
        return self.start <= ms < self.end

    def abuts(self, other: Interval) -> bool:
        return self.end == other.start or other.end == self.start

    def overlap(self, other: Interval) -> Interval | None:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return Interval(start, end) if start < end else None

    def gap(self, other: Interval) -> Interval | None:
        if other.start > self.end:
            return Interval(self.end, other.start)
        if self.start > other.end:
            return Interval(other.end, self.start)
        return None

    def with_start(self, start: int) -> Interval:
        return Interval(start, self.end)

    def with_end(self, end: int) -> Interval:
        return Interval(self.start, end)


def _instant(part: str, whole: str) -> int:
    try:
        return parse_instant(part)
    except ValueError:
        raise ValueError(f"invalid instant {part!r} in interval {whole!r}") from None


ETERNITY = Interval(MIN_INSTANT, MAX_INSTANT)


def condense_intervals(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sorted, with overlapping and abutting intervals joined (Druid's JodaUtils.condenseIntervals).

    Druid condenses a query's intervals before planning, so rows under two overlapping intervals
    count once and a segment is never asked for twice.
    """
    out: list[Interval] = []
    for iv in sorted(intervals):
        if out and iv.start <= out[-1].end:
            if iv.end > out[-1].end:
                out[-1] = Interval(out[-1].start, iv.end)
        else:
            out.append(iv)
    return tuple(out)


@functools.lru_cache(maxsize=TEXT_CACHE_ENTRIES)
def _interval_text(start: int, end: int) -> str:
    """Printing is hot on the broker (every segment of every query names its interval); the same
    few thousand segment intervals recur, so their text is kept."""
    if (start, end) == (ETERNITY.start, ETERNITY.end):
        return _ETERNITY_TEXT
    return f"{format_instant(start)}/{format_instant(end)}"


@functools.lru_cache(maxsize=TEXT_CACHE_ENTRIES)
def _parse_interval(text: str) -> Interval:
    """Memoised: every request names its segments' intervals again (a broker's scatter lists each
    segment of a query), and intervals are immutable values."""
    return Interval._parse(text)
