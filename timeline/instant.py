"""Instants as epoch milliseconds (UTC): parsing and printing in Druid's ISO-8601 forms.

Printing works for any year, including Druid's "eternity" bounds far outside `datetime`'s range,
by converting days to civil dates arithmetically.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

MS_PER_DAY = 86_400_000

_INSTANT = re.compile(
    r"""^(?P<year>[+-]?\d{4,9})
        (?:-(?P<month>\d{2})
          (?:-(?P<day>\d{2})
            (?:[T\s](?P<hour>\d{2})
              (?::(?P<minute>\d{2})
                (?::(?P<second>\d{2})(?:[.,](?P<frac>\d{1,9}))?)?
              )?
            )?
          )?
        )?
        (?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?$""",
    re.VERBOSE | re.IGNORECASE,
)


# Druid's own form (every segment interval a broker is announced): parsed without the general
# pattern's optional groups, the day's number kept per date (a million segments span few days)
_CANONICAL = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z", re.ASCII)


def prints_as_read(text: str) -> bool:
    """Is `text` an instant exactly as `format_instant` prints the instant it parses to? (Druid's
    own form; 24:00 is the next day's 00:00.) Then a reader may keep the text it was given."""
    return _CANONICAL.fullmatch(text) is not None and text[11:13] != "24"


@lru_cache(maxsize=4096)
def _canonical_day(date: str) -> int | None:
    """Days since the epoch of `YYYY-MM-DD`; None when it names no day."""
    year, month, day = int(date[:4]), int(date[5:7]), int(date[8:10])
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        return None
    return days_from_civil(year, month, day)


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y -= m <= 2
    era = y // 400  # floor division: Hinnant's C rounds toward zero and corrects for it
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def _zone_offset_ms(text: str) -> int:
    if text.upper() == "Z":
        return 0
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if minutes > 59 or hours * 60 + minutes > 18 * 60:  # Joda's offsets: -18:00 to +18:00
        raise ValueError(f"zone offset out of range: {text!r}")
    return sign * (hours * 3600 + minutes * 60) * 1000


def _days_in_month(year: int, month: int) -> int:
    """In the proleptic Gregorian calendar, as Joda's ISO chronology (February 30 is no day)."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def parse_instant(text: str, tz: ZoneInfo | None = None) -> int:
    """Epoch ms of an ISO-8601 instant; missing fields default to their start, no zone means `tz` (UTC)."""
    canonical = _CANONICAL.fullmatch(text)
    if canonical is not None:
        day = _canonical_day(text[:10])
        hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
        if day is not None and hour <= 24 and minute < 60 and second < 60:
            return (day * 86400 + hour * 3600 + minute * 60 + second) * 1000 + int(text[20:23])
    m = _INSTANT.match(text.strip())
    if m is None:
        raise ValueError(f"not an ISO-8601 instant: {text!r}")
    year = int(m["year"])
    month, day = int(m["month"] or 1), int(m["day"] or 1)
    hour, minute, second = int(m["hour"] or 0), int(m["minute"] or 0), int(m["second"] or 0)
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month) and hour <= 24 and minute < 60
            and second < 60):  # fmt: skip
        raise ValueError(f"field out of range in instant {text!r}")
    frac = m["frac"] or ""
    millis = int((frac + "000")[:3]) if frac else 0
    local = (days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second) * 1000 + millis
    if m["zone"]:
        return local - _zone_offset_ms(m["zone"])
    if tz is None:
        return local
    return local_to_utc(local, tz)


def local_to_utc(local_ms: int, tz: ZoneInfo, hint_utc: int | None = None) -> int:
    """UTC ms of a wall-clock time in `tz`, as Joda's convertLocalToUTC (non-strict).

    The offset of `hint_utc` (the instant the local time was derived from) wins when it fits;
    otherwise an ambiguous time takes the earlier instant and a time inside a DST gap is moved
    forward by the gap, which is exactly zoneinfo's fold=0 reading.
    """
    if hint_utc is not None:
        offset = utc_offset_ms(hint_utc, tz)
        if utc_offset_ms(local_ms - offset, tz) == offset:
            return local_ms - offset
    days, ms = divmod(local_ms, MS_PER_DAY)
    y, mo, d = civil_from_days(days)
    off = (datetime(y, mo, d) + timedelta(milliseconds=ms)).replace(tzinfo=tz).utcoffset()
    return local_ms - (0 if off is None else off // timedelta(milliseconds=1))


def utc_offset_ms(utc_ms: int, tz: ZoneInfo) -> int:
    dt = datetime.fromtimestamp(utc_ms / 1000, tz)
    off = dt.utcoffset()
    return int(off.total_seconds() * 1000) if off is not None else 0


def utc_to_local(utc_ms: int, tz: ZoneInfo) -> int:
    return utc_ms + utc_offset_ms(utc_ms, tz)


# Text caches hold more entries than the instants and intervals of 100,000 segments: a query sweeps
# them in order, and an LRU smaller than what a sweep touches misses on every access.
TEXT_CACHE_ENTRIES = 262_144


@lru_cache(maxsize=TEXT_CACHE_ENTRIES)
def format_instant(ms: int, tz: ZoneInfo | None = None) -> str:
    """Druid's print form: `2015-09-12T00:46:58.771Z`, or with the zone's offset `...-07:00`.

    Memoised: answers print the same bucket starts again and again (a cached hourly query prints
    every hour of its interval on each repeat), and a lookup costs a tenth of the arithmetic.
    """
    offset = 0 if tz is None else utc_offset_ms(ms, tz)
    days, rem = divmod(ms + offset, MS_PER_DAY)
    y, mo, d = civil_from_days(days)
    secs, millis = divmod(rem, 1000)
    hh, rest = divmod(secs, 3600)
    mm, ss = divmod(rest, 60)
    year = f"{y:04d}" if y >= 0 else f"-{-y:04d}"
    base = f"{year}-{mo:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}.{millis:03d}"
    if tz is None or (offset == 0 and tz.key in ("UTC", "Etc/UTC", "GMT", "Z")):
        return base + "Z"
    sign = "-" if offset < 0 else "+"
    oh, om = divmod(abs(offset) // 60000, 60)
    return f"{base}{sign}{oh:02d}:{om:02d}"
