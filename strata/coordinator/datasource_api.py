"""Druid's data-management API (the coordinator's `/druid/coordinator/v1/datasources` and `.../metadata`):
list data sources, their intervals and segments; mark segments used or unused by data source,
interval or ids; kill unused segments (a `kill` task).

Strata's historicals assign segments among themselves and load every used one, so the coordinator
answers from the metadata store's used segments, the set the historicals follow; where Druid lists
the `servers` of a segment, they come from the data servers' ZooKeeper announcements (empty without
`--zk`), and `tiers` stays empty (tiers belong to retention rules). Marking a segment unused makes
the historicals drop it within their poll period; marking it used makes them load it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.coordinator import segment_marks
from strata.coordinator.task_api import coordinator, json_body, pretty
from strata.coordinator.task_types import accept
from strata.query.errors import invalid
from strata.security.http import readable
from strata.server.json_response import json_response
from strata.storage.metadata_store import SegmentRecord
from strata.storage.task_store import now_iso
from timeline import DataSegment, Interval, format_instant

V1 = "/druid/coordinator/v1"


def _order(segment: DataSegment) -> tuple[int, int, str, int]:
    """Druid's SegmentId order within a data source: start, end, version, partition."""
    return (segment.interval.start, segment.interval.end, segment.version, segment.partition_num)


async def _used(request: Request, ds: str | None = None) -> list[DataSegment]:
    segments = await asyncio.to_thread(coordinator(request).metadata.used_segments, ds)
    return sorted(segments, key=lambda s: (s.data_source, *_order(s)))


async def _records(request: Request, ds: str) -> list[SegmentRecord]:
    return await asyncio.to_thread(coordinator(request).metadata.segments, ds, True)


def _by_source(segments: list[DataSegment]) -> dict[str, list[DataSegment]]:
    out: dict[str, list[DataSegment]] = {}
    for s in segments:
        out.setdefault(s.data_source, []).append(s)
    return out


def _simple(segments: list[DataSegment]) -> dict[str, Any]:
    return {
        "tiers": {},
        "segments": {
            "count": len(segments),
            "size": sum(s.size for s in segments),
            "minTime": format_instant(min(s.interval.start for s in segments)),
            "maxTime": format_instant(max(s.interval.end for s in segments)),
        },
    }


def _full(ds: str, segments: list[DataSegment]) -> dict[str, Any]:
    """Druid's ImmutableDruidDataSource JSON."""
    return {"name": ds, "properties": {"created": now_iso()}, "segments": [s.to_json() for s in segments]}


async def _served(request: Request) -> dict[str, list[str]]:
    announcer = coordinator(request).announcer
    if announcer is None:
        return {}
    try:
        return await asyncio.to_thread(announcer.served)
    except Exception:  # ZooKeeper away: the listing goes on without servers
        return {}


def _interval(text: str | None, what: str = "interval") -> Interval:
    if not isinstance(text, str):
        raise invalid("Invalid value for [%s]: an ISO-8601 interval is required", what)
    try:
        return Interval.parse(text if "/" in text else text.replace("_", "/"))
    except ValueError as e:
        raise invalid("Invalid value for [%s]: %s", what, e) from None


def _changed(n: int) -> Response:
    return json_response({"numChangedSegments": n})


# -- listings --------------------------------------------------------------------------------------
async def list_datasources(request: Request) -> Response:
    by_source = _by_source(await _used(request))
    names = readable(request, sorted(by_source))
    if "full" in request.query_params:
        body: Any = [_full(ds, by_source[ds]) for ds in names]
    elif "simple" in request.query_params:
        body = [{"name": ds, "properties": _simple(by_source[ds])} for ds in names]
    else:
        body = names
    return json_response(body, pretty=pretty(request))


async def get_datasource(request: Request) -> Response:
    ds = request.path_params["ds"]
    segments = await _used(request, ds)
    if not segments:
        return Response(status_code=204)
    body = _full(ds, segments) if "full" in request.query_params else _simple(segments)
    return json_response(body, pretty=pretty(request))


