"""The streamed Arrow scan's fixed schema: types merged across segments, partials conformed to it."""

from __future__ import annotations

import pyarrow as pa

from broker_service.arrow_scan import TIME_TYPE, conform, stream_schema
from broker_service.scan_types import merge_types
from strata.query import parse_query


def test_merge_types_widens_numbers_and_falls_back_to_string() -> None:
    got = merge_types([{"a": "LONG", "b": "LONG", "c": "STRING", "d": "FLOAT"},
                       {"a": "DOUBLE", "b": "STRING", "c": "STRING", "e": "LONG"}])  # fmt: skip
    assert got == {"a": "DOUBLE", "b": "STRING", "c": "STRING", "d": "FLOAT", "e": "LONG"}


def test_partials_are_conformed_to_the_stream_schema() -> None:
    query = parse_query({"queryType": "scan", "dataSource": "x", "intervals": "2020/2021",
                         "columns": ["__time", "n", "s", "absent"]})  # fmt: skip
    schema = stream_schema(query, {"n": "DOUBLE", "s": "STRING"})  # type: ignore[arg-type]
    assert schema.types == [TIME_TYPE, pa.float64(), pa.string(), pa.string()]
    partial = pa.table({"__segment": ["seg"] * 2, "__time": pa.array([1, 2], pa.int64()),
                        "n": pa.array([1, None], pa.int64()),
                        "s": pa.array(["a", "b"]).dictionary_encode()})  # fmt: skip
    out = conform(partial, schema)
    assert out.schema == schema
    assert out.column("__time").cast(pa.int64()).to_pylist() == [1, 2]
    assert out.to_pydict()["n"] == [1.0, None] and out.to_pydict()["absent"] == [None, None]
