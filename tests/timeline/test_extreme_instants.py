"""Instants before year 1 and after 9999 print and parse as Joda does (proleptic Gregorian, year 0).

The oracle is Python's datetime shifted by whole 400-year Gregorian cycles (146,097 days each), so
it is independent of Strata's civil-date arithmetic.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timeline import format_instant, parse_instant

CYCLE_DAYS = 146_097  # days in 400 Gregorian years
EPOCH = datetime.datetime(1970, 1, 1)


def oracle_ms(year: int, month: int, day: int, ms_of_day: int) -> int:
    """Epoch ms of a proleptic Gregorian date in any year, via datetime and 400-year shifts."""
    shift = 0
    while year < 1:
        year, shift = year + 400, shift - 1
    while year > 9999:
        year, shift = year - 400, shift + 1
    days = (datetime.datetime(year, month, day) - EPOCH).days + shift * CYCLE_DAYS
    return days * 86_400_000 + ms_of_day


def text(year: int, month: int, day: int, ms_of_day: int) -> str:
    secs, millis = divmod(ms_of_day, 1000)
    hh, rest = divmod(secs, 3600)
    y = f"{year:04d}" if year >= 0 else f"-{-year:04d}"
    return f"{y}-{month:02d}-{day:02d}T{hh:02d}:{rest // 60:02d}:{rest % 60:02d}.{millis:03d}Z"


def test_year_zero_and_before() -> None:
    assert parse_instant("0000-01-01T00:00:00.000Z") == -62_167_219_200_000  # Java: Instant.parse(...)
    assert format_instant(-62_167_219_200_000) == "0000-01-01T00:00:00.000Z"
    assert format_instant(-62_167_219_200_001) == "-0001-12-31T23:59:59.999Z"
    assert parse_instant("-0004-02-29T00:00:00.000Z") == -720_930 * 86_400_000  # year -4 is a leap year


@given(
    st.integers(-30_000, 30_000),
    st.integers(1, 12),
    st.integers(1, 31),
    st.integers(0, 86_399_999),
)
def test_any_year_round_trips_against_datetime(year: int, month: int, day: int, ms_of_day: int) -> None:
    try:
        expected = oracle_ms(year, month, day, ms_of_day)
    except ValueError:
        return  # no such day in that month
    assert parse_instant(text(year, month, day, ms_of_day)) == expected
    assert format_instant(expected) == text(year, month, day, ms_of_day)


@given(st.integers(0, 253402300799999))
def test_druids_own_form_parses_as_datetime_reads_it(ms: int) -> None:
    """The canonical form's fast path (`YYYY-MM-DDTHH:MM:SS.mmmZ`) against datetime's reading."""
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    when = epoch + datetime.timedelta(milliseconds=ms)
    text = f"{when.year:04d}-{when:%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"
    assert parse_instant(text) == ms


def test_druids_own_form_with_no_such_day_or_time_is_refused() -> None:
    for text in ("2015-02-29T00:00:00.000Z", "2015-13-01T00:00:00.000Z", "2015-01-01T25:00:00.000Z",
                 "2015-01-01T10:60:00.000Z", "2015-04-31T00:00:00.000Z"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_instant(text)
    assert parse_instant("2016-02-29T24:00:00.000Z") == parse_instant("2016-03-01T00:00:00.000Z")
