"""Typed timestamp columns (Parquet input) -> epoch ms, checked against Python's datetime."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

from strata.ingestion.convert import parse_timestamps

INSTANTS = [datetime(2020, 1, 1, 12, 30, 5, 123000), None, datetime(1969, 12, 31, 23, 59, 59, 1000)]


def _expected_ms(values: list[datetime | None], zone: ZoneInfo | None) -> list[int]:
    out = []
    for v in values:
        if v is None:
            out.append(0)
            continue
        aware = v.replace(tzinfo=zone or UTC)
        out.append(round(aware.timestamp() * 1000))
    return out


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "America/New_York"])
def test_timestamp_column_to_epoch_ms(unit: str, tz: str | None) -> None:
    values = [v.replace(microsecond=0) if v and unit == "s" else v for v in INSTANTS]
    zone = ZoneInfo(tz) if tz else None
    # Arrow stores tz-aware values as UTC; naive ones are read as UTC
    stored = [
        v.replace(tzinfo=zone).astimezone(UTC).replace(tzinfo=None) if v and zone else v for v in values
    ]
    arr = pa.array(stored, pa.timestamp(unit, tz=tz))
    ms, bad = parse_timestamps(arr, "auto", None)
    assert ms.tolist() == _expected_ms(values, zone)
    assert bad.tolist() == [False, True, False]