async def intervals(request: Request) -> Response:
    segments = await _used(request, request.path_params["ds"])
    if not segments:
        return Response(status_code=204)
    ordered = sorted({s.interval for s in segments}, reverse=True)  # Druid: newest start (then end) first
    q = request.query_params
    if "full" in q:
        served = await _served(request)
        full: dict[str, dict[str, Any]] = {str(iv): {} for iv in ordered}
        for s in segments:
            full[str(s.interval)][s.id] = {"metadata": s.to_json(), "servers": served.get(s.id, [])}
        return json_response(full, pretty=pretty(request))
    if "simple" in q:
        simple = {str(iv): {"size": 0, "count": 0} for iv in ordered}
        for s in segments:
            simple[str(s.interval)]["size"] += s.size
            simple[str(s.interval)]["count"] += 1
        return json_response(simple, pretty=pretty(request))
    return json_response([str(iv) for iv in ordered], pretty=pretty(request))


async def segments(request: Request, missing: int = 204) -> Response:
    """The used segments' ids (`?full`: descriptors); `missing` when there is none (Druid's
    coordinator says 204, its metadata resource 404)."""
    found = await _used(request, request.path_params["ds"])
    if not found:
        return Response(status_code=missing)
    full = "full" in request.query_params
    return json_response([s.to_json() if full else s.id for s in found], pretty=pretty(request))


async def segment(request: Request) -> Response:
    sid = request.path_params["segment_id"]
    found = [s for s in await _used(request, request.path_params["ds"]) if s.id == sid]
    if not found:
        return Response(status_code=204)
    servers = (await _served(request)).get(sid, [])
    return json_response({"metadata": found[0].to_json(), "servers": servers}, pretty=pretty(request))


# -- marking used and unused -----------------------------------------------------------------------
async def _mark(request: Request, ids: list[str], used: bool) -> int:
    meta = coordinator(request).metadata
    if not ids:
        return 0
    return await asyncio.to_thread(meta.mark_used if used else meta.mark_unused, ids)


async def mark_all_unused(request: Request) -> Response:
    """`DELETE .../datasources/{ds}`; with Druid's deprecated `?kill=true&interval=` a kill task."""
    q = request.query_params
    if q.get("kill", "").lower() == "true":
        return await kill_interval(request, q.get("interval"))
    records = await _records(request, request.path_params["ds"])
    return _changed(await _mark(request, [r.segment.id for r in records if r.used], used=False))


async def mark_all_used(request: Request) -> Response:
    records = await _records(request, request.path_params["ds"])
    return _changed(await _mark(request, segment_marks.used_in(records, None), used=True))


async def _payload(request: Request) -> tuple[Interval | None, list[str] | None]:
    body = await json_body(request) if await request.body() else None
    problem = "Invalid request payload, either interval or segmentIds array must be specified"
    if not isinstance(body, dict) or (body.get("interval") is None) == (body.get("segmentIds") is None):
        raise invalid("%s", problem)
    ids = body.get("segmentIds")
    if ids is not None and (not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids)):
        raise invalid("%s", problem)
    return (None, ids) if ids is not None else (_interval(body.get("interval")), None)


async def mark_unused(request: Request) -> Response:
    interval, ids = await _payload(request)
    records = await _records(request, request.path_params["ds"])
    if not records:
        return Response(status_code=204)
    if interval is not None:
        return _changed(await _mark(request, segment_marks.unused_in(records, interval), used=False))
    known = {r.segment.id for r in records if r.used}
    return _changed(await _mark(request, [i for i in dict.fromkeys(ids or []) if i in known], used=False))


async def mark_used(request: Request) -> Response:
    interval, ids = await _payload(request)
    records = await _records(request, request.path_params["ds"])
    if not records:
        return Response(status_code=204)
    if interval is not None:
        return _changed(await _mark(request, segment_marks.used_in(records, interval), used=True))
    chosen, unknown = segment_marks.used_ids(records, ids or [])
    if unknown:
        return json_response({"message": f"Could not find segment IDs[{', '.join(unknown)}]"}, 404)
    return _changed(await _mark(request, chosen, used=True))


async def segment_unused(request: Request) -> Response:
    records = await _records(request, request.path_params["ds"])
    sid = request.path_params["segment_id"]
    ids = [r.segment.id for r in records if r.used and r.segment.id == sid]
    return json_response({"segmentStateChanged": await _mark(request, ids, used=False) > 0})


async def segment_used(request: Request) -> Response:
    records = await _records(request, request.path_params["ds"])
    chosen, _ = segment_marks.used_ids(records, [request.path_params["segment_id"]])
    return json_response({"segmentStateChanged": await _mark(request, chosen, used=True) > 0})


