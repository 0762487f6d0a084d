"""A fake data node for broker unit tests: answers the broker wire (Arrow partials, missingSegments).

Each served segment has a known (rows, total); the node answers the segments named in
`intervals.segments` that it serves, reports the others missing, and can misbehave on demand.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from timeline import DataSegment, Interval

ARROW = "application/vnd.apache.arrow.stream"


@dataclass
class FakeNode:
    serves: dict[str, tuple[DataSegment, int, int]] = field(default_factory=dict)  # id -> (seg, rows, total)
    mode: str = "ok"  # ok | error500 | truncate | slow | error400
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, segment: DataSegment, rows: int, total: int) -> None:
        self.serves[segment.id] = (segment, rows, total)

    def _find(self, d: dict[str, Any]) -> DataSegment | None:
        itvl = Interval.parse(d["itvl"])
        for seg, _, _ in self.serves.values():
            if seg.version == d["ver"] and seg.partition_num == d["part"] and seg.interval.contains(itvl):
                return seg
        return None


def node_app(node: FakeNode) -> Starlette:
    async def query(request: Request) -> Response:
        body = orjson.loads(await request.body())
        with node.lock:
            node.requests.append(body)
        if node.mode == "slow" or node.delay_s:
            await asyncio.sleep(node.delay_s or 30)
        if node.mode == "error500":
            err = {"error": "Unknown exception", "errorMessage": "disk on fire", "host": "fake"}
            return Response(orjson.dumps(err), 500, media_type="application/json")
        if node.mode == "error400":
            err = {"error": "Resource limit exceeded", "errorMessage": "too big", "host": "fake"}
            return Response(orjson.dumps(err), 400, media_type="application/json")
        descriptors = body["intervals"]["segments"]
        ids, rows, totals, missing = [], [], [], []
        for d in descriptors:
            seg = node._find(d)
            if seg is None:
                missing.append(d)
                continue
            _, r, t = node.serves[seg.id]
            ids.append(seg.id)
            rows.append(r)
            totals.append(t)
        table = pa.table(
            {
                "__segment": pa.array(ids, pa.string()),
                "rows": pa.array(rows, pa.int64()),
                "total": pa.array(totals, pa.int64()),
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        payload = sink.getvalue().to_pybytes()
        if node.mode == "truncate":
            payload = payload[: len(payload) // 2]
        headers = {"X-Druid-Response-Context": orjson.dumps({"missingSegments": missing}).decode()}
        return Response(payload, media_type=ARROW, headers=headers)

    async def cancel(request: Request) -> Response:
        node.cancels.append(request.path_params["qid"])
        return Response(status_code=202)

    return Starlette(
        routes=[
            Route("/druid/v2/", query, methods=["POST"]),
            Route("/druid/v2/{qid}", cancel, methods=["DELETE"]),
        ]
    )
