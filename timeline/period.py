"""ISO-8601 periods (`P1D`, `PT1H`, `P3M`, `P1Y2M10DT2H30M`) and calendar arithmetic with them.

As in Joda-Time (which Druid uses), years, months, weeks and days move the wall-clock calendar of
the time zone, while hours and smaller units are exact durations: adding P1D across a DST change
keeps the local time of day, adding PT24H does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from timeline.instant import MS_PER_DAY, civil_from_days, days_from_civil, local_to_utc, utc_to_local

_JAVA_INT_MAX = 2**31 - 1  # Joda keeps each field of a period in a Java int
_PERIOD = re.compile(
    r"^P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+)(?:[.,](?P<frac>\d{1,3}))?S)?)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Period:
    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0
    hours: int = 0
    minutes: int = 0
    seconds: int = 0
    millis: int = 0

    @classmethod
    def parse(cls, text: str) -> Period:
        m = _PERIOD.match(text.strip())
        if m is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
            raise ValueError(f"not an ISO-8601 period: {text!r}")
        frac = m["frac"] or ""
        fields = ("years", "months", "weeks", "days", "hours", "minutes", "seconds")
        if any(m[name] and int(m[name]) > _JAVA_INT_MAX for name in fields):
            raise ValueError(f"a field of period {text!r} is past Joda's int range")
        return cls(
            years=int(m["years"] or 0),
            months=int(m["months"] or 0),
            weeks=int(m["weeks"] or 0),
            days=int(m["days"] or 0),
            hours=int(m["hours"] or 0),
            minutes=int(m["minutes"] or 0),
            seconds=int(m["seconds"] or 0),
            millis=int((frac + "00")[:3]) if frac else 0,
        )

    def __str__(self) -> str:
        date = "".join(
            f"{v}{u}"
            for v, u in ((self.years, "Y"), (self.months, "M"), (self.weeks, "W"), (self.days, "D"))
            if v
        )
        secs = (
            f"{self.seconds}.{self.millis:03d}S"
            if self.millis
            else (f"{self.seconds}S" if self.seconds else "")
        )
        time = "".join(f"{v}{u}" for v, u in ((self.hours, "H"), (self.minutes, "M")) if v) + secs
        return "P" + date + ("T" + time if time else "") if (date or time) else "PT0S"

    @property
    def is_zero(self) -> bool:
        return not any((self.years, self.months, self.weeks, self.days, self.exact_ms))

    @property
    def exact_ms(self) -> int:
        """The part that is an exact duration (hours and below)."""
        return ((self.hours * 60 + self.minutes) * 60 + self.seconds) * 1000 + self.millis

    @property
    def calendar_free(self) -> bool:
        return not (self.years or self.months or self.weeks or self.days)

    def nonzero_fields(self) -> list[str]:
        names = ("years", "months", "weeks", "days", "hours", "minutes", "seconds", "millis")
        return [n for n in names if getattr(self, n)]

    def add_to(self, utc_ms: int, tz: ZoneInfo | None = None, times: int = 1) -> int:
        """`utc_ms + times * period`, calendar fields in `tz` wall-clock time (UTC when None)."""
        ms = utc_ms
        if self.years or self.months or self.weeks or self.days:
            local = ms if tz is None else utc_to_local(ms, tz)
            days, tod = divmod(local, MS_PER_DAY)
            if self.years or self.months:
                y, m, d = civil_from_days(days)
                total = y * 12 + (m - 1) + times * (self.years * 12 + self.months)
                y, m = divmod(total, 12)
                m += 1
                d = min(d, days_in_month(y, m))
                days = days_from_civil(y, m, d)
            days += times * (self.weeks * 7 + self.days)
            local = days * MS_PER_DAY + tod
            ms = local if tz is None else local_to_utc(local, tz)
        return ms + times * self.exact_ms


def days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31
