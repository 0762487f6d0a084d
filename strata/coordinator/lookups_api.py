"""Druid's lookup configuration API (`/druid/coordinator/v1/lookups`), kept in the metadata store.

The configuration is one document (`druid_config`, key `lookupsConfig`), each change written with
its `druid_audit` entry in one transaction (`strata.storage.config_store`). Answers are Druid's
LookupCoordinatorResource's: a change answers 202 (the whole-map POST echoes the map), a missing
tier or lookup 404, `GET /config` the configured tiers (404 before the configuration exists;
`?discover=true`: with the tiers nodes report). Where Druid answers a refused change with a 500
(a version that does not replace the current one, a first POST that is not the empty map), Strata
answers 400 with the same `{"error": ...}` body: the request is what is wrong.

Status comes from the nodes: each node reports its LookupsState after every poll
(`POST /nodeStatus/{tier}/{host:port}`); a lookup is `loaded` when every node that reported for
its tier within the last three poll periods holds its version, as Druid's status is computed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.coordinator.rules_api import audit_info, error
from strata.coordinator.task_api import coordinator, json_body, pretty
from strata.lookups import spec
from strata.server.json_response import json_response

V1 = "/druid/coordinator/v1/lookups"


async def _config(request: Request) -> spec.TierMap | None:
    return await asyncio.to_thread(coordinator(request).configs.get, spec.CONFIG_KEY)


async def _change(request: Request, change: Any) -> Response | None:
    """Apply `change` to the document; None when done, else Druid's answer (400 or 404)."""
    try:
        await asyncio.to_thread(
            coordinator(request).configs.update, spec.CONFIG_KEY, change, audit_info(request)
        )
    except spec.LookupSpecError as e:
        return error(str(e))
    except KeyError:
        return Response(status_code=404)
    return None


async def get_tiers(request: Request) -> Response:
    config = await _config(request)
    if request.query_params.get("discover", "false").lower() == "true":
        tiers = coordinator(request).lookup_reports.tiers() | set(config or {})
        return json_response(sorted(tiers), pretty=pretty(request))
    if config is None:
        return Response(status_code=404)
    return json_response(sorted(config), pretty=pretty(request))


async def get_all(request: Request) -> Response:
    config = await _config(request)
    if config is None:
        return Response(status_code=404)
    return json_response(config, pretty=pretty(request))


async def post_all(request: Request) -> Response:
    try:
        updates = spec.parse_tier_map(await json_body(request))
    except spec.LookupSpecError as e:
        return error(str(e))
    refused = await _change(request, lambda prior: spec.with_updates(prior, updates))
    if refused is not None:
        return refused
    echo = {tier: {n: c.to_json() for n, c in lookups.items()} for tier, lookups in updates.items()}
    return json_response(echo, 202)


async def get_tier(request: Request) -> Response:
    tier = request.path_params["tier"]
    config = await _config(request)
    if config is None:
        return json_response({"error": "No lookups found"}, 404)
    if tier not in config:
        return json_response({"error": f"Tier [{tier}] not found"}, 404)
    detailed = request.query_params.get("detailed", "false").lower() == "true"
    return json_response(config[tier] if detailed else sorted(config[tier]), pretty=pretty(request))


async def delete_tier(request: Request) -> Response:
    tier = request.path_params["tier"]
    refused = await _change(request, lambda prior: spec.without_tier(prior, tier))
    return refused or Response(status_code=202)


async def get_lookup(request: Request) -> Response:
    tier, name = request.path_params["tier"], request.path_params["id"]
    found = ((await _config(request)) or {}).get(tier, {}).get(name)
    if found is None:
        return json_response({"error": f"lookup [{name}] not found"}, 404)
    return json_response(found, pretty=pretty(request))


async def post_lookup(request: Request) -> Response:
    tier, name = request.path_params["tier"], request.path_params["id"]
    try:
        container = spec.parse_container(await json_body(request), f"{tier}:{name}")
        if container.version is None:
            raise spec.LookupSpecError(f"lookup [{tier}]:[{name}] does not have version.")
    except spec.LookupSpecError as e:
        return error(str(e))
    refused = await _change(request, lambda prior: spec.with_updates(prior, {tier: {name: container}}))
    return refused or Response(status_code=202)