async def kill_interval(request: Request, text: str | None = None) -> Response:
    """Submit a kill task of the interval's unused segments (`api-issued_kill_...`): 200, no body."""
    ds = request.path_params["ds"]
    interval = _interval(text if text is not None else request.path_params.get("interval"))
    now = int(time.time() * 1000)
    body = {"type": "kill", "dataSource": ds, "interval": str(interval)}
    probe = accept(body, now)
    submission = accept({**body, "id": f"api-issued_{probe.id}"}, now)
    await asyncio.to_thread(coordinator(request).queue.submit, submission)
    return Response(status_code=200)


# -- the metadata store's own view -----------------------------------------------------------------
async def metadata_datasources(request: Request) -> Response:
    q = request.query_params
    if "includeUnused" in q or "includeDisabled" in q:
        names = await asyncio.to_thread(_all_names, request)
        return json_response(readable(request, names), pretty=pretty(request))
    by_source = _by_source(await _used(request))
    names = readable(request, sorted(by_source))
    body = [_full(ds, by_source[ds]) for ds in names] if "full" in q else names
    return json_response(body, pretty=pretty(request))


def _all_names(request: Request) -> list[str]:
    return sorted({r.segment.data_source for r in coordinator(request).metadata.segments(None, True)})


async def metadata_datasource(request: Request) -> Response:
    ds = request.path_params["ds"]
    found = await _used(request, ds)
    return json_response(_full(ds, found), pretty=pretty(request)) if found else Response(status_code=404)


async def metadata_segments(request: Request) -> Response:
    return await segments(request, missing=404)


async def metadata_segment(request: Request) -> Response:
    sid = request.path_params["segment_id"]
    include_unused = request.query_params.get("includeUnused", "").lower() == "true"
    for r in await _records(request, request.path_params["ds"]):
        if r.segment.id == sid and (r.used or include_unused):
            return json_response(r.segment.to_json(), pretty=pretty(request))
    return Response(status_code=404)


async def metadata_unused(request: Request) -> Response:
    q = request.query_params
    interval = _interval(q["interval"]) if q.get("interval") else None
    found = sorted(
        (r.segment for r in await _records(request, request.path_params["ds"])
         if not r.used and (interval is None or interval.overlaps(r.segment.interval))),
        key=_order,
    )  # fmt: skip
    try:
        offset, limit = int(q.get("offset", 0)), q.get("limit")
        found = found[offset:] if limit is None else found[offset : offset + int(limit)]
    except ValueError:
        raise invalid("limit and offset must be integers") from None
    return json_response([s.to_json() for s in found], pretty=pretty(request))


async def metadata_all_segments(request: Request) -> Response:
    wanted = set(request.query_params.getlist("datasources"))
    used = [s for s in await _used(request) if not wanted or s.data_source in wanted]
    names = set(readable(request, sorted({s.data_source for s in used})))
    return json_response([s.to_json() for s in used if s.data_source in names], pretty=pretty(request))


DS = f"{V1}/datasources/{{ds}}"
MD = f"{V1}/metadata/datasources/{{ds}}"
DATASOURCE_ROUTES = [
    Route(f"{V1}/datasources", list_datasources, methods=["GET"]),
    Route(DS, get_datasource, methods=["GET"]),
    Route(DS, mark_all_unused, methods=["DELETE"]),
    Route(DS, mark_all_used, methods=["POST"]),
    Route(f"{DS}/intervals", intervals, methods=["GET"]),
    Route(f"{DS}/intervals/{{interval}}", kill_interval, methods=["DELETE"]),
    Route(f"{DS}/segments", segments, methods=["GET"]),
    Route(f"{DS}/segments/{{segment_id}}", segment, methods=["GET"]),
    Route(f"{DS}/segments/{{segment_id}}", segment_unused, methods=["DELETE"]),
    Route(f"{DS}/segments/{{segment_id}}", segment_used, methods=["POST"]),
    Route(f"{DS}/markUnused", mark_unused, methods=["POST"]),
    Route(f"{DS}/markUsed", mark_used, methods=["POST"]),
    Route(f"{V1}/metadata/datasources", metadata_datasources, methods=["GET"]),
    Route(MD, metadata_datasource, methods=["GET"]),
    Route(f"{MD}/segments", metadata_segments, methods=["GET"]),
    Route(f"{MD}/segments/{{segment_id}}", metadata_segment, methods=["GET"]),
    Route(f"{MD}/unusedSegments", metadata_unused, methods=["GET"]),
    Route(f"{V1}/metadata/segments", metadata_all_segments, methods=["GET"]),
]
