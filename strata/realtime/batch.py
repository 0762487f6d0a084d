"""A pushed body -> the rows to keep, the unparseable ones (with reasons) and those outside the window.

Parsing reuses the batch ingestion's pieces: rows become an Arrow table (`table_from_rows`), then
the same normalizer types timestamps, dimensions and metric inputs and reports bad rows. Kept
rows come out as segment rows without rollup (`__chunk`, `__time` truncated to the query
granularity, dimensions, one metric value per row), which is also what the write-ahead log holds.
Pure and CPU-bound: the node runs it in a worker thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from strata.ingestion.block import Block
from strata.ingestion.flatten import flatten_table
from strata.ingestion.normalize import TIME, discover_dimensions, normalize_block
from strata.ingestion.readers import read_json_block
from strata.ingestion.rollup import CHUNK, segment_rows
from strata.ingestion.spec import DimensionSpec
from strata.realtime.spec import RealtimeSpec

MAX_REASONS = 20


class BadBody(ValueError):
    """The body is not a JSON array of objects nor newline-delimited JSON objects."""


@dataclass
class ParsedBatch:
    rows: pa.Table  # __chunk, __time (int64 ms), dimensions, metrics
    dimensions: list[DimensionSpec]
    received: int = 0
    unparseable: int = 0
    thrown_away: int = 0
    reasons: list[str] = field(default_factory=list)
    max_time: int | None = None

    def counts(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "accepted": self.rows.num_rows,
            "unparseable": self.unparseable,
            "thrownAway": self.thrown_away,
        }


def read_body(body: bytes, exact: frozenset[str] | None = frozenset()) -> Block:
    """The events of a body as the batch ingestion reads a JSON file: Arrow's JSON reader in one
    pass, or line by line when some lines are bad (each reported by its number: the line, or the
    element of a JSON array)."""
    text = body.lstrip()
    if not text:
        return Block(pa.table({}), "push", 1)
    if text[:1] == b"[":
        try:
            items = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise BadBody(f"the body is not valid JSON: {e}") from None
        if not isinstance(items, list):
            raise BadBody("a JSON body must be an array of event objects")
        body = b"\n".join(orjson.dumps(item) for item in items)
    elif text[:1] != b"{":
        raise BadBody("the body must be a JSON array of events or newline-delimited JSON objects")
    return read_json_block(body, "push", 1, use_threads=False, exact=exact)


def build_batch(
    body: bytes,
    spec: RealtimeSpec,
    known: Sequence[DimensionSpec],
    min_time: int | None,
    max_time_allowed: int | None = None,
) -> ParsedBatch:
    """Rows to keep; events before `min_time` or after `max_time_allowed` are outside the window
    (None: unbounded on that side)."""
    ingestion = spec.as_ingestion_spec()
    block = read_body(body, ingestion.input_format.exact_columns)
    if ingestion.input_format.flatten is not None:
        block = dataclasses.replace(block, table=flatten_table(block.table, ingestion.input_format.flatten))
    dims = list(known)
    if spec.dimensions.discover:
        dims = discover_dimensions(block.table, ingestion, dims)
    norm = normalize_block(block, ingestion, dims)
    problems = sorted(block.problems + norm.problems, key=lambda p: p.line)
    reasons = [f"event {p.line}: {p.message}" for p in problems]
    kept = norm.table
    times = kept.column(TIME).to_numpy()
    thrown_away = norm.filtered
    if times.size and (min_time is not None or max_time_allowed is not None):
        early = times < min_time if min_time is not None else np.zeros(times.size, dtype=bool)
        late = times > max_time_allowed if max_time_allowed is not None else np.zeros(times.size, dtype=bool)
        inside = ~(early | late)
        thrown_away += int((~inside).sum())
        if thrown_away:
            kept, times = kept.filter(pa.array(inside)), times[inside]
        if early.any():
            reasons.append(f"{int(early.sum())} events before the window start {min_time} ms (windowPeriod)")
        if late.any():
            end = max_time_allowed
            reasons.append(f"{int(late.sum())} events after the window end {end} ms (windowPeriod)")
    max_time = int(times.max()) if times.size else None
    kept = kept.set_column(0, TIME, pa.array(spec.granularity.query.bucket_starts(times), pa.int64()))
    kept = kept.append_column(CHUNK, pa.array(spec.granularity.segment.bucket_starts(times), pa.int64()))
    rows = segment_rows(kept, dims, spec.metrics, False)
    return ParsedBatch(
        rows,
        dims,
        received=block.table.num_rows + len(block.problems),
        unparseable=len(block.problems) + norm.bad_rows,
        thrown_away=thrown_away,
        reasons=reasons[:MAX_REASONS],
        max_time=max_time,
    )


def split_by_chunk(rows: pa.Table) -> dict[int, pa.Table]:
    """Rows per time bucket, `__chunk` dropped and `__time` typed as in segment files."""
    if not rows.num_rows:
        return {}
    chunks = rows.column(CHUNK).to_numpy()
    body = rows.drop_columns([CHUNK])
    body = body.set_column(0, TIME, body.column(TIME).cast(pa.timestamp("ms", tz="UTC")))
    starts = np.unique(chunks)
    if starts.size == 1:
        return {int(starts[0]): body}
    return {int(s): body.filter(pa.array(chunks == s)) for s in starts}


def encode_rows(rows: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    stream: bytes = sink.getvalue().to_pybytes()
    return stream


def decode_rows(body: bytes) -> pa.Table:
    with pa.ipc.open_stream(pa.py_buffer(body)) as reader:
        return reader.read_all()
