"""`POST /v1/push/{dataSource}` (events in) and `POST /v1/push/{dataSource}/handoff`.

The answer comes only once the batch is durable (fsynced in the write-ahead log) and applied, and
counts what happened to every event: accepted, unparseable (with reasons), thrown away (outside
the window or for a bucket already handed off). Producer id and sequence number come from
`X-Strata-Producer-Id`/`-Seq` or Druid's `X-Firehose-Producer-Id`/`-Seq`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import numpy as np
import pyarrow as pa
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.ingestion.rollup import CHUNK
from strata.query.errors import QueryError
from strata.query.fields import JAVA_LONG_MAX
from strata.realtime.batch import BadBody, ParsedBatch, build_batch, encode_rows
from strata.realtime.errors import (
    BadPush,
    PushOverloaded,
    PushTooLarge,
    PushUnavailable,
    PushUnknownDataSource,
)
from strata.realtime.node import RealtimeNode
from strata.realtime.wal import WalError
from strata.server.json_response import json_response

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_QUEUED_LOG_BYTES = 64 * 1024 * 1024
PRODUCER_HEADERS = ("x-strata-producer-id", "x-firehose-producer-id")
SEQ_HEADERS = ("x-strata-producer-seq", "x-firehose-producer-seq")
# a producer id is kept in memory, in every log record and checkpoint for as long as the node runs
MAX_PRODUCER_ID_CHARS = 256
# Druid's sequence number is a Java long; the write-ahead log's JSON header holds no larger integer
MAX_PRODUCER_SEQ = JAVA_LONG_MAX
_SHOWN_CHARS = 40  # of a refused header value in the error message


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "...")


def _producer(request: Request) -> tuple[str | None, int | None]:
    """The producer id and sequence number, refused (400) before anything is read or logged."""
    producer = next((request.headers[h] for h in PRODUCER_HEADERS if h in request.headers), None)
    if producer is not None and not 0 < len(producer) <= MAX_PRODUCER_ID_CHARS:
        raise BadPush(f"producer id must have 1 to {MAX_PRODUCER_ID_CHARS} characters, got {len(producer)}")
    raw = next((request.headers[h] for h in SEQ_HEADERS if h in request.headers), None)
    if raw is None:
        return producer, None
    if producer is None:
        raise BadPush("a producer sequence number needs a producer id (X-Strata-Producer-Id)")
    try:
        seq = int(raw)
    except ValueError:
        raise BadPush(f"producer sequence number must be an integer, got {_shown(raw)}") from None
    if seq < 0:
        raise BadPush(f"producer sequence number must be >= 0, got {_shown(raw)}")
    if seq > MAX_PRODUCER_SEQ:
        raise BadPush(
            f"producer sequence number must be at most {MAX_PRODUCER_SEQ} (a 64-bit long, as in Druid), "
            f"got {_shown(raw)}"
        )
    return producer, seq


class PushEndpoint:
    def __init__(self, node: RealtimeNode, host: str, max_body_bytes: int = MAX_BODY_BYTES):
        self.node = node
        self.host = host
        self.max_body_bytes = max_body_bytes
        self.counts = {
            "received": 0,
            "accepted": 0,
            "unparseable": 0,
            "thrownAway": 0,
            "duplicates": 0,
            "rejected": 0,
        }

    def routes(self) -> list[Route]:
        return [
            Route("/v1/push/{data_source}", self.push, methods=["POST"]),
            Route("/v1/push/{data_source}/handoff", self.handoff, methods=["POST"]),
        ]

    def _error(self, err: QueryError) -> Response:
        headers = {}
        retry = getattr(err, "retry_after", None)
        if retry is not None:
            headers["Retry-After"] = str(retry)
        self.counts["rejected"] += 1
        return json_response(err.to_body(self.host), err.status, headers=headers)

    def _check_source(self, request: Request) -> None:
        name = request.path_params["data_source"]
        if name != self.node.spec.data_source:
            raise PushUnknownDataSource(
                f"this real-time node ingests [{self.node.spec.data_source}], not [{name}]"
            )

    async def handoff(self, request: Request) -> Response:
        try:
            self._check_source(request)
        except QueryError as e:
            return self._error(e)
        ids = self.node.handoff()
        return json_response({"handingOff": ids})

    async def push(self, request: Request) -> Response:
        try:
            self._check_source(request)
            producer, seq = _producer(request)
            if producer is not None and seq is not None:
                done = await self._duplicate(producer, seq)
                if done is not None:
                    return json_response(done)
            body = await self._read_body(request)
            self._check_pressure()
            if producer is not None and seq is not None:
                return await self._push_once(producer, seq, body)
            return json_response(await self._ingest(body, None, None))
        except QueryError as e:
            return self._error(e)

    async def _duplicate(self, producer: str, seq: int) -> dict[str, Any] | None:
        """The earlier answer when this batch was already applied (or is being applied right now)."""
        producers = self.node.index.producers
        running = producers.inflight(producer, seq)
        if running is not None:
            with contextlib.suppress(Exception):  # the first attempt failed: this one applies instead
                await asyncio.shield(running)
        if producers.seen(producer, seq):
            self.counts["duplicates"] += 1
            answer = producers.answer(producer, seq) or {}
            return {
                **answer,
                "eventCount": answer.get("accepted", 0),
                "duplicate": True,
                "producerId": producer,
                "producerSeq": seq,
            }
        return None

    async def _push_once(self, producer: str, seq: int, body: bytes) -> Response:
        producers = self.node.index.producers
        done = await self._duplicate(producer, seq)  # a retry may have started while the body was read
        if done is not None:
            return json_response(done)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        producers.begin(producer, seq, future)
        try:
            answer = await self._ingest(body, producer, seq)
            future.set_result(answer)
            return json_response(answer)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: a failed attempt is not an unhandled error
            raise
        finally:
            producers.end(producer, seq)

    async def _read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise PushTooLarge(
                f"the body has {declared} bytes; at most {self.max_body_bytes} are taken per push: split it"
            )
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise PushTooLarge(
                    f"the body exceeds {self.max_body_bytes} bytes; split it into smaller pushes"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _check_pressure(self) -> None:
        node = self.node
        if node.over_limits(2.0):
            node.request_persist()
            raise PushOverloaded(
                f"{node.index.rows_in_memory()} rows ({node.index.bytes_in_memory()} bytes) wait for a "
                f"persist; retry shortly"
            )
        if node.wal.queued_bytes > MAX_QUEUED_LOG_BYTES:
            raise PushOverloaded("the write-ahead log is behind; retry shortly")

    async def _ingest(self, body: bytes, producer: str | None, seq: int | None) -> dict[str, Any]:
        node = self.node
        idx = node.index
        try:
            batch = await asyncio.to_thread(
                build_batch, body, node.spec, list(idx.dimensions), node.window_start(), node.window_end()
            )
        except BadBody as e:
            raise BadPush(str(e)) from None
        if batch.received and batch.unparseable == batch.received:
            raise BadPush(
                f"none of the {batch.received} events could be parsed", context={"parseErrors": batch.reasons}
            )
        self._refuse_closed(batch)
        counts = batch.counts()
        if not batch.rows.num_rows and producer is None:
            return self._answer(counts, batch, None)
        chunks: Any = np.unique(batch.rows.column(CHUNK).to_numpy()) if batch.rows.num_rows else []
        await node.buckets.ensure(idx, [int(c) for c in chunks])  # new buckets become pending segments
        known = {d.name for d in idx.dimensions}
        header = {
            "producer": producer,
            "seq": seq,
            "counts": counts,
            "maxTime": batch.max_time,
            "buckets": {str(int(c)): idx.version_for(int(c)) for c in chunks},
            "dimensions": [
                {"name": d.name, "type": d.type, "multiValueHandling": d.multi_value_handling}
                for d in batch.dimensions
                if d.name not in known
            ],
        }
        payload = encode_rows(batch.rows) if batch.rows.num_rows else b""
        try:
            record = await node.log_batch(header, payload)
        except WalError as e:
            log.warning("push not acknowledged: %s", e)
            node.request_persist()  # moves the log's rows into parts and frees its files
            raise PushUnavailable(f"{e}; the batch was not acknowledged, retry later") from None
        return self._answer(counts, batch, record.lsn)

    def _refuse_closed(self, batch: ParsedBatch) -> None:
        if not batch.rows.num_rows:
            return
        chunks = batch.rows.column(CHUNK).to_numpy()
        refused = {int(c): why for c in np.unique(chunks) if (why := self.node.index.refuses(int(c)))}
        if refused:
            keep = ~np.isin(chunks, np.fromiter(refused, np.int64))
            dropped = int((~keep).sum())
            batch.rows = batch.rows.filter(pa.array(keep))
            batch.thrown_away += dropped
            batch.reasons.append(f"{dropped} events for a closed bucket: {'; '.join(set(refused.values()))}")

    def _answer(self, counts: dict[str, Any], batch: ParsedBatch, lsn: int | None) -> dict[str, Any]:
        for k in ("received", "accepted", "unparseable", "thrownAway"):
            self.counts[k] += counts[k]
        return {"eventCount": counts["accepted"], **counts, "parseErrors": batch.reasons, "lsn": lsn}
