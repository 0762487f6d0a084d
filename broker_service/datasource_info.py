"""What the broker can tell about a datasource from the segments it sees (Druid's ClientInfoResource)."""

from __future__ import annotations

from typing import Any

from broker_service.server_view import BrokerServerView, ServerSelector
from timeline import Interval, TimelineObjectHolder

DEFAULT_HISTORY_MS = 7 * 24 * 3600 * 1000  # druid.query.segmentMetadata.defaultHistory = P1W


def default_interval(now_ms: int) -> Interval:
    """Druid looks back one week from now when no `interval` is given."""
    return Interval(now_ms - DEFAULT_HISTORY_MS, now_ms)


def _holders(
    view: BrokerServerView, data_source: str, interval: Interval
) -> list[TimelineObjectHolder[ServerSelector]]:
    timeline = view.timeline(data_source)
    return timeline.lookup(interval) if timeline is not None else []


def _columns(holder: TimelineObjectHolder[ServerSelector]) -> tuple[list[str], list[str]]:
    dims: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for selector in holder.objects:
        dims.update(dict.fromkeys(selector.segment.dimensions))
        metrics.update(dict.fromkeys(selector.segment.metrics))
    return sorted(dims), sorted(metrics)


def datasource_columns(view: BrokerServerView, data_source: str, interval: Interval) -> dict[str, Any]:
    dims: set[str] = set()
    metrics: set[str] = set()
    for holder in _holders(view, data_source, interval):
        d, m = _columns(holder)
        dims.update(d)
        metrics.update(m)
    return {"dimensions": sorted(dims), "metrics": sorted(metrics)}


def datasource_columns_full(view: BrokerServerView, data_source: str, interval: Interval) -> dict[str, Any]:
    """interval -> {dimensions, metrics}; abutting pieces with equal columns are merged, as Druid does."""
    pieces: list[tuple[Interval, tuple[list[str], list[str]]]] = []
    for holder in _holders(view, data_source, interval):
        cols = _columns(holder)
        if pieces and pieces[-1][1] == cols and pieces[-1][0].end == holder.interval.start:
            pieces[-1] = (Interval(pieces[-1][0].start, holder.interval.end), cols)
        else:
            pieces.append((holder.interval, cols))
    return {str(iv): {"dimensions": d, "metrics": m} for iv, (d, m) in pieces}


def candidates(view: BrokerServerView, data_source: str, intervals: list[Interval]) -> list[dict[str, Any]]:
    """Druid's LocatedSegmentDescriptor list: each segment to read and the servers holding it."""
    out = []
    for interval in intervals:
        for holder in _holders(view, data_source, interval):
            for chunk in holder.chunks:
                selector = chunk.object
                out.append(
                    {
                        "itvl": str(holder.interval),
                        "ver": holder.version,
                        "part": chunk.chunk_number,
                        "size": selector.segment.size,
                        "locations": [
                            s.to_json() for s in sorted(selector.servers.values(), key=lambda s: s.name)
                        ],
                    }
                )
    return out
