"""The query context: Druid's per-query knobs, parsed once with Druid's defaults."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strata.query.errors import invalid
from strata.query.fields import as_object, get_bool, get_int, get_str
from strata.query.header_values import header_value
from strata.wire import PER_SEGMENT_PARTIALS, SEGMENT_LABELS

DEFAULT_TIMEOUT_MS = 300_000
DEFAULT_MIN_TOPN_THRESHOLD = 1000


@dataclass(frozen=True, slots=True)
class QueryContext:
    """Known keys typed; the raw mapping is kept so unknown keys travel to data nodes untouched."""

    raw: Mapping[str, Any] = field(default_factory=dict)
    query_id: str = ""
    timeout_ms: int = DEFAULT_TIMEOUT_MS  # 0 = no timeout
    priority: int = 0
    finalize: bool = True
    use_cache: bool = True
    populate_cache: bool = True
    use_result_level_cache: bool = True
    populate_result_level_cache: bool = True
    by_segment: bool = False
    skip_empty_buckets: bool = False
    grand_total: bool = False
    min_topn_threshold: int = DEFAULT_MIN_TOPN_THRESHOLD
    return_partial_results: bool = False
    num_retries_on_missing_segments: int = 1
    uncovered_intervals_limit: int = 0
    serialize_date_time_as_long: bool = False
    result_as_array: bool = False
    # groupBy explodes multi-value dimensions; False makes one an error (Druid's key)
    multi_value_unnesting: bool = True
    # broker -> data node: False when the broker caches none of the segments it asks for, so the
    # node may send one partial merged over them (Druid's historicals merge unless bySegment)
    per_segment_partials: bool = True
    # a bulk reader -> data node: False when a scan's rows need no `__segment` label
    segment_labels: bool = True

    @classmethod
    def parse(cls, value: Any) -> QueryContext:
        raw = dict(as_object(value, "context")) if value is not None else {}
        # the id comes back in the X-Druid-Query-Id header: a NUL or line break there drops the connection
        query_id = header_value("queryId", get_str(raw, "queryId", "")) or str(uuid.uuid4())
        return cls(
            raw=raw,
            query_id=query_id,
            timeout_ms=get_int(raw, "timeout", DEFAULT_TIMEOUT_MS, what="context", minimum=0),
            priority=get_int(raw, "priority", 0, what="context"),
            finalize=get_bool(raw, "finalize", True, what="context"),
            use_cache=get_bool(raw, "useCache", True, what="context"),
            populate_cache=get_bool(raw, "populateCache", True, what="context"),
            use_result_level_cache=get_bool(raw, "useResultLevelCache", True, what="context"),
            populate_result_level_cache=get_bool(raw, "populateResultLevelCache", True, what="context"),
            by_segment=get_bool(raw, "bySegment", False, what="context"),
            skip_empty_buckets=get_bool(raw, "skipEmptyBuckets", False, what="context"),
            grand_total=get_bool(raw, "grandTotal", False, what="context"),
            min_topn_threshold=get_int(
                raw, "minTopNThreshold", DEFAULT_MIN_TOPN_THRESHOLD, what="context", minimum=1
            ),
            return_partial_results=get_bool(raw, "returnPartialResults", False, what="context"),
            num_retries_on_missing_segments=get_int(
                raw, "numRetriesOnMissingSegments", 1, what="context", minimum=0
            ),
            uncovered_intervals_limit=get_int(raw, "uncoveredIntervalsLimit", 0, what="context", minimum=0),
            serialize_date_time_as_long=get_bool(raw, "serializeDateTimeAsLong", False, what="context"),
            result_as_array=get_bool(raw, "resultAsArray", False, what="context"),
            multi_value_unnesting=get_bool(raw, "groupByEnableMultiValueUnnesting", True, what="context"),
            per_segment_partials=get_bool(raw, PER_SEGMENT_PARTIALS, True, what="context"),
            segment_labels=get_bool(raw, SEGMENT_LABELS, True, what="context"),
        )

    def to_json(self) -> dict[str, Any]:
        out = dict(self.raw)
        out["queryId"] = self.query_id
        return out

    def with_values(self, **values: Any) -> QueryContext:
        """A copy with raw context keys overridden (e.g. what the broker sends downstream)."""
        raw = dict(self.raw)
        raw.update(values)
        raw.setdefault("queryId", self.query_id)
        return QueryContext.parse(raw)


def timeout_within(raw: Mapping[str, Any], default_ms: int, max_ms: int) -> int:
    """A query's timeout in ms (0: none) under a server's default (Druid's
    druid.server.http.defaultQueryTimeout) and maximum (maxQueryTimeout, 0: none). Past the maximum
    is Druid's 400; no timeout at all, where a maximum is set, is the maximum."""
    timeout = int(get_int(raw, "timeout", default_ms, what="context", minimum=0))
    if max_ms <= 0:
        return timeout
    if timeout > max_ms:
        raise invalid(
            "configured [timeout = %d] is more than enforced limit of maxQueryTimeout [%d].", timeout, max_ms
        )
    return timeout or max_ms


def scatter_gather_bytes_within(raw: Mapping[str, Any], max_bytes: int) -> int:
    """Bytes of partials the broker may gather from data nodes for a query (0: no limit): the
    context's `maxScatterGatherBytes` under the broker's (Druid's
    druid.server.http.maxScatterGatherBytes, 0: none). A context may lower it, never raise it:
    past it is Druid's 400."""
    key = "maxScatterGatherBytes"
    asked = 0 if raw.get(key) is None else int(get_int(raw, key, what="context", minimum=1))
    if max_bytes <= 0:
        return asked
    if asked > max_bytes:
        raise invalid(
            "configured [maxScatterGatherBytes = %d] is more than enforced limit of [%d].", asked, max_bytes
        )
    return asked or max_bytes
