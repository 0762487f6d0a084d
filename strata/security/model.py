"""One consistent view of users, roles and grants, as read from the store at one version.

Pure: the authenticator and the authorizer answer from a snapshot; the poller swaps in a new one
when the store's version moves, so a request never sees half a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from strata.security.passwords import Credentials
from strata.security.resources import Action, Permission, Resource, datasource

ADMIN_ROLE = "admin"
ADMIN_USER = "admin"
INTERNAL_USER = "druid_system"  # Druid's escalator `internalClientUsername`


@dataclass(frozen=True)
class AuthSnapshot:
    version: int
    credentials: Mapping[str, Credentials | None]  # every user; None: no password set yet
    roles: Mapping[str, tuple[Permission, ...]]
    user_roles: Mapping[str, frozenset[str]]
    _grants: dict[str, tuple[Permission, ...]] = field(default_factory=dict, compare=False, repr=False)
    _decided: dict[tuple[str, Resource, Action], bool] = field(
        default_factory=dict, compare=False, repr=False
    )

    def permissions_of(self, user: str) -> tuple[Permission, ...]:
        grants = self._grants.get(user)
        if grants is None:
            grants = tuple(p for r in sorted(self.user_roles.get(user, ())) for p in self.roles.get(r, ()))
            self._grants[user] = grants
        return grants

    def allows(self, user: str, resource: Resource, action: Action) -> bool:
        """Whether any of the user's roles grants `action` on `resource` (memoised per snapshot:
        a dashboard asks the same question on every request)."""
        key = (user, resource, action)
        decided = self._decided.get(key)
        if decided is None:
            decided = any(p.allows(resource, action) for p in self.permissions_of(user))
            if len(self._decided) > 100_000:
                self._decided.clear()
            self._decided[key] = decided
        return decided

    def readable(self, user: str, names: Iterable[str]) -> list[str]:
        """The datasources among `names` the user may read (listings show only these)."""
        return [n for n in names if self.allows(user, datasource(n), Action.READ)]


EMPTY = AuthSnapshot(0, {}, {}, {})
