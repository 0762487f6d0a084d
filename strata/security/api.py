"""Druid's basic-security HTTP API (users, credentials, roles, permissions, assignments).

Paths as Druid's extension serves them, so operators' scripts work unchanged:
`/druid-ext/basic-security/authentication/db/{authenticator}/users[/{user}[/credentials]]` and
`/druid-ext/basic-security/authorization/db/{authorizer}/users|roles/...`. The middleware has
already required CONFIG READ (to look) or WRITE (to change) on the resource `security`. A change
is applied to the store, then this node re-reads it at once; the others within their poll period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.security.guard import Guard
from strata.security.passwords import PasswordRefused
from strata.security.resources import BadPermission, Permission
from strata.security.store import AlreadyExists, NotFound

AUTHN = "/druid-ext/basic-security/authentication/db/{authenticator}"
AUTHZ = "/druid-ext/basic-security/authorization/db/{authorizer}"
MAX_BODY_BYTES = 1024 * 1024

Handler = Callable[[Request], Awaitable[Response]]


def _error(message: str, status: int = 400) -> Response:
    return Response(orjson.dumps({"error": message}), status, media_type="application/json")


def _ok(body: Any = None) -> Response:
    if body is None:
        return Response(status_code=200)
    return Response(orjson.dumps(body), 200, media_type="application/json")


class SecurityApi:
    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.store = guard.store

    def _named(self, request: Request) -> Response | None:
        settings = self.guard.settings
        authn = request.path_params.get("authenticator")
        if authn is not None and authn != settings.authenticator:
            return _error(f"Basic authenticator with name [{authn}] does not exist.")
        authz = request.path_params.get("authorizer")
        if authz is not None and authz != settings.authorizer:
            return _error(f"Basic authorizer with name [{authz}] does not exist.")
        return None

    async def _change(self, request: Request, change: Callable[[], None]) -> Response:
        wrong = self._named(request)
        if wrong is not None:
            return wrong
        try:
            await asyncio.to_thread(change)
        except (NotFound, AlreadyExists, BadPermission, PasswordRefused) as e:
            return _error(str(e))
        await self.guard.refresh()
        return _ok()

    async def _look(self, request: Request, answer: Callable[[], Any]) -> Response:
        wrong = self._named(request)
        if wrong is not None:
            return wrong
        await self.guard.refresh()
        try:
            return _ok(answer())
        except NotFound as e:
            return _error(str(e))

    async def _json(self, request: Request) -> Any:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise BadPermission("request body too large")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadPermission("request body is not valid JSON") from None

    # -- authentication ------------------------------------------------------------------------
    async def list_users(self, request: Request) -> Response:
        return await self._look(request, lambda: sorted(self.guard.snapshot.credentials))

    async def get_user(self, request: Request) -> Response:
        name = request.path_params["user"]

        def answer() -> Any:
            snap = self.guard.snapshot
            if name not in snap.credentials:
                raise NotFound(f"User [{name}] does not exist.")
            if "authorizer" in request.path_params:
                return {"name": name, "roles": sorted(snap.user_roles.get(name, ()))}
            return {"name": name}

        return await self._look(request, answer)

    async def create_user(self, request: Request) -> Response:
        name = request.path_params["user"]
        authorizer = "authorizer" in request.path_params

        def create() -> None:
            try:
                self.store.create_user(name)
            except AlreadyExists:
                if not authorizer:  # Druid makes the user in both places; in Strata it is one record
                    raise

        return await self._change(request, create)

    async def delete_user(self, request: Request) -> Response:
        return await self._change(request, lambda: self.store.delete_user(request.path_params["user"]))

    async def set_credentials(self, request: Request) -> Response:
        try:
            body = await self._json(request)
        except BadPermission as e:
            return _error(str(e))
        password = body.get("password") if isinstance(body, dict) else None
        if not isinstance(password, str):
            return _error('the body is {"password": "..."}')
        return await self._change(
            request, lambda: self.store.set_password(request.path_params["user"], password)
        )

    # -- authorization -------------------------------------------------------------------------
    async def list_roles(self, request: Request) -> Response:
        return await self._look(request, lambda: sorted(self.guard.snapshot.roles))

    async def get_role(self, request: Request) -> Response:
        name = request.path_params["role"]

        def answer() -> Any:
            snap = self.guard.snapshot
            if name not in snap.roles:
                raise NotFound(f"Role [{name}] does not exist.")
            users = sorted(u for u, roles in snap.user_roles.items() if name in roles)
            return {"name": name, "users": users, "permissions": [p.to_json() for p in snap.roles[name]]}

        return await self._look(request, answer)

    async def create_role(self, request: Request) -> Response:
        return await self._change(request, lambda: self.store.create_role(request.path_params["role"]))

    async def delete_role(self, request: Request) -> Response:
        return await self._change(request, lambda: self.store.delete_role(request.path_params["role"]))

    async def get_permissions(self, request: Request) -> Response:
        name = request.path_params["role"]

        def answer() -> Any:
            perms = self.guard.snapshot.roles.get(name)
            if perms is None:
                raise NotFound(f"Role [{name}] does not exist.")
            return [p.to_json() for p in perms]

        return await self._look(request, answer)

    async def set_permissions(self, request: Request) -> Response:
        try:
            body = await self._json(request)
            if not isinstance(body, list):
                raise BadPermission("the body is a list of permissions")
            perms = [Permission.from_json(p) for p in body]
        except BadPermission as e:
            return _error(str(e))
        return await self._change(
            request, lambda: self.store.set_permissions(request.path_params["role"], perms)
        )

    async def assign(self, request: Request) -> Response:
        user, role = request.path_params["user"], request.path_params["role"]
        return await self._change(request, lambda: self.store.assign(user, role))

    async def unassign(self, request: Request) -> Response:
        user, role = request.path_params["user"], request.path_params["role"]
        return await self._change(request, lambda: self.store.unassign(user, role))

    def routes(self) -> list[Route]:
        return [
            Route(f"{AUTHN}/users", self.list_users, methods=["GET"]),
            Route(f"{AUTHN}/users/{{user}}", self.get_user, methods=["GET"]),
            Route(f"{AUTHN}/users/{{user}}", self.create_user, methods=["POST"]),
            Route(f"{AUTHN}/users/{{user}}", self.delete_user, methods=["DELETE"]),
            Route(f"{AUTHN}/users/{{user}}/credentials", self.set_credentials, methods=["POST"]),
            Route(f"{AUTHZ}/users", self.list_users, methods=["GET"]),
            Route(f"{AUTHZ}/users/{{user}}", self.get_user, methods=["GET"]),
            Route(f"{AUTHZ}/users/{{user}}", self.create_user, methods=["POST"]),
            Route(f"{AUTHZ}/users/{{user}}", self.delete_user, methods=["DELETE"]),
            Route(f"{AUTHZ}/users/{{user}}/roles/{{role}}", self.assign, methods=["POST"]),
            Route(f"{AUTHZ}/users/{{user}}/roles/{{role}}", self.unassign, methods=["DELETE"]),
            Route(f"{AUTHZ}/roles", self.list_roles, methods=["GET"]),
            Route(f"{AUTHZ}/roles/{{role}}", self.get_role, methods=["GET"]),
            Route(f"{AUTHZ}/roles/{{role}}", self.create_role, methods=["POST"]),
            Route(f"{AUTHZ}/roles/{{role}}", self.delete_role, methods=["DELETE"]),
            Route(f"{AUTHZ}/roles/{{role}}/permissions", self.get_permissions, methods=["GET"]),
            Route(f"{AUTHZ}/roles/{{role}}/permissions", self.set_permissions, methods=["POST"]),
        ]
