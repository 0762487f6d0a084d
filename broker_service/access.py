"""The broker's resource extraction: what a native query or a SQL statement reads, checked once
per request before anything runs, and what its listings may show (security.http does the asking).

Everything here is a no-op when the broker runs without an authenticator.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

from starlette.requests import Request

from strata.query import Query
from strata.query.data_source import tables_read
from strata.security.guard import Guard
from strata.security.http import CURRENT_USER, GUARD_KEY, authorize, user_of
from strata.security.http import readable as _readable
from strata.security.resources import STATE, Action, datasource
from strata.sql.access import tables_read_by

REMEMBERED_OWNERS = 100_000


def datasources_of(query: Query) -> Iterator[str]:
    """Every table a native query reads: its dataSource's, a union's, both sides of a join, down
    `query` dataSources to any depth."""
    yield from dict.fromkeys(tables_read(query.data_source_spec))


class QueryOwners:
    """Who started each recent query: a query may be cancelled by its own user or with STATE WRITE."""

    def __init__(self, size: int = REMEMBERED_OWNERS) -> None:
        self._size = size
        self._owners: dict[str, str] = {}  # oldest first

    def record(self, query_id: str, user: str | None) -> None:
        if user is not None:
            self._owners[query_id] = user
            if len(self._owners) > self._size:
                del self._owners[next(iter(self._owners))]

    @staticmethod
    def check_cancel(request: Request, query_id: str) -> None:
        """403 unless the query is the user's own or the user holds STATE WRITE (no-op with
        security off); an unknown id is refused alike, so ids of others' queries are not probed."""
        owners = _owners(request)
        if owners is None or request.scope.get(GUARD_KEY) is None:
            return
        if owners._owners.get(query_id) != user_of(request):
            authorize(request, [STATE], Action.WRITE)


def _owners(request: Request) -> QueryOwners | None:
    owners: QueryOwners | None = getattr(request.app.state, "query_owners", None)
    return owners


def readable(request: Request, names: Iterable[str]) -> list[str]:
    """The datasources among `names` the user may read (all of them with security off)."""
    return _readable(request, names)


def authorize_query(request: Request, query: Query) -> None:
    """READ on every datasource the native query touches, else 403 (before it is planned or run)."""
    if request.scope.get(GUARD_KEY) is None:
        return
    authorize(request, [datasource(name) for name in datasources_of(query)], Action.READ)
    owners = _owners(request)
    if owners is not None:
        owners.record(query.context.query_id, user_of(request))


async def authorize_sql(request: Request, body: dict[str, Any]) -> None:
    """READ on every datasource the statement reads wherever it hides, STATE READ for sys.servers;
    else 403 before planning (planning sees only readable datasources anyway: `VisibleCatalog`)."""
    if request.scope.get(GUARD_KEY) is None:
        return
    sql = body.get("query")
    if not isinstance(sql, str):
        return  # the SQL API refuses it with Druid's message
    read = await asyncio.to_thread(tables_read_by, sql) if len(sql) > 4096 else tables_read_by(sql)
    authorize(request, [datasource(name) for name in sorted(read.datasources)], Action.READ)
    if ("sys", "servers") in read.system or ("sys", "server_segments") in read.system:
        authorize(request, [STATE], Action.READ)
    context = body.get("context")
    owners = _owners(request)
    if owners is not None and isinstance(context, dict) and isinstance(context.get("sqlQueryId"), str):
        owners.record(context["sqlQueryId"], user_of(request))


class VisibleCatalog:
    """The SQL catalog as the requesting user may see it: INFORMATION_SCHEMA, sys.segments and the
    planner's tables hold only the datasources that user may read (a forbidden one is missing)."""

    def __init__(self, catalog: Any, guard: Guard) -> None:
        self._catalog = catalog
        self._guard = guard

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)

    def snapshot(self, *args: Any, **kwargs: Any) -> Any:
        snap = self._catalog.snapshot(*args, **kwargs)
        user = CURRENT_USER.get()
        names = set(self._guard.readable(user, list(snap.table_names)) if user is not None else ())
        return dataclasses.replace(
            snap,
            table_names=tuple(n for n in snap.table_names if n in names),
            table_columns={t: c for t, c in snap.table_columns.items() if t in names},
            segment_rows=tuple(r for r in snap.segment_rows if r.get("datasource") in names),
        )


def secure_app(app: Any, guard: Guard) -> None:
    """Security on a broker app: the middleware in front, Druid's user/role API, the query owners
    and the SQL catalog each user sees."""
    from strata.security.api import SecurityApi
    from strata.security.http import install
    from strata.security.policy import AUTHENTICATED, BROKER_RULES

    app.router.routes.extend(SecurityApi(guard).routes())
    app.state.query_owners = QueryOwners()
    app.state.sql_api.catalog = VisibleCatalog(app.state.sql_api.catalog, guard)
    install(app, guard, BROKER_RULES, AUTHENTICATED, app.state.broker.settings.host)
