"""Security at a node's door: one ASGI middleware authenticates every request and checks what the
route table (`security.policy`) demands; handlers that learn their resources from a body (queries,
listings) ask `authorize` / `readable` here. With security off none of this is installed, and the
helpers answer as if everyone may do everything.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from strata.query.errors import QueryError
from strata.security.errors import Forbidden, NotAuthenticated, TooManyFailedLogins
from strata.security.guard import Guard, parse_basic
from strata.security.policy import Need, Requirement, Rule, requirement
from strata.security.resources import Action, Resource

log = logging.getLogger("strata.security")

USER_KEY = "strata.user"
GUARD_KEY = "strata.guard"
# the request's user, for code a request reaches without its Request object (the SQL catalog)
CURRENT_USER: contextvars.ContextVar[str | None] = contextvars.ContextVar("strata_user", default=None)


def refusal_line(status: int, user: str | None, resource: Resource | None, action: Action | None,
                 address: str, path: str) -> str:  # fmt: skip
    """One structured (JSON) log line per refusal; the user is the claimed name, never a password."""
    return orjson.dumps(
        {
            "event": "security.refused",
            "status": status,
            "user": user,
            "resource": None if resource is None else {"type": str(resource.type), "name": resource.name},
            "action": None if action is None else str(action),
            "address": address,
            "path": path,
        }
    ).decode()


class SecurityMiddleware:
    def __init__(
        self, app: ASGIApp, *, guard: Guard, rules: Sequence[Rule], default: Requirement, host: str
    ) -> None:
        self.app = app
        self.guard = guard
        self.rules = rules
        self.default = default
        self.host = host
        self.unsecured = guard.settings.unsecured_paths
        self._needs: dict[tuple[str, str], Requirement] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        guard = self.guard
        guard.ensure_polling()
        path, method = scope["path"], scope["method"]
        raw_qs = scope.get("query_string", b"")
        if raw_qs:
            query = dict(parse_qsl(raw_qs.decode("latin-1")))
            need = requirement(self.rules, self.default, self.unsecured, method, path, query)
        else:  # the route table's answer depends on method and path alone: remember it
            need = self._needs.get((method, path))  # type: ignore[assignment]
            if need is None:
                need = requirement(self.rules, self.default, self.unsecured, method, path, {})
                if len(self._needs) >= 4096:
                    self._needs.clear()
                self._needs[(method, path)] = need
        scope[GUARD_KEY] = guard
        if need.need is Need.OPEN:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = client[0] if client else "unknown"
        user = self._warm(scope, need, address)
        if user is None:
            err = await self._check(scope, need, address, path)
            if err is not None:
                await self._refuse(err, scope, receive, send)
                return
            user = scope[USER_KEY]
        else:
            scope[USER_KEY] = user
        token = CURRENT_USER.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_USER.reset(token)

    def _warm(self, scope: Scope, need: Requirement, address: str) -> str | None:
        """The user of a request that passes on what is already known (a header verified before,
        an address with no failed logins, a permission held), without a coroutine; None sends the
        request down `_check`, which also says why when it is refused."""
        guard = self.guard
        if guard.failed_logins.tracked(address):
            return None
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value
                break
        user = guard.known(header) if header is not None else None
        if user is None or (need.need is Need.INTERNAL and not guard.is_internal(user)):
            return None
        if need.need is Need.RESOURCE and need.resource is not None:
            return user if guard.allows(user, need.resource, need.action) else None
        return user

    async def _check(self, scope: Scope, need: Requirement, address: str, path: str) -> QueryError | None:
        guard = self.guard
        retry = guard.failed_logins.retry_after(address)
        if retry is not None:
            log.warning(refusal_line(429, None, need.resource, need.action, address, path))
            return TooManyFailedLogins(retry)
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value
                break
        user = guard.known(header) if header is not None else None
        if user is None:
            user = await guard.authenticate(header) if header is not None else None
            if user is None:
                claimed = parse_basic(header.decode("latin-1")) if header is not None else None
                if claimed is not None:
                    guard.failed_logins.failed(address)
                name = claimed.user if claimed is not None else None
                log.warning(refusal_line(401, name, need.resource, need.action, address, path))
                return NotAuthenticated()
        if need.need is Need.INTERNAL and not guard.is_internal(user):
            log.warning(refusal_line(403, user, None, None, address, path))
            return Forbidden()
        resource = need.resource if need.need is Need.RESOURCE else None
        if resource is not None and not guard.allows(user, resource, need.action):
            log.warning(refusal_line(403, user, resource, need.action, address, path))
            return Forbidden()
        scope[USER_KEY] = user
        return None

    async def _refuse(self, err: QueryError, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {}
        if isinstance(err, NotAuthenticated):
            headers["WWW-Authenticate"] = 'Basic realm="druid"'
        if isinstance(err, TooManyFailedLogins):
            headers["Retry-After"] = str(err.retry_after)
        body = orjson.dumps(err.to_body(self.host))
        await Response(body, err.status, headers=headers, media_type="application/json")(scope, receive, send)


# -- for handlers ---------------------------------------------------------------------------------


def user_of(request: Request) -> str | None:
    """The authenticated user, or None when security is off."""
    user: str | None = request.scope.get(USER_KEY)
    return user


def _guard(request: Request) -> Guard | None:
    guard: Guard | None = request.scope.get(GUARD_KEY)
    return guard


def allowed(request: Request, resource: Resource, action: Action) -> bool:
    guard, user = _guard(request), user_of(request)
    if guard is None:
        return True
    return user is not None and guard.allows(user, resource, action)


def authorize(request: Request, resources: Iterable[Resource], action: Action) -> None:
    """Raise Forbidden (403, Druid's body, naming nothing) unless the user holds `action` on every
    resource; one log line names the first refused."""
    guard, user = _guard(request), user_of(request)
    if guard is None:
        return
    for resource in resources:
        if user is None or not guard.allows(user, resource, action):
            client = request.scope.get("client")
            address = client[0] if client else "unknown"
            log.warning(refusal_line(403, user, resource, action, address, request.url.path))
            raise Forbidden()


def readable(request: Request, names: Iterable[str]) -> list[str]:
    """The datasources among `names` this user may read: listings show nothing else, so a forbidden
    datasource looks exactly like a missing one."""
    guard, user = _guard(request), user_of(request)
    names = list(names)
    if guard is None:
        return names
    return guard.readable(user, names) if user is not None else []


def install(app: Any, guard: Guard, rules: Sequence[Rule], default: Requirement, host: str) -> None:
    """Put the middleware in front of every route of a Starlette app (outermost)."""
    app.add_middleware(SecurityMiddleware, guard=guard, rules=rules, default=default, host=host)


def secure_data_node(app: Any, guard: Guard | None, host: str) -> None:
    """A historical or real-time node answers the internal identity only, but for the push API
    (WRITE on the datasource) and STATE READ on status and metrics."""
    if guard is not None:
        from strata.security.policy import DATA_NODE_RULES, INTERNAL

        install(app, guard, DATA_NODE_RULES, INTERNAL, host)
