"""A scan of whole segments with nothing to compute (the Spark reader's request to a data node) is
read from the segment files without DuckDB: the same rows as the raw input, the same Arrow answer
as the DuckDB scan, and the DuckDB scan still answers whatever it cannot take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from starlette.applications import Starlette

import strata.data_node.query_api as query_api
from strata.engine import whole_scan
from strata.wire import ARROW_STREAM, SEGMENT_LABELS
from tests.historical_query.test_query_api import post, raw, served  # noqa: F401  (fixture)

COLUMNS = ["__time", "channel", "page", "cityName", "added", "deleted"]
FRENCH = {"type": "selector", "dimension": "channel", "value": "#fr.wikipedia"}


def _scan(app: Starlette, intervals: Any, columns: list[str] = COLUMNS, **extra: Any) -> pa.Table:
    query = {"queryType": "scan", "dataSource": "wikipedia", "intervals": intervals, "columns": columns,
             "context": {SEGMENT_LABELS: False}, **extra}  # fmt: skip
    resp = post(app, query, {"Accept": ARROW_STREAM})
    assert resp.status_code == 200, resp.text
    return pa.ipc.open_stream(resp.content).read_all()


@pytest.fixture()
def app(served):  # noqa: F811
    return Starlette(routes=query_api.QueryEndpoint(served, "test-host:8083").routes())


@pytest.fixture()
def whole_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the requests answered from the files (the DuckDB scan still runs for the rest)."""
    used: list[int] = []
    real = whole_scan.whole_scan_schema

    def counting(query: Any, inputs: Any) -> Any:
        schema = real(query, inputs)
        used.append(schema is not None)
        return schema

    monkeypatch.setattr(query_api, "whole_scan_schema", counting)
    return used


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True),
                  key=repr)  # fmt: skip


def test_whole_segments_equal_the_raw_rows(app, whole_scans, wikipedia_sample: Path) -> None:
    table = _scan(app, "2015-09-12/2015-09-13")
    assert whole_scans == [True]
    assert table.schema == pa.schema([("__time", pa.int64()), ("channel", pa.string()), ("page", pa.string()),
                                      ("cityName", pa.string()), ("added", pa.int64()),
                                      ("deleted", pa.int64())])  # fmt: skip
    expected = raw(
        "SELECT epoch_ms(CAST(time AS TIMESTAMP)), channel, page, NULLIF(cityName, ''), added, deleted FROM RAW",
        wikipedia_sample,
    )
    assert _rows(table) == sorted(expected, key=repr)


def test_same_answer_as_the_duckdb_scan(app, whole_scans, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _scan(app, "2015-09-12/2015-09-13")
    monkeypatch.setattr(query_api, "whole_scan_schema", lambda query, inputs: None)
    slow = _scan(app, "2015-09-12/2015-09-13")
    assert fast.schema == slow.schema
    assert fast.equals(slow)  # rows in the same order too


@pytest.mark.parametrize(
    ("intervals", "columns", "extra"),
    [
        ("2015-09-12T01:30:00/2015-09-12T05:00:00", COLUMNS, {}),  # an hour read in part
        ("2015-09-12/2015-09-13", COLUMNS, {"filter": FRENCH}),
        ("2015-09-12/2015-09-13", COLUMNS, {"limit": 10}),
        ("2015-09-12/2015-09-13", [*COLUMNS, "no_such_column"], {}),
    ],
)
def test_the_duckdb_scan_answers_the_rest(
    app, whole_scans, wikipedia_sample: Path, intervals, columns, extra
):
    table = _scan(app, intervals, columns, **extra)
    assert whole_scans == [False]
    if "limit" in extra:
        assert table.num_rows == 10
        return
    where = "channel = '#fr.wikipedia'" if "filter" in extra else "true"
    start, end = intervals.split("/")
    (expected,) = raw(
        f"SELECT count(*) FROM RAW WHERE {where} AND CAST(time AS TIMESTAMP) >= TIMESTAMP '{start}'"
        f" AND CAST(time AS TIMESTAMP) < TIMESTAMP '{end}'",
        wikipedia_sample,
    )
    assert table.num_rows == expected[0]


def test_a_cancel_stops_a_whole_scan(served, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """`DELETE /druid/v2/{id}` while the files are read: the answer is Druid's cancel error, not rows."""
    endpoint = query_api.QueryEndpoint(served, "test-host:8083")
    real = whole_scan.whole_scan_batches
    read: list[int] = []

    def cancelled_midway(schema: Any, inputs: Any, rows: int) -> Any:
        for i, batch in enumerate(real(schema, inputs, rows)):
            if i == 1:
                endpoint.running.cancel("q-cancel")  # as the DELETE route does
            read.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(query_api, "whole_scan_batches", cancelled_midway)
    app = Starlette(routes=endpoint.routes())
    resp = post(app, {"queryType": "scan", "dataSource": "wikipedia", "intervals": "2015-09-12/2015-09-13",
                      "columns": COLUMNS, "context": {SEGMENT_LABELS: False, "queryId": "q-cancel"}},
                {"Accept": ARROW_STREAM})  # fmt: skip
    assert resp.json()["error"] == "Query cancelled"
    assert 1 < len(read) < 24  # stopped after the cancel, long before the day's 24 segments
