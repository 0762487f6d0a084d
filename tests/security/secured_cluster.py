"""A secured cluster for the security tests: a historical, a real-time node and a broker, all with
`--authenticator basic` over one metadata store, and users made through Druid's HTTP API.

Datasources: `wikipedia` (historical) and `wikipedia_live` (historical rows plus the real-time
node's pushes). Users: alice reads `wikipedia` only; bob holds nothing; ops holds STATE READ and
WRITE; writer may push to and read `wikipedia_live`; admin and the internal client from the
environment (never a command line).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness.processes import StrataProcess, running
from strata.ingestion.api import ingest
from strata.security.client import basic_header
from tests.cluster.cluster_kit import synthetic_spec, wait_until, write_rows

SECURITY = "/druid-ext/basic-security"
AUTHN = f"{SECURITY}/authentication/db/basic"
AUTHZ = f"{SECURITY}/authorization/db/basic"
ROWS: list[dict[str, Any]] = [
    {"ts": f"2025-01-01T{h:02d}:00:00Z", "k": f"k{h % 3}", "n": h} for h in range(6)
]


@dataclass
class Secured:
    root: Path
    broker: StrataProcess
    historical: StrataProcess
    realtime: StrataProcess
    passwords: dict[str, str] = field(default_factory=dict)
    coordinator: StrataProcess | None = None

    def auth(self, user: str) -> dict[str, str]:
        return basic_header(user, self.passwords[user])

    def processes(self) -> list[StrataProcess]:
        boss = [self.coordinator] if self.coordinator is not None else []
        return [*boss, self.historical, self.realtime, self.broker]


def _realtime_spec(root: Path) -> Path:
    spec = {
        "type": "index_realtime",
        "spec": {
            "dataSchema": {
                "dataSource": "wikipedia_live",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["k"]},
                "metricsSpec": [{"type": "longSum", "name": "n", "fieldName": "n"}],
                "granularitySpec": {
                    "segmentGranularity": "hour",
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "tuningConfig": {
                "type": "realtime",
                "rejectionPolicy": {"type": "none"},
                "windowPeriod": "PT10M",
            },
        },
    }
    path = root / "rt-spec.json"
    path.write_text(json.dumps(spec))
    return path


def setup_users(c: Secured) -> None:
    admin = c.auth("admin")

    def call(method: str, path: str, body: object = None) -> None:
        r = httpx.request(method, c.broker.url + path, headers=admin, json=body, timeout=30)
        assert r.status_code == 200, (method, path, r.status_code, r.text)

    grants = {
        "wiki_reader": [{"resource": {"name": "wikipedia", "type": "DATASOURCE"}, "action": "READ"}],
        "ops": [{"resource": {"name": ".*", "type": "STATE"}, "action": a} for a in ("READ", "WRITE")],
        "live_writer": [{"resource": {"name": "wikipedia_live", "type": "DATASOURCE"}, "action": a}
                        for a in ("READ", "WRITE")],
    }  # fmt: skip
    members = {"alice": "wiki_reader", "bob": None, "ops": "ops", "writer": "live_writer"}
    for role, perms in grants.items():
        call("POST", f"{AUTHZ}/roles/{role}")
        call("POST", f"{AUTHZ}/roles/{role}/permissions", perms)
    for user, granted in members.items():
        c.passwords[user] = f"{user}-{secrets.token_hex(8)}"
        call("POST", f"{AUTHN}/users/{user}")
        call("POST", f"{AUTHN}/users/{user}/credentials", {"password": c.passwords[user]})
        call("POST", f"{AUTHZ}/users/{user}")  # Druid's second step; one record in Strata
        if granted:
            call("POST", f"{AUTHZ}/users/{user}/roles/{granted}")


@contextmanager
def secured_cluster(root: Path, *, coordinator: bool = False) -> Iterator[Secured]:
    """With `coordinator`, also a coordinator-overlord over the same stores, which the broker relays."""
    for name in ("wikipedia", "wikipedia_live"):
        rows = write_rows(root / "rows" / name / "rows.json", ROWS)
        ingest(synthetic_spec(name, rows, "day"), deep_storage=root / "deep", metadata=root / "meta.db")
    passwords = {"admin": f"admin-{secrets.token_hex(8)}", "druid_system": f"internal-{secrets.token_hex(8)}"}
    env = {"STRATA_ADMIN_PASSWORD": passwords["admin"], "STRATA_INTERNAL_PASSWORD": passwords["druid_system"],
           "STRATA_INSECURE": "0"}  # fmt: skip
    secure = ["--authenticator", "basic", "--metadata", str(root / "meta.db"), "--auth-poll-seconds", "0.5"]
    store = ["--deep-storage", str(root / "deep")]
    many = [
        "--max-failed-logins",
        "1000",
    ]  # the matrix fails many logins; realtime keeps 20 to test the limit
    historical = StrataProcess("historical", [*secure, *many, *store, "--segment-cache", str(root / "cache"),
                               "--poll-period", "0.5"], root / "historical.log", env=env)  # fmt: skip
    rt = StrataProcess("realtime", [*secure, "--max-failed-logins", "20", *store, "--spec", str(_realtime_spec(root)),
                       "--base-dir", str(root / "rt")], root / "realtime.log", env=env)  # fmt: skip
    nodes = f"{historical.address},{rt.address}/realtime"
    boss, relay = None, []
    if coordinator:
        boss = StrataProcess("coordinator", [*secure, *store, "--task-log-dir", str(root / "task-logs")],
                             root / "coordinator.log", env=env)  # fmt: skip
        relay = ["--coordinator", boss.address]
    broker = StrataProcess(
        "broker",
        [*secure, *many, "--discovery", "http", "--nodes", nodes, *relay],
        root / "broker.log",
        env=env,
    )
    cluster = Secured(root, broker, historical, rt, passwords, boss)
    with running(cluster.processes()):
        for p in cluster.processes():
            p.start(timeout=60)  # /status/health answers without credentials
        setup_users(cluster)
        ask = {"queryType": "timeBoundary", "dataSource": "wikipedia_live"}
        wait_until(lambda: httpx.post(broker.url + "/druid/v2/", json=ask, headers=cluster.auth("admin"),
                                      timeout=10).json() != [], timeout=60, what="segments announced",
                   logs=cluster.processes())  # fmt: skip
        yield cluster
