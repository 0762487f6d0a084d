"""Test helpers: segments, a uvicorn server in a background thread, a minimal query type."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import uvicorn

from strata.cli.local_servers import free_port
from strata.query import Query
from strata.query.base import CommonFields
from strata.query.context import QueryContext
from strata.query.segment_spec import IntervalsSpec
from timeline import DataSegment, Interval, ShardSpec


def segment(
    ds: str = "wiki",
    interval: str = "2015-09-12/2015-09-13",
    version: str = "v1",
    part: int = 0,
    partitions: int = 1,
    dims: Sequence[str] = ("page",),
    metrics: Sequence[str] = ("added",),
) -> DataSegment:
    shard = ShardSpec.numbered(part, partitions) if partitions > 1 else ShardSpec.none()
    return DataSegment(
        ds,
        Interval.parse(interval),
        version,
        {"type": "local", "path": "/x"},
        tuple(dims),
        tuple(metrics),
        shard,
    )


@contextmanager
def serve(app: Any, port: int | None = None) -> Iterator[int]:
    """Run an ASGI app on a (free) loopback port in a background thread; stops on exit."""
    port = port or free_port()
    # a long poll still open when the test ends must not hold the shutdown for the join's 10 s
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        if not thread.is_alive():
            raise RuntimeError("test server failed to start")
        threading.Event().wait(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass(frozen=True, kw_only=True)
class SumQuery(Query):
    """A tiny query type for broker unit tests: partials are (__segment, rows, total) rows."""

    query_type = "testSum"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> SumQuery:
        return cls(**common.as_kwargs())

    def to_json(self) -> dict[str, Any]:
        return self.common_json()

    def run_partials(self, conn: Any, inputs: Any) -> pa.Table:
        raise NotImplementedError

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        tables = [t for t in partials if t.num_rows]
        if not tables:
            return pa.table({"rows": pa.array([0], pa.int64()), "total": pa.array([0], pa.int64())})
        t = pa.concat_tables(tables)
        return pa.table({"rows": [pc.sum(t["rows"]).as_py()], "total": [pc.sum(t["total"]).as_py()]})

    def finalize(self, merged: pa.Table) -> list[Any]:
        return [{"rows": merged["rows"][0].as_py(), "total": merged["total"][0].as_py()}]

    def cache_key(self) -> bytes:
        return b"testSum"


def sum_query(interval: str = "2015-09-12/2015-09-13", ds: str = "wiki", **context: Any) -> SumQuery:
    return SumQuery(
        data_source=ds,
        segment_spec=IntervalsSpec((Interval.parse(interval),)),
        context=QueryContext.parse(context or None),
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)
