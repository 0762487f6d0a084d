"""A broker's footer-answerable timeseries is answered on the data node's event loop, equal to the
raw rows; anything else, and the first look at a file, still goes to the worker pool.

Oracle: per-segment row counts and `__time` bounds computed in plain Python from the rows written.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pyarrow as pa
import pytest
from starlette.applications import Starlette

from strata.data_node.query_api import QueryEndpoint
from strata.engine import SegmentInput
from strata.query import Query
from strata.wire import ARROW_STREAM
from tests.query.segment_fixtures import write_segments
from timeline import SegmentDescriptor, format_instant

START = 1_577_836_800_000  # 2020-01-01
HOUR = 3_600_000
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"


class Segments:
    def __init__(self, inputs: list[SegmentInput]) -> None:
        self.inputs = inputs

    def inputs_for_intervals(self, query: Query) -> list[SegmentInput]:
        """Each segment clipped to the query's one interval, as a node's timeline clips it."""
        wanted = query.segment_spec.intervals[0]
        clipped = [(i, i.interval.overlap(wanted)) for i in self.inputs]
        return [SegmentInput(i.segment_id, i.descriptor, i.path, w) for i, w in clipped if w is not None]

    def input_for_descriptor(self, data_source: str, descriptor: SegmentDescriptor) -> SegmentInput | None:
        return next((i for i in self.inputs if i.descriptor == descriptor), None)


class CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, list[SegmentInput]]:
    rng = np.random.default_rng(9)
    times = np.sort(START + rng.integers(0, 4 * HOUR, 500))
    table = pa.table(
        {
            "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 3, len(times))]),
            "bytes": pa.array(rng.integers(-100, 100, len(times)), pa.int64()),
        }
    )
    out = Path(tmp_path_factory.mktemp("inline"))
    return times, write_segments(table, out, "hour", data_source="t", dimensions=["country"])


def _post(app: Starlette, body: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"Accept": ARROW_STREAM}
            return await client.post("/druid/v2/", content=orjson.dumps(body), headers=headers)

    return asyncio.run(go())


def _body(inputs: list[SegmentInput], aggregations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    segments = [i.descriptor.to_json() for i in inputs]
    return {"queryType": "timeseries", "dataSource": "t", "granularity": "all", "aggregations": aggregations,
            "intervals": {"type": "segments", "segments": segments}, **extra}  # fmt: skip


def test_footer_answers_skip_the_pool_and_match_the_rows(data: tuple[np.ndarray, list[SegmentInput]]) -> None:
    times, inputs = data
    pool = CountingPool()
    endpoint = QueryEndpoint(Segments(inputs), "test:8083", pool)
    app = Starlette(routes=endpoint.routes())
    aggs = [{"type": "count", "name": "n"}, {"type": "longMax", "name": "hi", "fieldName": "bytes"},
            {"type": "longMin", "name": "first", "fieldName": "__time"}]  # fmt: skip
    body = _body(inputs, aggs)
    first = _post(app, body)  # footers not parsed yet: read in the pool
    assert first.status_code == 200 and pool.submitted == 1
    answers = []
    for _ in range(2):
        resp = _post(app, body)
        assert resp.status_code == 200 and resp.headers["content-type"] == ARROW_STREAM
        answers.append(pa.ipc.open_stream(resp.content).read_all())
    assert pool.submitted == 1  # answered on the event loop
    by_segment = {r["__segment"]: r for r in answers[-1].to_pylist()}
    expected = {}
    hours = (times - START) // HOUR
    for inp in inputs:
        h = (inp.interval.start - START) // HOUR
        in_hour = times[hours == h]
        expected[inp.segment_id] = (len(in_hour), int(in_hour.min()))
    got = {s: (r["a0"], r["a2"]) for s, r in by_segment.items()}
    assert got == expected
    assert {r["__bucket"] for r in by_segment.values()} == {v[1] for v in expected.values()}
    assert answers[0].equals(pa.ipc.open_stream(first.content).read_all())
    # a filter needs the rows: the pool again
    filtered = _body(inputs, aggs, filter={"type": "selector", "dimension": "country", "value": "c1"})
    assert _post(app, filtered).status_code == 200 and pool.submitted == 2
    pool.shutdown()


def test_segments_read_in_part_go_to_the_pool(data: tuple[np.ndarray, list[SegmentInput]]) -> None:
    times, inputs = data
    pool = CountingPool()
    app = Starlette(routes=QueryEndpoint(Segments(inputs), "test:8083", pool).routes())
    cut = START + HOUR // 2  # the first hour read from its middle: the footer's count is too many
    body = {"queryType": "timeseries", "dataSource": "t", "granularity": "all",
            "aggregations": [{"type": "count", "name": "n"}],
            "intervals": [f"{format_instant(cut)}/{format_instant(START + 4 * HOUR)}"]}  # fmt: skip
    for _ in range(2):
        resp = _post(app, body)
        assert resp.status_code == 200
        table = pa.ipc.open_stream(resp.content).read_all()
        assert sum(table.column("a0").to_pylist()) == int((times >= cut).sum())
    assert pool.submitted == 2
    pool.shutdown()
