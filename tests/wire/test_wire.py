"""The broker <-> data node contract (wire): round trips, and one place that spells it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pyarrow as pa
import pytest

from strata.wire import (
    decode_partials,
    encode_partials,
    error_body,
    missing_segments_context,
    parse_missing_segments,
    partials_stream,
    wants_arrow,
)
from timeline import Interval, SegmentDescriptor

ROOT = Path(__file__).resolve().parents[2]


def test_partials_round_trip_and_an_empty_body_is_none() -> None:
    table = pa.table({"__segment": ["s1", None], "a0": pa.array([3, None], pa.int64())})
    assert decode_partials(encode_partials(table)) == table
    assert decode_partials(b"") is None


@pytest.mark.parametrize("rows", [0, 1, 70_000])
def test_a_sized_stream_is_the_same_stream(rows: int) -> None:
    """The data node's stream, written into a buffer of its measured size, is byte for byte the
    stream `encode_partials` writes, chunks, nulls and list columns included."""
    chunk = pa.table({
        "d0": pa.array([[i % 7, None] if i % 5 else None for i in range(rows)], pa.list_(pa.int64())),
        "a0": pa.array([None if i % 3 == 0 else f"v{i}" for i in range(rows)]),
    })  # fmt: skip
    table = pa.concat_tables([chunk, chunk.slice(rows // 2)])
    stream = partials_stream(table)
    assert bytes(stream) == encode_partials(table)
    assert decode_partials(bytes(stream)) == table


def test_a_truncated_stream_is_an_arrow_error() -> None:
    payload = encode_partials(pa.table({"x": list(range(1000))}))
    with pytest.raises((pa.ArrowInvalid, OSError)):
        decode_partials(payload[: len(payload) // 2])


def test_missing_segments_round_trip() -> None:
    missing = [SegmentDescriptor(Interval(0, 3_600_000), "v1", 2)]
    assert parse_missing_segments(missing_segments_context(missing)) == missing
    assert missing_segments_context([]) == "{}"
    assert parse_missing_segments(None) == [] == parse_missing_segments("{}")
    with pytest.raises(ValueError):
        parse_missing_segments("{not json")


def test_error_body_passes_druid_bodies_and_names_anything_else() -> None:
    druid = b'{"error":"Query timeout","errorMessage":"slow","host":"h:1"}'
    assert error_body(druid, druid.decode(), 504, "n:1")["error"] == "Query timeout"
    body = error_body(b"<html>oops</html>", "<html>oops</html>", 502, "n:1")
    assert body == {"error": "Unknown exception", "errorMessage": "HTTP 502 from n:1: <html>oops</html>"}
    assert error_body(b"[1]", "[1]", 500, "n:1")["error"] == "Unknown exception"


def test_wants_arrow() -> None:
    assert wants_arrow("application/vnd.apache.arrow.stream")
    assert wants_arrow("application/json, application/vnd.apache.arrow.stream;q=0.9")
    assert not wants_arrow("application/json") and not wants_arrow(None) and not wants_arrow("")


def test_only_wire_spells_the_contract() -> None:
    """Package code names the content type, headers and context keys through `wire`."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = config["tool"]["importlinter"]["root_packages"]
    literals = ['"application/vnd.apache.arrow.stream"', '"perSegmentPartials"', 'b"strata.error"',
                '"X-Druid-Response-Context"', '"X-Druid-Query-Id"']  # fmt: skip
    found = [
        f"{path.relative_to(ROOT)}: {literal}"
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.parent != ROOT / "strata" / "wire"
        for literal in literals
        if literal in path.read_text()
    ]
    assert not found, found