async def delete_lookup(request: Request) -> Response:
    tier, name = request.path_params["tier"], request.path_params["id"]
    refused = await _change(request, lambda prior: spec.without_lookup(prior, tier, name))
    return refused or Response(status_code=202)


# -- status, from the nodes' reports --------------------------------------------------------------------
def _status(name: str, container: dict[str, Any], nodes: dict[tuple[str, str], dict[str, Any]],
            detailed: bool) -> dict[str, Any]:  # fmt: skip
    wanted = spec.parse_container(container, name)
    pending = []
    for (_, node), state in sorted(nodes.items()):
        held = (state.get("current") or {}).get(name)
        if held is None or wanted.replaces(spec.parse_container(held, name)):
            pending.append(node)
    out: dict[str, Any] = {"loaded": not pending}
    if detailed:
        out["pendingNodes"] = pending
    return out


def _detailed(request: Request) -> bool:
    return request.query_params.get("detailed", "false").lower() == "true"


async def status_all(request: Request) -> Response:
    config = await _config(request)
    if config is None:
        return json_response({"error": "No lookups found"}, 404)
    reports = coordinator(request).lookup_reports
    body = {
        tier: {name: _status(name, c, reports.nodes(tier), _detailed(request)) for name, c in lookups.items()}
        for tier, lookups in config.items()
    }
    return json_response(body, pretty=pretty(request))


async def status_tier(request: Request) -> Response:
    tier = request.path_params["tier"]
    lookups = ((await _config(request)) or {}).get(tier)
    if lookups is None:
        return json_response({"error": f"No lookups found for tier [{tier}]."}, 404)
    nodes = coordinator(request).lookup_reports.nodes(tier)
    name = request.path_params.get("id")
    if name is not None:
        if name not in lookups:
            return json_response({"error": f"Lookup [{name}] not found for tier [{tier}]."}, 404)
        return json_response(_status(name, lookups[name], nodes, _detailed(request)), pretty=pretty(request))
    body = {n: _status(n, c, nodes, _detailed(request)) for n, c in lookups.items()}
    return json_response(body, pretty=pretty(request))


async def node_status(request: Request) -> Response:
    """Druid's nodeStatus: each reporting node's LookupsState, by tier (or one tier's)."""
    reports = coordinator(request).lookup_reports
    tier = request.path_params.get("tier")
    body: dict[str, dict[str, Any]] = {}
    for (t, node), state in sorted(reports.nodes(tier).items()):
        body.setdefault(t, {})[node] = state
    return json_response(body.get(tier, {}) if tier is not None else body, pretty=pretty(request))


async def report(request: Request) -> Response:
    """A node's LookupsState after its poll (Strata's nodes push what Druid's coordinator pulls)."""
    state = await json_body(request)
    if not isinstance(state, dict):
        return error("a node's lookup state must be an object")
    coordinator(request).lookup_reports.put(request.path_params["tier"], request.path_params["node"], state)
    return Response(status_code=202)


LOOKUP_ROUTES = [
    Route(f"{V1}/config", get_tiers, methods=["GET"]),
    Route(f"{V1}/config", post_all, methods=["POST"]),
    Route(f"{V1}/config/all", get_all, methods=["GET"]),
    Route(f"{V1}/config/{{tier}}", get_tier, methods=["GET"]),
    Route(f"{V1}/config/{{tier}}", delete_tier, methods=["DELETE"]),
    Route(f"{V1}/config/{{tier}}/{{id}}", get_lookup, methods=["GET"]),
    Route(f"{V1}/config/{{tier}}/{{id}}", post_lookup, methods=["POST"]),
    Route(f"{V1}/config/{{tier}}/{{id}}", delete_lookup, methods=["DELETE"]),
    Route(f"{V1}/status", status_all, methods=["GET"]),
    Route(f"{V1}/status/{{tier}}", status_tier, methods=["GET"]),
    Route(f"{V1}/status/{{tier}}/{{id}}", status_tier, methods=["GET"]),
    Route(f"{V1}/nodeStatus", node_status, methods=["GET"]),
    Route(f"{V1}/nodeStatus/{{tier}}", node_status, methods=["GET"]),
    Route(f"{V1}/nodeStatus/{{tier}}/{{node}}", report, methods=["POST"]),
]
