"""The facts the console reads, without a browser: sys.segments' overshadowed flag, sys.servers'
bytes, and /status/cluster's answer for a data node that does not answer."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from types import SimpleNamespace
from typing import Any

from broker_service.broker import BrokerSettings
from broker_service.cluster_status import cluster_status
from broker_service.data_node_client import DataNodeClient
from broker_service.metrics import BrokerMetrics
from broker_service.server_view import BrokerServerView
from broker_service.sql_catalog import BrokerCatalog
from strata.cli.local_servers import free_port
from strata.discovery.server_metadata import ServerMetadata
from tests.broker.helpers import segment


def _view() -> BrokerServerView:
    view = BrokerServerView()
    view.add_server(ServerMetadata("h1", "h1:8083"))
    view.add_server(ServerMetadata("h2", "h2:8083"))
    old, new = segment(version="v1"), segment(version="v2")  # v2 covers the whole day
    view.add_segment("h1", dataclasses.replace(old, size=100))
    view.add_segment("h2", dataclasses.replace(new, size=40))
    view.add_segment("h2", dataclasses.replace(segment(interval="2015-09-13/2015-09-14"), size=2))
    return view


def test_sys_segments_flags_the_overshadowed_version_and_sys_servers_counts_bytes() -> None:
    catalog = BrokerCatalog(SimpleNamespace(view=_view()))  # type: ignore[arg-type]
    flags = {(s["start"], s["version"]): s["is_overshadowed"] for s in catalog.segments()}
    assert flags == {
        ("2015-09-12T00:00:00.000Z", "v1"): 1,
        ("2015-09-12T00:00:00.000Z", "v2"): 0,
        ("2015-09-13T00:00:00.000Z", "v1"): 0,  # another interval: nothing newer covers it
    }
    assert {s["server"]: s["curr_size"] for s in catalog.servers()} == {"h1": 100, "h2": 42}


def test_status_cluster_lists_a_silent_node_as_unreachable() -> None:
    view = BrokerServerView()
    silent = f"127.0.0.1:{free_port()}"  # nothing listens there
    view.add_server(ServerMetadata(silent, silent))
    view.add_segment(silent, dataclasses.replace(segment(), size=7))
    metrics = BrokerMetrics()
    metrics.node_requests[silent] = 3

    async def read() -> dict[str, Any]:
        client = DataNodeClient()
        broker = SimpleNamespace(view=view, client=client, metrics=metrics, settings=BrokerSettings(),
                                 admission=SimpleNamespace(running=0, queued=0), cache_kind="none",
                                 started=time.time())  # fmt: skip
        try:
            return await cluster_status(broker)  # type: ignore[arg-type]
        finally:
            await client.close()

    body = asyncio.run(read())
    assert isinstance(body["worker"], str) and body["worker"]  # names the process, for rates
    own, node = body["servers"]
    assert own["type"] == "broker" and own["health"] == "healthy"
    assert (node["server"], node["segments"], node["bytes"], node["queries"]) == (silent, 1, 7, 3)
    assert node["health"].startswith("unreachable") and node["status"] is None
