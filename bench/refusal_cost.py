"""What one refused query costs the broker's event loop: the broker's ASGI app called in-process
with a full low lane, CPU time per request (HTTP parsing by the server comes on top, the same for
every request).

    python -m bench.refusal_cost [--requests 5000]

Under a flood of heavy statements retried at once, the broker answers hundreds of 429s a second on
the loop its cheap queries need (bench.overload); this isolates their price from the host's load,
beside a `/status/health` for scale. CPU time, not wall time: a figure worth comparing on a shared
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import orjson
from starlette.types import ASGIApp, Message

from bench.measure import log
from broker_service.app import create_app
from broker_service.broker import Broker, BrokerSettings
from broker_service.laning import LOW, hilo
from broker_service.server_view import BrokerServerView

GROUPBY = {"queryType": "groupBy", "dataSource": "groups", "intervals": ["2015-09-12/2015-09-13"],
           "granularity": "all", "dimensions": ["country", "page"],
           "aggregations": [{"type": "count", "name": "c"}],
           "context": {"priority": -1, "timeout": 60000}}  # fmt: skip
CROSS_JOIN = {"query": "SELECT * FROM wikipedia, wikipedia, wikipedia", "context": {"priority": -1}}


async def call(app: ASGIApp, method: str, path: str, body: bytes) -> int:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8082)}  # fmt: skip
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status: int = sent[0]["status"]
    return status


async def cost(app: ASGIApp, method: str, path: str, body: bytes, requests: int, want: int) -> float:
    """Microseconds of CPU per request (after a warm-up)."""
    for _ in range(50):
        assert await call(app, method, path, body) == want
    started = time.process_time()
    for _ in range(requests):
        await call(app, method, path, body)
    return round((time.process_time() - started) / requests * 1e6, 1)


async def measure(requests: int) -> dict[str, Any]:
    broker = Broker(BrokerSettings(max_concurrent_queries=8, query_queue=16, laning=hilo(8, 25)),
                    BrokerServerView(), None)  # fmt: skip
    app = create_app(broker)
    broker.admission.lane_running[LOW] = broker.admission.laning.limits[LOW]  # the low lane is full
    out = {
        "health_us": await cost(app, "GET", "/status/health", b"", requests, 200),
        "native_429_us": await cost(app, "POST", "/druid/v2/", orjson.dumps(GROUPBY), requests, 429),
        "sql_429_us": await cost(app, "POST", "/druid/v2/sql", orjson.dumps(CROSS_JOIN), requests, 429),
    }
    await broker.client.close()
    broker.merge_pool.shutdown(wait=False)
    broker.relational.close()
    return out


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    report = asyncio.run(measure(args.requests))
    log(f"CPU per request, in-process ASGI: {report}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
