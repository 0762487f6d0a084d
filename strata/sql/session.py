"""The SQL session settings one statement is planned under (Druid's `sqlTimeZone`).

Planning reads the zone in many small places (timestamp literals, time floors, time functions), so
it travels in a context variable set for the duration of one statement's planning rather than as
an argument threaded through every function.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from strata.query.errors import invalid

_ZONE: ContextVar[str | None] = ContextVar("sql_time_zone", default=None)
_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")
_UTC = ("UTC", "Z", "Etc/UTC", "GMT", "+00:00", "-00:00")


def parse_time_zone(value: Any) -> str | None:
    """A zone name for `sqlTimeZone` (None for UTC): a tz database name or a whole-hour offset."""
    if value is None or value in _UTC:
        return None
    if not isinstance(value, str):
        raise invalid("Context parameter [sqlTimeZone] must be a string")
    m = _OFFSET.match(value)
    if m is not None:
        sign, hours, minutes = m.groups()
        if minutes != "00":
            raise invalid("sqlTimeZone offset [%s] must be a whole number of hours", value)
        # the Etc/GMT zones count westward: UTC-08:00 is Etc/GMT+8
        value = f"Etc/GMT{'-' if sign == '+' else '+'}{int(hours)}"
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid("Unknown sqlTimeZone [%s]", value) from None
    return str(value)


@contextmanager
def time_zone(zone: str | None) -> Iterator[None]:
    token = _ZONE.set(zone)
    try:
        yield
    finally:
        _ZONE.reset(token)


def current_zone() -> str | None:
    """The statement's zone name, None for UTC."""
    return _ZONE.get()


def current_zone_info() -> ZoneInfo | None:
    zone = _ZONE.get()
    return None if zone is None else ZoneInfo(zone)
