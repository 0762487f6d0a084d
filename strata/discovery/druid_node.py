"""Druid's DiscoveryDruidNode: what a node of a role (coordinator, overlord, broker) writes into its
`internal-discovery/<ROLE>/<host:port>` znode, and how others read where it is."""

from __future__ import annotations

from typing import Any

import orjson

# Druid's NodeRole: znode folder name -> JSON name
ROLES = {"COORDINATOR": "coordinator", "OVERLORD": "overlord", "BROKER": "broker"}


def discovery_node(role: str, host: str, port: int, service: str, start_time: str) -> bytes:
    """The znode's JSON (`role` a key of ROLES)."""
    node: dict[str, Any] = {
        "druidNode": {
            "service": service, "host": host, "bindOnHost": False, "plaintextPort": port, "port": -1,
            "tlsPort": -1, "enablePlaintextPort": True, "enableTlsPort": False,
        },
        "nodeType": ROLES[role],
        "services": {},
        "startTime": start_time,
    }  # fmt: skip
    return orjson.dumps(node)


def node_address(data: bytes) -> str | None:
    """`host:port` of a DiscoveryDruidNode znode's JSON; None when it names none."""
    try:
        node = orjson.loads(data)["druidNode"]
        host, port = node["host"], int(node.get("plaintextPort") or node.get("port") or -1)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return f"{host}:{port}" if host and port > 0 else None
