"""A real secured cluster: every route against every kind of caller (the generated matrix), SQL
hiding a forbidden table, listings, cancel, changes reaching every node, and no password in any
log, error body, status or process list."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from strata.security.client import basic_header
from tests.security.secured_cluster import AUTHN, AUTHZ, Secured

pytestmark = pytest.mark.integration

INTERVAL = "2025-01-01/2025-01-02"


def _timeseries(ds: str) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": ds, "intervals": [INTERVAL], "granularity": "all",
            "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}]}  # fmt: skip


@dataclass(frozen=True)
class Route:
    """One route: where, how, and who may (`right`); `ds` routes are also asked by alice for
    `wikipedia_live` (she reads `wikipedia` only: the name is matched whole)."""

    name: str
    node: str  # broker | historical | realtime
    method: str
    path: str  # may hold {ds}
    right: str
    body: Any = None  # may be a callable of ds
    ds_route: bool = True

    def request(self, ds: str) -> tuple[str, str, Any]:
        body = self.body(ds) if callable(self.body) else self.body
        return self.method, self.path.format(ds=ds), body


ROUTES = [
    Route("native query", "broker", "POST", "/druid/v2/", "alice", _timeseries),
    Route("native query three levels deep", "broker", "POST", "/druid/v2/", "alice",
          lambda ds: {"queryType": "timeseries", "dataSource": {"type": "query", "query": {
              "queryType": "groupBy", "dataSource": {"type": "query", "query": {
                  "queryType": "groupBy", "dataSource": ds, "intervals": [INTERVAL], "granularity": "all",
                  "dimensions": ["k"], "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}]}},
              "intervals": [INTERVAL], "granularity": "all", "dimensions": ["k"],
              "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}]}},
              "intervals": [INTERVAL], "granularity": "all",
              "aggregations": [{"type": "count", "name": "c"}]}),
    Route("SQL", "broker", "POST", "/druid/v2/sql/", "alice", lambda ds: {"query": f'SELECT COUNT(*) FROM "{ds}"'}),
    Route("datasource", "broker", "GET", "/druid/v2/datasources/{ds}", "alice"),
    Route("datasource dimensions", "broker", "GET", "/druid/v2/datasources/{ds}/dimensions", "alice"),
    Route("candidates", "broker", "GET", "/druid/v2/candidates?datasource={ds}&intervals=" + INTERVAL, "alice"),
    Route("candidates of a query", "broker", "POST", "/druid/v2/candidates", "alice", _timeseries),
    Route("status", "broker", "GET", "/status", "ops", ds_route=False),
    Route("cache status", "broker", "GET", "/status/cache", "ops", ds_route=False),
    Route("metrics", "broker", "GET", "/metrics", "ops", ds_route=False),
    Route("cancel another's query", "broker", "DELETE", "/druid/v2/someone-elses-query", "ops", ds_route=False),
    Route("cancel another's SQL", "broker", "DELETE", "/druid/v2/sql/someone-elses-query", "ops", ds_route=False),
    Route("security users", "broker", "GET", f"{AUTHN}/users", "admin", ds_route=False),
    Route("security roles", "broker", "GET", f"{AUTHZ}/roles", "admin", ds_route=False),
    Route("historical query", "historical", "POST", "/druid/v2/", "druid_system", _timeseries),
    Route("historical segment feed", "historical", "GET", "/druid-internal/v1/segments?counter=-1&timeout=1", "druid_system", ds_route=False),
    Route("historical status", "historical", "GET", "/status", "ops", ds_route=False),
    Route("realtime query", "realtime", "POST", "/druid/v2/", "druid_system", _timeseries),
    Route("push", "realtime", "POST", "/v1/push/{ds}", "writer",
          lambda ds: [{"ts": "2025-01-01T01:00:00Z", "k": "pushed", "n": 1}]),
]  # fmt: skip
RIGHT_DS = {"push": "wikipedia_live"}  # the datasource the right user asks for (else wikipedia)
CALLERS = ["no credentials", "wrong password", "unknown user", "user without permission",
           "alice asking for wikipedia_live", "right user"]  # fmt: skip


def _expected(route: Route, caller: str) -> int:
    if caller in ("no credentials", "wrong password", "unknown user"):
        return 401
    if caller == "right user":
        return {"cancel another's query": 202, "cancel another's SQL": 404}.get(route.name, 200)
    return 403


def _ask(c: Secured, route: Route, caller: str) -> httpx.Response:
    node = getattr(c, route.node)
    ds = RIGHT_DS.get(route.name, "wikipedia")
    headers: dict[str, str] = {}
    if caller == "wrong password":
        headers = basic_header(route.right, "not-the-password")
    elif caller == "unknown user":
        headers = basic_header("mallory", "whatever")
    elif caller == "user without permission":
        headers = c.auth("bob")
    elif caller == "alice asking for wikipedia_live":
        headers, ds = c.auth("alice"), "wikipedia_live"
    elif caller == "right user":
        headers = c.auth(route.right)
    method, path, body = route.request(ds)
    return httpx.request(method, node.url + path, json=body, headers=headers, timeout=30)


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_matrix(cluster: Secured, route: Route, caller: str) -> None:
    r = _ask(cluster, route, caller)
    assert r.status_code == _expected(route, caller), r.text
    if r.status_code == 401:
        assert r.headers["www-authenticate"].startswith("Basic")
    if r.status_code in (401, 403):
        body = r.json()
        assert body["errorMessage"] == "Unauthorized"
        assert "wikipedia" not in r.text and "mallory" not in r.text  # names nothing


def test_health_is_open(cluster: Secured) -> None:
    for node in cluster.processes():
        assert httpx.get(node.url + "/status/health", timeout=10).status_code == 200


def test_native_query_answers_the_right_user(cluster: Secured) -> None:
    r = httpx.post(
        cluster.broker.url + "/druid/v2/",
        json=_timeseries("wikipedia"),
        headers=cluster.auth("alice"),
        timeout=30,
    )
    assert r.json()[0]["result"]["n"] == sum(range(6))  # the rows written, summed in Python


FORBIDDEN_SQL = [
    'SELECT * FROM (SELECT k FROM wikipedia_live) AS t',
    'WITH t AS (SELECT k FROM wikipedia_live) SELECT * FROM t',
    'SELECT a.k FROM wikipedia a JOIN wikipedia_live b ON a.k = b.k',
    'SELECT k FROM wikipedia WHERE k IN (SELECT k FROM wikipedia_live)',
    'SELECT k FROM wikipedia UNION ALL SELECT k FROM wikipedia_live',
    'EXPLAIN PLAN FOR SELECT k FROM wikipedia_live',
    'SELECT k FROM wikipedia_live WHERE k IN (WITH wikipedia_live AS (SELECT 1 AS k) SELECT k FROM wikipedia_live)',
    'SELECT COUNT(*) FROM druid.wikipedia_live',
    'SELECT * FROM sys.servers',
]  # fmt: skip


@pytest.mark.parametrize("sql", FORBIDDEN_SQL)
def test_sql_hiding_a_forbidden_table_is_refused(cluster: Secured, sql: str) -> None:
    r = httpx.post(
        cluster.broker.url + "/druid/v2/sql/", json={"query": sql}, headers=cluster.auth("alice"), timeout=30
    )
    assert r.status_code == 403, r.text
    assert "wikipedia_live" not in r.text


def test_sql_with_a_cte_over_a_readable_table(cluster: Secured) -> None:
    sql = "WITH t AS (SELECT k, n FROM wikipedia) SELECT SUM(n) AS s FROM t"
    r = httpx.post(
        cluster.broker.url + "/druid/v2/sql/", json={"query": sql}, headers=cluster.auth("alice"), timeout=30
    )
    assert r.status_code == 200, r.text
    assert r.json() == [{"s": sum(range(6))}]


def _sql(c: Secured, user: str, sql: str) -> list[dict[str, Any]]:
    r = httpx.post(c.broker.url + "/druid/v2/sql/", json={"query": sql}, headers=c.auth(user), timeout=30)
    assert r.status_code == 200, r.text
    return list(r.json())


def test_listings_show_only_what_the_user_may_read(cluster: Secured) -> None:
    url = cluster.broker.url + "/druid/v2/datasources"
    assert httpx.get(url, headers=cluster.auth("alice"), timeout=10).json() == ["wikipedia"]
    assert httpx.get(url, headers=cluster.auth("bob"), timeout=10).json() == []
    assert sorted(httpx.get(url, headers=cluster.auth("admin"), timeout=10).json()) == [
        "wikipedia",
        "wikipedia_live",
    ]
    tables = _sql(
        cluster, "alice", "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'"
    )
    assert [t["TABLE_NAME"] for t in tables] == ["wikipedia"]
    columns = _sql(
        cluster,
        "alice",
        "SELECT DISTINCT TABLE_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid'",
    )
    assert [t["TABLE_NAME"] for t in columns] == ["wikipedia"]
    segments = _sql(cluster, "alice", "SELECT DISTINCT datasource FROM sys.segments")
    assert [s["datasource"] for s in segments] == ["wikipedia"]
    all_segments = _sql(cluster, "admin", "SELECT DISTINCT datasource FROM sys.segments ORDER BY datasource")
    assert [s["datasource"] for s in all_segments] == ["wikipedia", "wikipedia_live"]
    assert _sql(cluster, "ops", "SELECT COUNT(*) AS c FROM sys.servers")[0]["c"] == 2


def test_own_query_may_be_cancelled(cluster: Secured) -> None:
    body = {**_timeseries("wikipedia"), "context": {"queryId": "alices-query"}}
    url = cluster.broker.url
    assert (
        httpx.post(url + "/druid/v2/", json=body, headers=cluster.auth("alice"), timeout=30).status_code
        == 200
    )
    assert (
        httpx.delete(url + "/druid/v2/alices-query", headers=cluster.auth("alice"), timeout=10).status_code
        == 202
    )
    assert (
        httpx.delete(url + "/druid/v2/alices-query", headers=cluster.auth("bob"), timeout=10).status_code
        == 403
    )


def test_changes_reach_every_node_within_5_seconds(cluster: Secured) -> None:
    admin = cluster.auth("admin")
    url = cluster.broker.url
    httpx.post(f"{url}{AUTHN}/users/temp", headers=admin, timeout=10)
    httpx.post(
        f"{url}{AUTHN}/users/temp/credentials", json={"password": "temp-pw-1"}, headers=admin, timeout=10
    )
    httpx.post(f"{url}{AUTHZ}/users/temp/roles/ops", headers=admin, timeout=10)
    started = time.monotonic()
    seen = set()
    while time.monotonic() - started < 5 and len(seen) < 3:
        for node in cluster.processes():
            if (
                httpx.get(
                    node.url + "/status", headers=basic_header("temp", "temp-pw-1"), timeout=5
                ).status_code
                == 200
            ):
                seen.add(node.subcommand)
        time.sleep(0.2)
    assert seen == {"broker", "historical", "realtime"}
    httpx.delete(f"{url}{AUTHN}/users/temp", headers=admin, timeout=10)
    time.sleep(2)
    for node in cluster.processes():
        assert (
            httpx.get(node.url + "/status", headers=basic_header("temp", "temp-pw-1"), timeout=5).status_code
            == 401
        )


def test_security_api_refuses_bad_input(cluster: Secured) -> None:
    admin, url = cluster.auth("admin"), cluster.broker.url
    bad = httpx.post(
        f"{url}{AUTHZ}/roles/ops/permissions",
        json=[{"resource": {"name": "(", "type": "DATASOURCE"}, "action": "READ"}],
        headers=admin,
        timeout=10,
    )
    assert bad.status_code == 400 and "regular expression" in bad.json()["error"]
    assert httpx.post(f"{url}{AUTHZ}/users/nobody/roles/ops", headers=admin, timeout=10).status_code == 400
    assert (
        httpx.get(
            f"{url}/druid-ext/basic-security/authentication/db/other/users", headers=admin, timeout=10
        ).status_code
        == 400
    )
    role = httpx.get(f"{url}{AUTHZ}/roles/wiki_reader", headers=admin, timeout=10).json()
    assert role["users"] == ["alice"]


def test_failed_logins_are_rate_limited(cluster: Secured) -> None:
    node = cluster.realtime  # limited at 20 a minute (the others allow the matrix its failures)
    codes = []
    while 429 not in codes and len(codes) < 25:
        codes.append(
            httpx.get(node.url + "/status", headers=basic_header("ops", "guess"), timeout=10).status_code
        )
    assert set(codes[:-1]) == {401} and codes[-1] == 429
    r = httpx.get(node.url + "/status", headers=cluster.auth("ops"), timeout=10)
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0


def test_no_password_anywhere(cluster: Secured) -> None:
    """Last in the module: every log so far, status bodies and the process list."""
    passwords = [*cluster.passwords.values(), "temp-pw-1", "not-the-password"]
    for node in cluster.processes():
        status = httpx.get(
            node.url + "/status",
            headers=cluster.auth("admin" if node is cluster.broker else "druid_system"),
            timeout=10,
        )
        cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes().decode(errors="replace")
        for pw in passwords:
            assert pw not in node.log_text(), node.subcommand
            assert pw not in status.text
            assert pw not in cmdline
    assert '"event":"security.refused"' in cluster.broker.log_text()
