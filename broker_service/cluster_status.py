"""`GET /status/cluster`: every server this broker knows, with what it serves and whether it answers.

One route, so a browser (the console) or a script gets the whole cluster from the broker alone:
data nodes need not be reachable from the client, nor allow cross-origin reads. Each data node's
own `GET /status` is fetched concurrently with a short timeout; a node that does not answer is
listed as `unreachable`, never an error of the route. Counters are cumulative (the broker's queries,
its requests to each node); a client gets rates from two readings and their `time`. With
`strata broker --workers N` each reading comes from one worker process, named by `worker`: rates
are differences between two readings of the same worker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp

from broker_service.broker import Broker
from strata.discovery.server_metadata import ServerMetadata

STATUS_TIMEOUT_S = 2.0
WORKER = uuid.uuid4().hex[:12]  # this broker process, among the workers sharing its port


async def cluster_status(broker: Broker) -> dict[str, Any]:
    view = broker.view
    servers = sorted(view.servers(), key=lambda s: (s.type.value, s.name))
    statuses = await asyncio.gather(*(_node_status(broker, s) for s in servers))
    rows = [_broker_row(broker)]
    for server, (health, status) in zip(servers, statuses, strict=True):
        segments = view.segments_of(server.name).values()
        rows.append(
            {
                "server": server.name,
                "host": server.host,
                "type": server.type.value,
                "tier": server.tier,
                "priority": server.priority,
                "maxSize": server.max_size,
                "segments": len(segments),
                "bytes": sum(s.size for s in segments),
                "queries": broker.metrics.node_requests[server.name],
                "health": health,
                "status": status,
            }
        )
    return {"time": int(time.time() * 1000), "worker": WORKER, "servers": rows}


def _broker_row(broker: Broker) -> dict[str, Any]:
    return {
        "server": broker.settings.host,
        "host": broker.settings.host,
        "type": "broker",
        "tier": None,
        "priority": None,
        "maxSize": None,
        "segments": broker.view.segment_count,  # the segments it routes to, not ones it holds
        "bytes": None,
        "queries": broker.metrics.native_queries,
        "health": "healthy",
        "status": {
            "runningQueries": broker.admission.running,
            "queuedQueries": broker.admission.queued,
            "lostSegments": broker.view.lost_segment_count,
            "cache": broker.cache_kind,
            "uptimeSeconds": round(time.time() - broker.started, 3),
        },
    }


async def _node_status(broker: Broker, server: ServerMetadata) -> tuple[str, Any]:
    """("healthy", the node's `strata` status section) or ("unreachable: why", None)."""
    try:
        body = await broker.client.status(server, STATUS_TIMEOUT_S)
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        return f"unreachable: {type(e).__name__} {e}".strip(), None
    return "healthy", body.get("strata") if isinstance(body, dict) else None
