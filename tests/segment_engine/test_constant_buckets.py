"""Segments whose rows share one bucket are grouped by a per-segment constant, not a per-row
expression; the answers stay what plain Python over the raw rows says, whether every segment
fits one bucket (hour, day, month, zoned day over hourly segments), none does (half hours, a
half-hour zone), or the segments are clipped or read under several intervals."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest

from strata.engine import SegmentInput, run_to_json
from strata.engine.grouping import constant_buckets
from strata.query import parse_query
from tests.query.segment_fixtures import write_segments
from timeline import Interval, parse_granularity

START = 1_577_833_200_000  # 2019-12-31T23:00Z: the rows cross a day and a month
HOUR = 3_600_000
HOURS = 5
N = 4_000


@pytest.fixture(scope="module")
def raw() -> pa.Table:
    rng = np.random.default_rng(11)
    times = START + rng.integers(0, HOURS * HOUR, N)
    return pa.table({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "country": pa.array([f"c{i}" for i in rng.integers(0, 4, N)]),
    })  # fmt: skip


@pytest.fixture(scope="module")
def hourly(raw: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(raw, tmp_path_factory.mktemp("hourly"), "hour", data_source="t")


def bucket_of(ms: int, granularity: str, zone: str) -> datetime:
    """The bucket start holding `ms`, by the calendar (written apart from the engine)."""
    local = datetime.fromtimestamp(ms / 1000, UTC).astimezone(ZoneInfo(zone))
    if granularity == "PT30M":
        return local.replace(minute=local.minute // 30 * 30, second=0, microsecond=0)
    if granularity == "PT1H":
        return local.replace(minute=0, second=0, microsecond=0)
    if granularity == "P1D":
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    assert granularity == "P1M"
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def expected(raw: pa.Table, windows: list[Interval], granularity: str, zone: str) -> Counter[int]:
    times = raw.column("__time").cast(pa.int64()).to_pylist()
    inside = [t for t in times if any(w.start <= t < w.end for w in windows)]
    return Counter(int(bucket_of(t, granularity, zone).timestamp() * 1000) for t in inside)


def answered(
    inputs: list[SegmentInput], windows: list[Interval], granularity: str, zone: str
) -> Counter[int]:
    query = parse_query({
        "queryType": "timeseries", "dataSource": "t", "intervals": [str(w) for w in windows],
        "granularity": {"type": "period", "period": granularity, "timeZone": zone},
        "aggregations": [{"type": "count", "name": "n"}],
    })  # fmt: skip
    out: Counter[int] = Counter()
    for row in run_to_json(query, inputs):
        stamp = datetime.fromisoformat(row["timestamp"].replace("Z", "+00:00"))
        if row["result"]["n"]:
            out[int(stamp.timestamp() * 1000)] += row["result"]["n"]
    return out


def clip(inputs: list[SegmentInput], windows: list[Interval]) -> list[SegmentInput]:
    """Each segment once per query interval overlapping it, clipped to it (as the broker asks)."""
    out = []
    for w in windows:
        for inp in inputs:
            part = inp.interval.overlap(w)
            if part is not None and not part.is_empty:
                out.append(SegmentInput(inp.segment_id, inp.descriptor, inp.path, part))
    return out


WHOLE = [Interval(START, START + HOURS * HOUR)]
CLIPPED = [Interval(START + HOUR // 3, START + HOURS * HOUR - HOUR // 4)]
SPLIT = [Interval(START, START + HOUR + HOUR // 2), Interval(START + HOUR + HOUR // 2, START + 3 * HOUR)]
CASES: list[tuple[str, str]] = [
    ("PT1H", "UTC"), ("P1D", "UTC"), ("P1M", "UTC"), ("P1D", "America/Los_Angeles"),
    ("PT30M", "UTC"), ("P1D", "Asia/Kolkata"), ("PT1H", "Asia/Kolkata"),
]  # fmt: skip


@pytest.mark.parametrize("windows", [WHOLE, CLIPPED, SPLIT], ids=["whole", "clipped", "split"])
@pytest.mark.parametrize(("granularity", "zone"), CASES)
def test_answers_equal_python(
    raw: pa.Table, hourly: list[SegmentInput], windows: list[Interval], granularity: str, zone: str
) -> None:
    assert answered(clip(hourly, windows), windows, granularity, zone) == expected(
        raw, windows, granularity, zone
    )


def gran(period: str, zone: str = "UTC") -> Any:
    return parse_granularity({"type": "period", "period": period, "timeZone": zone})


def test_which_requests_get_constants(hourly: list[SegmentInput]) -> None:
    whole = clip(hourly, WHOLE)
    starts = [i.interval.start for i in whole]
    assert constant_buckets(gran("PT1H"), whole) == {i.segment_id: i.interval.start for i in whole}
    days = constant_buckets(gran("P1D"), whole)
    assert days is not None and sorted(set(days.values())) == [START - 23 * HOUR, START + HOUR]
    assert constant_buckets(gran("PT30M"), whole) is None  # an hour holds two buckets
    assert constant_buckets(gran("PT1H", "Asia/Kolkata"), whole) is None  # hours start at :30
    kolkata_day = START - 4 * HOUR - HOUR // 2  # 2020-01-01T00:00+05:30
    assert set((constant_buckets(gran("P1D", "Asia/Kolkata"), whole) or {}).values()) == {kolkata_day}
    assert constant_buckets(parse_granularity("all"), whole) is None
    assert constant_buckets(parse_granularity("none"), whole) is None
    # the second hour read under two intervals, each within one half hour: two buckets, no constant
    split = clip(hourly, SPLIT)
    assert constant_buckets(gran("PT1H"), split) is not None
    assert constant_buckets(gran("PT30M"), split) is None
    assert len(starts) == HOURS
