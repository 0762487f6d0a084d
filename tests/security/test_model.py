"""The pure parts: permissions matched whole, PBKDF2 credentials, the snapshot's decisions, the
verified-credentials cache, the failed-login limiter, the route table."""

from __future__ import annotations

import hashlib

import pytest

from strata.security.credential_cache import VerifiedCredentials
from strata.security.guard import parse_basic
from strata.security.model import AuthSnapshot
from strata.security.passwords import ITERATIONS, PasswordRefused, hash_password, verify_password
from strata.security.policy import BROKER_RULES, DATA_NODE_RULES, INTERNAL, Need, requirement
from strata.security.rate_limit import FailedLogins
from strata.security.resources import STATE, Action, BadPermission, Permission, ResourceType, datasource


def test_permission_name_is_matched_whole():
    p = Permission.of("wikipedia", "DATASOURCE", "READ")
    assert p.allows(datasource("wikipedia"), Action.READ)
    assert not p.allows(datasource("wikipedia_live"), Action.READ)
    assert not p.allows(datasource("old_wikipedia"), Action.READ)
    assert not p.allows(datasource("wikipedia"), Action.WRITE)
    assert not p.allows(STATE, Action.READ)
    assert Permission.of("wiki.*", "DATASOURCE", "READ").allows(datasource("wikipedia_live"), Action.READ)


@pytest.mark.parametrize(
    "doc",
    [
        None,
        {"action": "READ"},
        {"resource": {"name": "x", "type": "TABLE"}, "action": "READ"},
        {"resource": {"name": "x", "type": "DATASOURCE"}, "action": "DELETE"},
        {"resource": {"name": "(", "type": "DATASOURCE"}, "action": "READ"},
        {"resource": {"name": 3, "type": "DATASOURCE"}, "action": "READ"},
    ],
)
def test_bad_permission_documents_are_refused(doc):
    with pytest.raises(BadPermission):
        Permission.from_json(doc)


def test_permission_json_round_trip():
    doc = {"resource": {"name": "wiki.*", "type": "SYSTEM_TABLE"}, "action": "WRITE"}
    assert Permission.from_json(doc).to_json() == doc
    assert Permission.from_json(doc).type is ResourceType.SYSTEM_TABLE


def test_passwords_are_salted_pbkdf2_sha512():
    a, b = hash_password("s3cret"), hash_password("s3cret")
    assert a.salt != b.salt and a.hash != b.hash
    assert a.iterations >= ITERATIONS >= 10_000
    assert a.hash == hashlib.pbkdf2_hmac("sha512", b"s3cret", a.salt, a.iterations, 64)
    assert verify_password("s3cret", a)
    assert not verify_password("s3cret ", a)
    assert hash_password("x", iterations=5).iterations == ITERATIONS  # never fewer than Druid's
    with pytest.raises(PasswordRefused):
        hash_password("")


def test_snapshot_decides_through_roles():
    creds = hash_password("pw")
    snap = AuthSnapshot(
        1,
        {"alice": creds, "bob": creds},
        {"wiki": (Permission.of("wikipedia", "DATASOURCE", "READ"),)},
        {"alice": frozenset({"wiki", "gone"})},
    )
    assert snap.allows("alice", datasource("wikipedia"), Action.READ)
    assert not snap.allows("alice", datasource("wikipedia_live"), Action.READ)
    assert not snap.allows("bob", datasource("wikipedia"), Action.READ)
    assert snap.readable("alice", ["wikipedia_live", "wikipedia", "x"]) == ["wikipedia"]


def test_verified_credentials_hold_no_password_and_follow_the_stored_record():
    cache = VerifiedCredentials()
    creds = hash_password("pw")
    header = b"Basic YWxpY2U6cHc="  # alice:pw
    assert cache.user(header, {"alice": creds}) is None
    cache.remember(header, "alice", creds)
    assert cache.user(header, {"alice": creds}) == "alice"
    assert cache.user(b"Basic YWxpY2U6b3RoZXI=", {"alice": creds}) is None  # another password
    assert cache.user(header, {"alice": hash_password("pw")}) is None  # password set again: verify again
    assert cache.user(header, {}) is None  # user deleted
    assert all(isinstance(k, bytes) and len(k) == 16 for k in cache._verified)  # digests, never the header


def test_failed_logins_limit_per_address():
    now = [0.0]
    limiter = FailedLogins(max_failures=3, window_s=60.0, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.retry_after("10.0.0.1") is None
        limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") == 60
    assert limiter.retry_after("10.0.0.2") is None
    now[0] = 30.0
    assert limiter.retry_after("10.0.0.1") == 30
    now[0] = 60.5
    assert limiter.retry_after("10.0.0.1") is None


@pytest.mark.parametrize(
    "header, expected",
    [
        (None, None),
        ("Bearer abc", None),
        ("Basic !!!", None),
        ("Basic " + __import__("base64").b64encode(b"alice:pa:ss").decode(), ("alice", "pa:ss")),
        ("basic " + __import__("base64").b64encode(b"alice").decode(), None),
        ("Basic " + __import__("base64").b64encode(b":pw").decode(), None),
    ],
)
def test_parse_basic(header, expected):
    creds = parse_basic(header)
    assert (None if creds is None else (creds.user, creds.password)) == expected
    if creds is not None:
        assert creds.password not in repr(creds)


def test_route_table():
    none = frozenset({"/status/health"})
    assert requirement(BROKER_RULES, INTERNAL, none, "GET", "/status/health", {}).need is Need.OPEN
    assert requirement(BROKER_RULES, INTERNAL, none, "GET", "/status", {}).resource == STATE
    r = requirement(BROKER_RULES, INTERNAL, none, "GET", "/druid/v2/datasources/wikipedia/dimensions", {})
    assert r.resource == datasource("wikipedia") and r.action is Action.READ
    r = requirement(DATA_NODE_RULES, INTERNAL, none, "POST", "/v1/push/wikipedia_live", {})
    assert r.resource == datasource("wikipedia_live") and r.action is Action.WRITE
    assert requirement(DATA_NODE_RULES, INTERNAL, none, "POST", "/druid/v2/", {}) is INTERNAL
    r = requirement(
        BROKER_RULES, INTERNAL, none, "POST", "/druid-ext/basic-security/authorization/db/basic/roles/x", {}
    )
    assert r.resource.type is ResourceType.CONFIG and r.action is Action.WRITE
