"""The data node's query endpoint, in process: JSON answers, Arrow partials, missing segments, errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from starlette.applications import Starlette

from strata.data_node.query_api import QueryEndpoint
from strata.data_node.served import ServedSegments
from strata.ingestion.api import ingest
from strata.storage import open_metadata_store
from strata.wire import ARROW_STREAM, SEGMENT_LABELS
from timeline import Interval, SegmentDescriptor


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, wikipedia_sample: Path, wikipedia_index_spec: Path):
    root = tmp_path_factory.mktemp("hist")
    spec = json.loads(wikipedia_index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")
    store = open_metadata_store(str(root / "meta.db"))
    segments = ServedSegments()
    for seg in store.used_segments("wikipedia"):
        segments.add(seg, seg.load_spec["path"])
    store.close()
    return segments


def post(app: Starlette, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            content = body if isinstance(body, bytes) else orjson.dumps(body)
            return await client.post("/druid/v2/", content=content, headers=headers or {})

    return asyncio.run(go())


def raw(sql: str, sample: Path) -> list[tuple[Any, ...]]:
    rel = f"read_json('{sample}', format='newline_delimited')"
    return duckdb.execute(sql.replace("RAW", rel)).fetchall()


@pytest.fixture(scope="module")
def app(served: ServedSegments) -> Starlette:
    return Starlette(routes=QueryEndpoint(served, "test-host:8083").routes())


def test_time_boundary_matches_raw_rows(app: Starlette, wikipedia_sample: Path) -> None:
    resp = post(app, {"queryType": "timeBoundary", "dataSource": "wikipedia"})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json")
    ((lo, hi),) = raw(
        "SELECT strftime(min(time::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.%gZ'), "
        "strftime(max(time::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.%gZ') FROM RAW",
        wikipedia_sample,
    )
    assert resp.json() == [{"timestamp": lo, "result": {"minTime": lo, "maxTime": hi}}]
    assert resp.headers["X-Druid-Query-Id"]


def test_scan_with_filter_counts_rows(app: Starlette, wikipedia_sample: Path) -> None:
    query = {
        "queryType": "scan",
        "dataSource": "wikipedia",
        "intervals": "2015-09-12/2015-09-13",
        "columns": ["page"],
        "filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"},
    }
    resp = post(app, query)
    rows = [e for batch in resp.json() for e in batch["events"]]
    ((want,),) = raw("SELECT count(*) FROM RAW WHERE channel = '#en.wikipedia'", wikipedia_sample)
    assert len(rows) == want


def test_segments_spec_reports_missing_segments_and_answers_the_rest(
    app: Starlette, served: ServedSegments
) -> None:
    present = sorted(served.segments(), key=lambda s: s.interval)[:2]
    missing = SegmentDescriptor(Interval.parse("2015-09-13/2015-09-14"), present[0].version, 0)
    spec = {"type": "segments", "segments": [s.descriptor.to_json() for s in present] + [missing.to_json()]}
    resp = post(
        app, {"queryType": "scan", "dataSource": "wikipedia", "intervals": spec, "columns": ["__time"]}
    )
    assert resp.status_code == 200
    context = json.loads(resp.headers["X-Druid-Response-Context"])
    assert context == {"missingSegments": [missing.to_json()]}
    ids = {batch["segmentId"] for batch in resp.json()}
    assert ids == {s.id for s in present}


def test_arrow_partials_are_labelled_by_segment(app: Starlette, served: ServedSegments) -> None:
    first = sorted(served.segments(), key=lambda s: s.interval)[0]
    query = {
        "queryType": "timeBoundary",
        "dataSource": "wikipedia",
        "intervals": {"type": "segments", "segments": [first.descriptor.to_json()]},
    }
    resp = post(app, query, {"Accept": ARROW_STREAM})
    assert resp.status_code == 200 and resp.headers["content-type"] == ARROW_STREAM
    table = pa.ipc.open_stream(resp.content).read_all()
    assert set(table.column("__segment").to_pylist()) == {first.id}


def test_a_scan_without_segment_labels(app: Starlette, wikipedia_sample: Path) -> None:
    """`segmentLabels: false` (the Spark reader): Arrow rows without `__segment`, the same rows."""
    query = {"queryType": "scan", "dataSource": "wikipedia", "intervals": "2015-09-12/2015-09-13",
             "columns": ["__time", "channel", "added"], "context": {SEGMENT_LABELS: False}}  # fmt: skip
    table = pa.ipc.open_stream(post(app, query, {"Accept": ARROW_STREAM}).content).read_all()
    assert table.column_names == ["__time", "channel", "added"]
    ((count, added),) = raw("SELECT count(*), sum(added) FROM RAW", wikipedia_sample)
    assert (table.num_rows, pc.sum(table.column("added")).as_py()) == (count, added)
    rows = [e for batch in post(app, query).json() for e in batch["events"]]  # JSON still answers
    assert len(rows) == count


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{not json", 400, "Json parse failed"),
        ({"queryType": "nope", "dataSource": "wikipedia", "intervals": "2015/2016"}, 400, "druidException"),
        ({"queryType": "scan", "dataSource": "wikipedia", "intervals": "garbage"}, 400, "druidException"),
        (
            {
                "queryType": "scan",
                "dataSource": "wikipedia",
                "intervals": "2015/2016",
                "filter": {
                    "type": "selector",
                    "dimension": "x",
                    "value": "y",
                    "extractionFn": {"type": "javascript", "function": "function(x) { return x; }"},
                },
            },
            501,
            "Unsupported operation",
        ),
    ],
)
def test_errors_have_druid_bodies(app: Starlette, body: Any, status: int, error: str) -> None:
    resp = post(app, body)
    assert resp.status_code == status
    got = resp.json()
    assert got["error"] == error and got["errorMessage"] and got["host"] == "test-host:8083"
    assert "errorClass" in got


def test_unknown_datasource_is_an_empty_answer(app: Starlette) -> None:
    resp = post(app, {"queryType": "timeBoundary", "dataSource": "nope"})
    assert resp.status_code == 200 and resp.json() == []
