"""Per-segment timeseries partials zero-fill every bucket a segment's cursor walks, with or without
the Arrow join (skipped when every bucket already has a row), against plain Python over the rows.

Druid's cursor walks a segment from its first to its last row time: a filtered timeseries answers
each bucket there, 0 where no row matches. The oracle computes those buckets and counts directly.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from strata.engine import SegmentInput, run_partials
from strata.query import parse_query
from tests.query.segment_fixtures import write_segments
from timeline import format_instant

START = 1_577_836_800_000  # 2020-01-01
HOUR = 3_600_000
QUARTER = 900_000
HOURS = 5


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[SegmentInput]]:
    rng = np.random.default_rng(3)
    n = 300
    times = np.sort(START + rng.integers(0, HOURS * HOUR, n))
    hours = (times - START) // HOUR
    # "rare" only in hours 1 and 3, and there only in their first quarter: other buckets are empty
    rare = (np.isin(hours, [1, 3])) & ((times - START) % HOUR < QUARTER) & (rng.random(n) < 0.5)
    country = np.where(rare, "rare", np.array([f"c{i}" for i in rng.integers(0, 3, n)]))
    table = pa.table(
        {
            "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "country": pa.array(country),
        }
    )
    inputs = write_segments(table, tmp_path_factory.mktemp("fill"), "hour", data_source="t")
    rows = [{"t": int(t), "country": str(c)} for t, c in zip(times, country, strict=True)]
    return rows, inputs


def _expected(rows: list[dict[str, Any]], step: int, match: str | None) -> dict[str, int]:
    """Every bucket from each hour's first to last row (Druid's cursor), counting matching rows."""
    out: dict[str, int] = {}
    for h in range(HOURS):
        in_hour = [r for r in rows if START + h * HOUR <= r["t"] < START + (h + 1) * HOUR]
        if not in_hour:
            continue
        first = min(r["t"] for r in in_hour) // step * step
        last = max(r["t"] for r in in_hour) // step * step
        for b in range(first, last + 1, step):
            out[format_instant(b)] = 0
        counts = Counter(r["t"] // step * step for r in in_hour if match is None or r["country"] == match)
        for b, c in counts.items():
            out[format_instant(b)] += c
    return out


def _answer(inputs: list[SegmentInput], granularity: str, match: str | None) -> dict[str, int]:
    body: dict[str, Any] = {
        "queryType": "timeseries",
        "dataSource": "t",
        "intervals": [f"{format_instant(START)}/{format_instant(START + HOURS * HOUR)}"],
        "granularity": granularity,
        "aggregations": [{"type": "count", "name": "n"}],
    }
    if match is not None:
        body["filter"] = {"type": "selector", "dimension": "country", "value": match}
    query = parse_query(body)
    partials = run_partials(query, inputs)
    return {r["timestamp"]: r["result"]["n"] for r in query.finalize(query.merge([partials]))}


@pytest.mark.parametrize(
    ("granularity", "step", "match"),
    [
        ("fifteen_minute", QUARTER, "rare"),  # most buckets filled: the join runs
        ("fifteen_minute", QUARTER, None),  # unfiltered, still some empty quarters
        ("hour", HOUR, "rare"),  # three hours without a matching row
        ("hour", HOUR, None),  # every bucket has rows: the fill is skipped
    ],
)
def test_partials_fill_every_bucket_the_cursor_walks(
    data: tuple[list[dict[str, Any]], list[SegmentInput]], granularity: str, step: int, match: str | None
) -> None:
    rows, inputs = data
    assert _answer(inputs, granularity, match) == _expected(rows, step, match)
