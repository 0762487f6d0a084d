"""Query and segment granularities: how timestamps fall into buckets.

Semantics follow Druid's PeriodGranularity (Joda-Time): a one-unit period without origin floors
the wall-clock field in the zone (day = local midnight, week = Monday, month = the 1st); a
multi-unit period counts whole periods from the origin (epoch by default); hours and smaller
units are exact durations, days and larger are calendar steps in the zone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from timeline.bucketing import bucket_starts_by_runs, exact_bucket_end, zone_offsets
from timeline.instant import (
    MS_PER_DAY,
    civil_from_days,
    days_from_civil,
    format_instant,
    local_to_utc,
    parse_instant,
    utc_offset_ms,
    utc_to_local,
)
from timeline.interval import MAX_INSTANT, MIN_INSTANT, Interval
from timeline.period import Period
from timeline.period import days_in_month as _days_in_month

_NAMED: dict[str, str] = {
    "second": "PT1S",
    "minute": "PT1M",
    "five_minute": "PT5M",
    "ten_minute": "PT10M",
    "fifteen_minute": "PT15M",
    "thirty_minute": "PT30M",
    "hour": "PT1H",
    "six_hour": "PT6H",
    "eight_hour": "PT8H",
    "day": "P1D",
    "week": "P1W",
    "month": "P1M",
    "quarter": "P3M",
    "year": "P1Y",
}
_STANDARD_NAME = {Period.parse(text): name for name, text in _NAMED.items()}
_UNIT_MS = {"hours": 3_600_000, "minutes": 60_000, "seconds": 1000, "millis": 1}


class Granularity(ABC):
    tz: ZoneInfo | None = None
    is_all = False
    is_none = False

    @abstractmethod
    def bucket_start(self, ms: int) -> int: ...

    @abstractmethod
    def bucket_end(self, ms: int) -> int:
        """Start of the bucket after the one holding `ms`."""

    @abstractmethod
    def to_json(self) -> Any: ...

    def buckets(self, interval: Interval) -> Iterator[Interval]:
        """Every bucket overlapping `interval`, unclipped, in time order."""
        start = self.bucket_start(interval.start)
        while start < interval.end:
            end = self.bucket_end(start)
            yield Interval(start, end)
            start = end

    def bucket_starts(self, times: np.ndarray) -> np.ndarray:
        """Vectorised `bucket_start` over an int64 array of epoch ms (exactly equal to it)."""
        times = np.asarray(times, dtype=np.int64)
        if times.size == 0:
            return times.copy()
        if not self.monotone:
            uniq, inverse = np.unique(times, return_inverse=True)
            starts = np.fromiter((self.bucket_start(int(t)) for t in uniq), np.int64, uniq.size)
            return starts[inverse]
        return bucket_starts_by_runs(times, self.bucket_start, self._next_start_guess)

    def _next_start_guess(self, start: int) -> int:
        return self.bucket_end(start)

    @property
    def monotone(self) -> bool:
        """Whether bucket_start never decreases as time grows (then buckets tile time exactly)."""
        return True

    @staticmethod
    def parse(value: Any) -> Granularity:
        return parse_granularity(value)

    def __repr__(self) -> str:
        return f"Granularity({self.to_json()!r})"


@dataclass(frozen=True, eq=True)
class AllGranularity(Granularity):
    is_all = True

    def bucket_start(self, ms: int) -> int:
        return MIN_INSTANT

    def bucket_end(self, ms: int) -> int:
        return MAX_INSTANT

    def buckets(self, interval: Interval) -> Iterator[Interval]:
        yield interval

    def bucket_starts(self, times: np.ndarray) -> np.ndarray:
        return np.full(np.shape(times), MIN_INSTANT, dtype=np.int64)

    def to_json(self) -> Any:
        return {"type": "all"}


@dataclass(frozen=True, eq=True)
class NoneGranularity(Granularity):
    is_none = True

    def bucket_start(self, ms: int) -> int:
        return ms

    def bucket_end(self, ms: int) -> int:
        return ms + 1

    def bucket_starts(self, times: np.ndarray) -> np.ndarray:
        return np.asarray(times, dtype=np.int64).copy()

    def to_json(self) -> Any:
        return {"type": "none"}


@dataclass(frozen=True, eq=True)
class DurationGranularity(Granularity):
    duration_ms: int
    origin: int = 0

    def __post_init__(self) -> None:
        if self.duration_ms <= 0:
            raise ValueError("duration granularity needs a positive duration")

    def bucket_start(self, ms: int) -> int:
        return (ms - self.origin) // self.duration_ms * self.duration_ms + self.origin

    def bucket_end(self, ms: int) -> int:
        return self.bucket_start(ms) + self.duration_ms

    def bucket_starts(self, times: np.ndarray) -> np.ndarray:
        t = np.asarray(times, dtype=np.int64)
        return (t - self.origin) // self.duration_ms * self.duration_ms + self.origin

    def to_json(self) -> Any:
        return {"type": "duration", "duration": self.duration_ms, "origin": _origin_text(self.origin)}


@dataclass(frozen=True, eq=True)
class PeriodGranularity(Granularity):
    period: Period
    tz: ZoneInfo | None = None
    origin: int | None = None

    def __post_init__(self) -> None:
        if self.period.is_zero:
            raise ValueError("period granularity needs a non-zero period")

    # -- scalar ------------------------------------------------------------------------------------
    def bucket_start(self, ms: int) -> int:
        fields = self.period.nonzero_fields()
        if len(fields) > 1:
            return self._truncate_compound(ms)
        unit = fields[0]
        count = getattr(self.period, unit)
        if count == 1 and self.origin is None:
            return self._round_floor(ms, unit)
        origin = self._origin_ms
        diff = self._difference(unit, ms, origin)
        diff -= _java_rem(diff, count)
        candidate = self._add(unit, origin, diff)
        if ms < candidate:
            candidate = self._add(unit, candidate, -count)
        return candidate

    def bucket_end(self, ms: int) -> int:
        """Exactly where `bucket_start` next changes (Druid's iterator adds the period instead,
        which drifts by an hour after a midnight skipped by DST)."""
        start = self.bucket_start(ms)
        size = self._uniform_size()
        if size is not None:
            return start + size
        if not self.monotone:
            return self.period.add_to(start, self.tz)  # Druid's step; no exact end exists
        return exact_bucket_end(self.bucket_start, self._next_start_guess, ms, start)

    def _uniform_size(self) -> int | None:
        """Bucket length when every bucket is the same exact duration (time fields in UTC)."""
        p = self.period
        wall_clock_hour = p.nonzero_fields() == ["hours"] and p.hours == 1 and self.origin is None
        if p.calendar_free and len(p.nonzero_fields()) == 1 and not (wall_clock_hour and self.tz):
            return p.exact_ms
        return None

    @property
    def _origin_ms(self) -> int:
        """The given origin, else 1970-01-01T00:00 wall-clock time in the zone (as Druid)."""
        if self.origin is not None:
            return self.origin
        return 0 if self.tz is None else local_to_utc(0, self.tz)

    def _next_start_guess(self, start: int) -> int:
        return self.period.add_to(start, self.tz)

    @property
    def monotone(self) -> bool:
        # Joda counts months from an origin on the 29th-31st with end-of-month clamping, which
        # before the origin can step back (..., Jan 31, then Jan 28 one ms later): no run walk.
        if self.origin is None or not (self.period.months or self.period.years):
            return True
        return civil_from_days(self._local(self.origin) // MS_PER_DAY)[2] <= 28

    def bucket_starts(self, times: np.ndarray) -> np.ndarray:
        p = self.period
        fields = p.nonzero_fields()
        t = np.asarray(times, dtype=np.int64)
        if p.calendar_free and len(fields) == 1:
            one_wall_clock_hour = fields[0] == "hours" and p.hours == 1 and self.origin is None
            if one_wall_clock_hour and self.tz is not None and t.size:
                # floor the wall-clock hour, keeping each instant's own offset (as _round_floor)
                tz = self.tz
                offsets = zone_offsets(t, lambda ms: utc_offset_ms(ms, tz))
                return (t + offsets) // 3_600_000 * 3_600_000 - offsets
            # exact durations counted from the origin (Joda does time fields in UTC)
            size, origin = p.exact_ms, self._origin_ms
            return (t - origin) // size * size + origin
        elif self.tz is None and self.origin is None and len(fields) == 1 and p.days + p.weeks == 1:
            if p.days:
                return t // MS_PER_DAY * MS_PER_DAY
            monday, week = 4 * MS_PER_DAY, 7 * MS_PER_DAY  # 1970-01-05 was a Monday
            return (t - monday) // week * week + monday
        return super().bucket_starts(t)

    # -- Joda-style field arithmetic --------------------------------------------------------------
    def _local(self, ms: int) -> int:
        return ms if self.tz is None else utc_to_local(ms, self.tz)

    def _utc(self, local: int, hint: int) -> int:
        return local if self.tz is None else local_to_utc(local, self.tz, hint)

    def _round_floor(self, ms: int, unit: str) -> int:
        local = self._local(ms)
        if unit in _UNIT_MS:
            # time fields keep the instant's own offset (Joda), so a repeated DST hour stays apart
            size = _UNIT_MS[unit]
            return local // size * size - (local - ms)
        days = local // MS_PER_DAY
        if unit == "days":
            return self._utc(days * MS_PER_DAY, ms)
        if unit == "weeks":
            return self._utc((days - (days + 3) % 7) * MS_PER_DAY, ms)  # back to Monday
        y, m, _ = civil_from_days(days)
        if unit == "months":
            return self._utc(days_from_civil(y, m, 1) * MS_PER_DAY, ms)
        return self._utc(days_from_civil(y, 1, 1) * MS_PER_DAY, ms)  # years

    def _difference(self, unit: str, ms: int, origin: int) -> int:
        if unit in _UNIT_MS:
            return _java_div(ms - origin, _UNIT_MS[unit])
        a, b = self._local(ms), self._local(origin)
        if unit == "days":
            return _java_div(a - b, MS_PER_DAY)
        if unit == "weeks":
            return _java_div(a - b, 7 * MS_PER_DAY)
        months = _month_difference(a, b)
        return months if unit == "months" else _java_div(months, 12)

    def _add(self, unit: str, ms: int, amount: int) -> int:
        return Period(**{unit: 1}).add_to(ms, self.tz, times=amount)

    def _truncate_compound(self, ms: int) -> int:
        origin = self._origin_ms
        step_estimate = max(1, Period.add_to(self.period, origin, self.tz) - origin)
        k = (ms - origin) // step_estimate
        current = self.period.add_to(origin, self.tz, times=k)
        while current > ms:
            k -= 1
            current = self.period.add_to(origin, self.tz, times=k)
        while True:
            nxt = self.period.add_to(origin, self.tz, times=k + 1)
            if nxt > ms:
                return current
            k, current = k + 1, nxt

    def to_json(self) -> Any:
        """As Druid writes it: a standard granularity (UTC, no origin) as its upper-case name."""
        if self.tz is None and self.origin is None and self.period in _STANDARD_NAME:
            return _STANDARD_NAME[self.period].upper()
        return {
            "type": "period",
            "period": str(self.period),
            "timeZone": "UTC" if self.tz is None else self.tz.key,
            "origin": None if self.origin is None else format_instant(self.origin, self.tz),
        }


def _month_difference(a: int, b: int) -> int:
    """Whole months from local time b to a, as Joda counts them (antisymmetric; the last day of a
    shorter month counts as reaching a later day-of-month)."""
    if a < b:
        return -_month_difference(b, a)
    (ay, am, ad), (by, bm, bd) = civil_from_days(a // MS_PER_DAY), civil_from_days(b // MS_PER_DAY)
    months = (ay - by) * 12 + am - bm
    if ad == _days_in_month(ay, am) and bd > ad:
        bd = ad
    a_rem = (ad - 1) * MS_PER_DAY + a % MS_PER_DAY
    b_rem = (bd - 1) * MS_PER_DAY + b % MS_PER_DAY
    return months - 1 if a_rem < b_rem else months


def _java_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _java_rem(a: int, b: int) -> int:
    return a - b * _java_div(a, b)


def _origin_text(ms: int) -> str:
    return format_instant(ms)


def _zone(value: Any) -> ZoneInfo | None:
    if value is None or value in ("UTC", "Z", "Etc/UTC"):
        return None
    if not isinstance(value, str):
        raise ValueError(f"timeZone must be a string, got {value!r}")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r}") from None


def _origin(value: Any, tz: ZoneInfo | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return parse_instant(value, tz)
    raise ValueError(f"origin must be an ISO instant, got {value!r}")


ALL = AllGranularity()
NONE = NoneGranularity()


def _duration_ms(duration: Any) -> int:
    """Milliseconds, as a number or a numeric string (Jackson reads both into a long)."""
    if isinstance(duration, str) and duration.strip().lstrip("-").isdigit():
        duration = int(duration)
    if isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise ValueError("duration granularity needs a numeric 'duration' in milliseconds")
    return int(duration)


def parse_granularity(value: Any) -> Granularity:
    """Druid's granularity JSON: a simple name, or a `period` / `duration` / `all` / `none` object."""
    if isinstance(value, str):
        name = value.strip().lower()
        if name == "all":
            return ALL
        if name == "none":
            return NONE
        if name in _NAMED:
            return PeriodGranularity(Period.parse(_NAMED[name]))
        raise ValueError(f"unknown granularity {value!r}")
    if isinstance(value, Mapping):
        kind = str(value.get("type", "")).lower()
        if kind == "all":
            return ALL
        if kind == "none":
            return NONE
        if kind == "period":
            period = value.get("period")
            if not isinstance(period, str):
                raise ValueError("period granularity needs a 'period' string such as 'P1D'")
            tz = _zone(value.get("timeZone"))
            return PeriodGranularity(Period.parse(period), tz=tz, origin=_origin(value.get("origin"), tz))
        if kind == "duration":
            origin = _origin(value.get("origin"), None) or 0
            return DurationGranularity(_duration_ms(value.get("duration")), origin)
        if kind in _NAMED:
            return parse_granularity(kind)
        raise ValueError(f"unknown granularity type {value.get('type')!r}")
    raise ValueError(f"granularity must be a string or an object, got {value!r}")
