"""Druid's `bySegment` answer: one entry per segment read, each with its own finalized results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from broker_service.segment_cache import split_by_segment
from broker_service.segment_plan import SegmentTask
from strata.query import Query
from strata.server.json_response import encode_json
from timeline import format_instant


def by_segment_results(
    query: Query, fetched: Sequence[SegmentTask], partials: list[pa.Table]
) -> tuple[list[Any], bytes]:
    """Druid's bySegment shape: one entry per segment with its own finalized results."""
    parts = split_by_segment(partials, {t.segment_id for t in fetched})
    out = []
    for task in fetched:
        part = parts.get(task.segment_id)
        results = query.finalize(query.merge([part] if part is not None else []))
        out.append(
            {
                "timestamp": format_instant(task.descriptor.interval.start),
                "result": {
                    "results": results,
                    "segment": task.segment_id,
                    "interval": str(task.descriptor.interval),
                },
            }
        )
    return out, encode_json(out)
