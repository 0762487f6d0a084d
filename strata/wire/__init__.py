"""The contract between Strata's processes over HTTP: what the broker and a data node (and the
broker and its Arrow clients, such as the Spark data source) agree on, in one place.

- content types: Arrow IPC streams (`ARROW_STREAM`) for partials and streamed scans, JSON otherwise;
- headers: Druid's query id and response context (`missingSegments` travels in it);
- context keys that only cross processes (`perSegmentPartials`: the broker caches none of these
  partials, so the node may merge them into one; `segmentLabels`: a bulk reader of a scan's Arrow
  rows, the Spark data source, needs no segment id on each row, which would double what is sent);
- Arrow partial encoding and decoding (an IPC stream of one table, uncompressed);
- error bodies: Druid's `{"error", "errorMessage", "errorClass", "host"}` read from a reply, and the
  error a streamed Arrow answer carries in the custom metadata of its last (empty) batch.

Both sides import this module; nothing else spells these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import pyarrow as pa

from timeline import SegmentDescriptor

ARROW_STREAM = "application/vnd.apache.arrow.stream"
JSON = "application/json"

QUERY_ID_HEADER = "X-Druid-Query-Id"
SQL_QUERY_ID_HEADER = "X-Druid-SQL-Query-Id"  # the SQL API's own name for it
RESPONSE_CONTEXT_HEADER = "X-Druid-Response-Context"

PER_SEGMENT_PARTIALS = "perSegmentPartials"  # query context; false: the node may merge its partials
SEGMENT_LABELS = "segmentLabels"  # query context; false: a scan's Arrow rows go without `__segment`
MISSING_SEGMENTS = "missingSegments"  # response context: segments the node does not serve

ERROR_METADATA_KEY = b"strata.error"  # an Arrow stream's error: Druid's error body as JSON


def wants_arrow(accept: str | None) -> bool:
    """Whether an `Accept` header asks for Arrow partials (a broker) rather than Druid's JSON."""
    return bool(accept) and ARROW_STREAM in str(accept)


def encode_partials(table: pa.Table) -> bytes:
    """A data node's partials as one Arrow IPC stream."""
    return bytes(partials_stream(table))


def partials_stream(table: pa.Table) -> memoryview:
    """`encode_partials` without the copy into `bytes` (an HTTP response sends it as it is).

    The stream is measured first and written into one buffer of its size: a growing buffer
    reallocates as it fills, and every new piece of memory is paged in again (0.1-0.5 s for a
    136 MB partial of 2.7M groups, 0.01-0.06 s sized)."""
    size = pa.MockOutputStream()
    with pa.ipc.new_stream(size, table.schema) as counter:
        counter.write_table(table)
    buffer = pa.allocate_buffer(size.size())
    with pa.ipc.new_stream(pa.FixedSizeBufferWriter(buffer), table.schema) as writer:
        writer.write_table(table)
    return memoryview(buffer)


def decode_partials(payload: bytes) -> pa.Table | None:
    """The partials of an Arrow IPC stream; None for an empty body. Raises ArrowInvalid or OSError
    on a truncated or malformed stream."""
    if not payload:
        return None
    with pa.ipc.open_stream(pa.py_buffer(payload)) as reader:
        return reader.read_all()


def missing_segments_context(missing: Sequence[SegmentDescriptor]) -> str:
    """A data node's response context header: the segments it was asked for and does not serve."""
    context: dict[str, Any] = {}
    if missing:
        context[MISSING_SEGMENTS] = [d.to_json() for d in missing]
    return orjson.dumps(context).decode()


def parse_missing_segments(header: str | None) -> list[SegmentDescriptor]:
    """`missingSegments` of a data node's response context; a malformed header raises ValueError,
    KeyError or TypeError."""
    if not header:
        return []
    ctx = orjson.loads(header)
    return [SegmentDescriptor.from_json(d) for d in ctx.get(MISSING_SEGMENTS) or ()]


def error_body(content: bytes, text: str, status: int, server: str) -> dict[str, Any]:
    """Druid's error body of a failed reply; a reply that is not one becomes an `Unknown exception`
    naming the status, the server and the start of what it said."""
    try:
        body = orjson.loads(content)
        if not isinstance(body, dict):
            raise ValueError("not an object")
    except ValueError:
        said = text[:500] if content else ""
        return {"error": "Unknown exception", "errorMessage": f"HTTP {status} from {server}: {said}"}
    return body
