"""Mount point of the data node's query API (`/druid/v2/`), handled by `query_api.QueryEndpoint`."""

from __future__ import annotations

from typing import Any

from starlette.routing import BaseRoute

from strata.data_node.query_api import QueryEndpoint


def add_query_routes(routes: list[BaseRoute], state: Any) -> None:
    """Append the query routes; `state` is the node's HistoricalState (served segments, metrics)."""
    endpoint = QueryEndpoint(state.served, state.name)
    endpoint.on_query = state.metrics.on_query
    endpoint.on_segments = state.metrics.druid.on_segments
    state.query_endpoint = endpoint
    routes.extend(endpoint.routes())
