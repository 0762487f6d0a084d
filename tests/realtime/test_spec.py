"""The real-time spec: Druid's shapes accepted, what the node cannot honour refused clearly."""

from __future__ import annotations

from typing import Any

import pytest

from strata.ingestion.errors import SpecError
from strata.realtime.spec import parse_realtime_spec

SCHEMA = {"dataSource": "ev", "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": ["k"]},
          "metricsSpec": [{"type": "count", "name": "count"}],
          "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute"}}  # fmt: skip
TUNING = {"windowPeriod": "PT5M", "intermediatePersistPeriod": "PT1M", "maxRowsInMemory": 1000,
          "maxBytesInMemory": 4096, "rejectionPolicy": {"type": "messageTime"}}  # fmt: skip


@pytest.mark.parametrize(
    "shape",
    [
        {"type": "index_realtime", "spec": {"dataSchema": SCHEMA, "tuningConfig": TUNING}},
        {"dataSchema": SCHEMA, "tuningConfig": TUNING},
    ],
)
def test_task_and_bare_shapes(shape: dict[str, Any]) -> None:
    spec = parse_realtime_spec(shape)
    assert (spec.data_source, spec.window_ms, spec.persist_period_ms) == ("ev", 300_000, 60_000)
    assert (spec.max_rows_in_memory, spec.max_bytes_in_memory, spec.rejection_policy) == (
        1000,
        4096,
        "messageTime",
    )
    assert [d.name for d in spec.dimensions.dimensions] == ["k"]


def test_a_bare_data_schema_gets_druids_defaults() -> None:
    spec = parse_realtime_spec(SCHEMA)
    assert (spec.window_ms, spec.max_rows_in_memory, spec.rejection_policy) == (
        600_000,
        150_000,
        "serverTime",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"metricsSpec": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "k"}]},
            "not supported by the real-time",
        ),
        ({"granularitySpec": {"segmentGranularity": "none"}}, "segmentGranularity 'none'"),
        ({"dataSource": ""}, "dataSource"),
    ],
)
def test_schema_errors(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_realtime_spec({**SCHEMA, **change})


@pytest.mark.parametrize(
    ("tuning", "message"),
    [
        ({"windowPeriod": "P1M"}, "no fixed length"),
        ({"windowPeriod": "ten minutes"}, "windowPeriod"),
        ({"rejectionPolicy": {"type": "sometimes"}}, "rejectionPolicy"),
        ({"maxRowsInMemory": -5}, "maxRowsInMemory"),
    ],
)
def test_tuning_errors(tuning: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_realtime_spec({"dataSchema": SCHEMA, "tuningConfig": tuning})
