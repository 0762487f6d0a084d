"""Column types of the segments a streamed Arrow scan reads, learned once per segment."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

import orjson

from broker_service.query_runner import QueryRunner
from broker_service.segment_plan import SegmentTask
from strata.query import parse_query
from strata.query.scan import ScanQuery
from strata.query.segment_spec import SegmentsSpec

_NUMERIC_RANK = {"LONG": 1, "FLOAT": 2, "DOUBLE": 3}


def merge_types(per_segment: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """One type per column across segments: numeric types widen, any other mix is STRING."""
    out: dict[str, str] = {}
    for types in per_segment:
        for name, kind in types.items():
            prev = out.get(name)
            if prev is None or prev == kind:
                out[name] = kind
            elif prev in _NUMERIC_RANK and kind in _NUMERIC_RANK:
                out[name] = max(prev, kind, key=_NUMERIC_RANK.__getitem__)
            else:
                out[name] = "STRING"
    return out


class SegmentColumnTypes:
    """Column types per segment, learned by segmentMetadata once per segment and kept (LRU).

    A segment never changes once published, so an entry never goes stale; this spares every
    streamed scan a metadata round trip (which scans the columns for nulls) on the data nodes.
    """

    def __init__(self, max_segments: int = 100_000) -> None:
        self.max_segments = max_segments
        self._types: OrderedDict[str, dict[str, str]] = OrderedDict()

    async def for_tasks(
        self, runner: QueryRunner, query: ScanQuery, tasks: Sequence[SegmentTask]
    ) -> dict[str, str]:
        unknown = [t for t in tasks if t.segment_id not in self._types]
        if unknown:
            meta = parse_query(
                {
                    "queryType": "segmentMetadata",
                    "dataSource": query.data_source,
                    "intervals": SegmentsSpec(tuple(t.descriptor for t in unknown)).to_json(),
                    "merge": False,
                    "analysisTypes": [],
                    "context": {"queryId": f"{query.context.query_id}-types"},
                }
            )
            result = await runner.run(meta)
            rows = result.results if result.results is not None else orjson.loads(result.body or b"[]")
            for row in rows:
                columns = row.get("columns", {})
                self._types[str(row.get("id"))] = {
                    n: str(c.get("type") or "STRING") for n, c in columns.items()
                }
            while len(self._types) > self.max_segments:
                self._types.popitem(last=False)
        for t in tasks:
            if t.segment_id in self._types:
                self._types.move_to_end(t.segment_id)
        return merge_types(self._types.get(t.segment_id, {}) for t in tasks)
