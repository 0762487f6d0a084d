"""What each route needs, per kind of node: the one table the middleware consults.

Queries and listings are `AUTHENTICATED` here: what they read is only known from their body,
and the handler asks `security.http.authorize` once it has parsed it (resource extraction).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from strata.security.resources import CONFIG, SECURITY_CONFIG, STATE, Action, Resource, datasource


class Need(Enum):
    OPEN = "open"  # no credentials asked (druid.auth.unsecuredPaths)
    AUTHENTICATED = "authenticated"  # any known user; the handler authorizes what it reads
    RESOURCE = "resource"  # a known user holding `action` on the rule's resource
    INTERNAL = "internal"  # the cluster's own identity only (data nodes)


@dataclass(frozen=True)
class Requirement:
    need: Need
    resource: Resource | None = None
    action: Action = Action.READ


@dataclass(frozen=True)
class Rule:
    methods: frozenset[str] | None  # None: every method
    path: re.Pattern[str]
    decide: Callable[[Mapping[str, str], Mapping[str, str], str], Requirement]


def _rule(methods: str | None, pattern: str, decide: Callable[..., Requirement]) -> Rule:
    return Rule(frozenset(methods.split()) if methods else None, re.compile(pattern), decide)


AUTHENTICATED = Requirement(Need.AUTHENTICATED)
OPEN = Requirement(Need.OPEN)
INTERNAL = Requirement(Need.INTERNAL)
STATE_READ = Requirement(Need.RESOURCE, STATE, Action.READ)
CONFIG_READ = Requirement(Need.RESOURCE, CONFIG, Action.READ)
CONFIG_WRITE = Requirement(Need.RESOURCE, CONFIG, Action.WRITE)


def _datasource(action: Action) -> Callable[[Mapping[str, str], Mapping[str, str], str], Requirement]:
    def decide(groups: Mapping[str, str], query: Mapping[str, str], method: str) -> Requirement:
        return Requirement(Need.RESOURCE, datasource(groups["ds"]), action)

    return decide


def _candidates(groups: Mapping[str, str], query: Mapping[str, str], method: str) -> Requirement:
    name = query.get("datasource")
    return AUTHENTICATED if not name else Requirement(Need.RESOURCE, datasource(name), Action.READ)


def _security_api(groups: Mapping[str, str], query: Mapping[str, str], method: str) -> Requirement:
    """Druid's basic-security endpoints: READ on the CONFIG resource `security` to look, WRITE to change."""
    action = Action.READ if method in ("GET", "HEAD") else Action.WRITE
    return Requirement(Need.RESOURCE, SECURITY_CONFIG, action)


def _always(requirement: Requirement) -> Callable[[Mapping[str, str], Mapping[str, str], str], Requirement]:
    return lambda groups, query, method: requirement


_STATUS_RULES = [
    _rule("GET HEAD", r"/status(?:/.*)?", _always(STATE_READ)),
    _rule("GET HEAD", r"/metrics", _always(STATE_READ)),
]

BROKER_RULES: Sequence[Rule] = [
    _rule("POST", r"/druid/v2/?", _always(AUTHENTICATED)),
    _rule("POST", r"/druid/v2/sql/?", _always(AUTHENTICATED)),
    _rule("DELETE", r"/druid/v2/(?:sql/)?[^/]+", _always(AUTHENTICATED)),  # own query or STATE WRITE
    _rule("GET HEAD", r"/druid/v2/datasources", _always(AUTHENTICATED)),  # listed: what the user may read
    _rule("GET HEAD", r"/druid/v2/datasources/(?P<ds>[^/]+)(?:/.*)?", _datasource(Action.READ)),
    _rule("GET HEAD", r"/druid/v2/candidates", _candidates),
    _rule("POST", r"/druid/v2/candidates", _always(AUTHENTICATED)),
    _rule(None, r"/druid-ext/basic-security/.*", _security_api),
    *_STATUS_RULES,
]

_COORDINATOR_V1 = r"/druid/coordinator/v1"
_COORDINATOR_DS = _COORDINATOR_V1 + r"/datasources/(?P<ds>[^/]+)(?:/.*)?"
_METADATA_DS = _COORDINATOR_V1 + r"/metadata/datasources/(?P<ds>[^/]+)(?:/.*)?"

# the coordinator-overlord: task handlers authorize the task's data source themselves (WRITE to
# submit or shut down, READ to look) and listings show readable data sources only
COORDINATOR_RULES: Sequence[Rule] = [
    _rule("GET HEAD", r"/druid/(?:indexer|coordinator)/v1/(?:isLeader|leader)", _always(OPEN)),
    # retention rules as Druid's RulesResource: the cluster-wide lists need STATE, one data source's
    # rules READ (to look) or WRITE (to change) on it
    _rule("GET HEAD", _COORDINATOR_V1 + r"/rules(?:/history)?", _always(STATE_READ)),
    _rule("GET HEAD", _COORDINATOR_V1 + r"/rules/(?P<ds>[^/]+)(?:/history)?", _datasource(Action.READ)),
    _rule("POST", _COORDINATOR_V1 + r"/rules/(?P<ds>[^/]+)", _datasource(Action.WRITE)),
    # auto-compaction as Druid's: its configs are the CONFIG resource's, its status the cluster's state
    _rule("GET HEAD", _COORDINATOR_V1 + r"/config/compaction(?:/.*)?", _always(CONFIG_READ)),
    _rule("POST DELETE", _COORDINATOR_V1 + r"/config/compaction(?:/.*)?", _always(CONFIG_WRITE)),
    _rule("GET HEAD", _COORDINATOR_V1 + r"/compaction/(?:status|progress)", _always(STATE_READ)),
    _rule("POST", _COORDINATOR_V1 + r"/compaction/compact", _always(CONFIG_WRITE)),
    # lookups as Druid's LookupCoordinatorResource: the CONFIG resource (nodes report as the internal user)
    _rule("GET HEAD", _COORDINATOR_V1 + r"/lookups(?:/.*)?", _always(CONFIG_READ)),
    _rule("POST DELETE", _COORDINATOR_V1 + r"/lookups(?:/.*)?", _always(CONFIG_WRITE)),
    _rule(None, r"/druid/indexer/v1/.*", _always(AUTHENTICATED)),
    _rule("GET HEAD", _COORDINATOR_V1 + r"/(?:metadata/)?datasources", _always(AUTHENTICATED)),
    _rule("GET HEAD", _COORDINATOR_V1 + r"/metadata/segments", _always(AUTHENTICATED)),
    _rule("GET HEAD", _METADATA_DS, _datasource(Action.READ)),
    _rule("GET HEAD", _COORDINATOR_DS, _datasource(Action.READ)),
    _rule("POST DELETE", _COORDINATOR_DS, _datasource(Action.WRITE)),
    *_STATUS_RULES,
]

DATA_NODE_RULES: Sequence[Rule] = [
    _rule("POST", r"/v1/push/(?P<ds>[^/]+)(?:/handoff)?", _datasource(Action.WRITE)),
    *_STATUS_RULES,
]


def requirement(
    rules: Sequence[Rule],
    default: Requirement,
    unsecured: frozenset[str],
    method: str,
    path: str,
    query: Mapping[str, str],
) -> Requirement:
    """The first rule matching the whole path; `default` when none does."""
    if path in unsecured:
        return OPEN
    for rule in rules:
        if rule.methods is not None and method not in rule.methods:
            continue
        m = rule.path.fullmatch(path)
        if m is not None:
            return rule.decide(m.groupdict(), query, method)
    return default
