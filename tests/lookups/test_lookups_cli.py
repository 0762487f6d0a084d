"""`strata lookups` against a real secured coordinator and a historical that loads the `__default`
tier: what the command prints is checked against the files it was given and against the
coordinator's HTTP API read directly; refusals are one line and a non-zero exit status."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess
from tests.cluster.cluster_kit import wait_until
from tests.coordinator.kit import coordinator

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
API = "/druid/coordinator/v1/lookups"
COUNTRY = {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"US": "United States"}}}


def namespace(path: Path, version: str) -> dict[str, Any]:
    return {"version": version, "lookupExtractorFactory": {"type": "cachedNamespace", "extractionNamespace": {
        "type": "uri", "uri": path.as_uri(), "namespaceParseSpec": {"format": "simpleJson"}}}}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("lookups-cli")
    meta = str(root / "meta.db")
    env = {"STRATA_ADMIN_PASSWORD": secrets.token_hex(8), "STRATA_INTERNAL_PASSWORD": secrets.token_hex(8)}
    secure = ["--authenticator", "basic"]
    coord = coordinator(root, meta, *secure)
    coord.env |= env
    started: list[StrataProcess] = []
    try:
        started.append(coord.start(timeout=60))
        historical = StrataProcess(
            "historical",
            ["--deep-storage", str(root / "deep"), "--metadata", meta, "--segment-cache", str(root / "cache"),
             "--coordinator", coord.address, "--lookup-poll-period", "0.3", *secure],
            root / "historical.log", env=env,
        )  # fmt: skip
        started.append(historical.start(timeout=60))
        yield {"root": root, "coord": coord, "historical": historical, "admin": env["STRATA_ADMIN_PASSWORD"]}
    finally:
        for process in reversed(started):
            process.stop()


def strata_lookups(cluster: dict[str, Any], *args: str, password: str | None = None,
                   user: str | None = "admin", stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env["HOME"] = str(cluster["root"])  # no ~/.netrc
    if password != "":  # "": none in the environment either
        env["STRATA_PASSWORD"] = cluster["admin"] if password is None else password
    argv = ["--coordinator", cluster["coord"].address, *(["--user", user] if user else []), *args]
    return subprocess.run([sys.executable, "-m", "strata.cli.main", "lookups", *argv], env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def direct(cluster: dict[str, Any], path: str) -> httpx.Response:
    return httpx.get(cluster["coord"].url + API + path, auth=("admin", cluster["admin"]), timeout=30)


def refused(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("strata lookups: error: "), done.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_set_list_get_and_status(cluster: dict[str, Any], tmp_path: Path) -> None:
    assert strata_lookups(cluster, "list").stdout == "no lookups\n"
    assert direct(cluster, "/config").status_code == 404  # not configured: `set` posts the empty map first
    pairs = tmp_path / "owners.json"
    pairs.write_text('{"app1": "alice"}\n{"app2": "bob"}\n')
    config = {"__default": {"country": COUNTRY, "owners": namespace(pairs, "2024-01")},
              "analysts": {"country": {**COUNTRY, "version": "v7"}}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    done = strata_lookups(cluster, "set", str(tmp_path / "config.json"), "--author", "ops")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "set __default/country",
        "set __default/owners",
        "set analysts/country",
    ]
    assert direct(cluster, "/config/all").json() == config

    listed = [line.split() for line in strata_lookups(cluster, "list").stdout.splitlines()]
    assert listed == [["TIER", "LOOKUP", "VERSION", "TYPE"], ["__default", "country", "v1", "map"],
                      ["__default", "owners", "2024-01", "cachedNamespace/uri"],
                      ["analysts", "country", "v7", "map"]]  # fmt: skip
    got = strata_lookups(cluster, "get", "__default", "owners")
    assert got.returncode == 0 and json.loads(got.stdout) == config["__default"]["owners"]

    node = cluster["historical"].address
    wait_until(lambda: "loaded" in strata_lookups(cluster, "status", "__default").stdout.split("\n")[1],
               "the historical to load owners", 30, [cluster["historical"]])  # fmt: skip
    assert strata_lookups(cluster, "status", "__default").stdout.splitlines() == [
        "__default/country: loaded", "__default/owners: loaded"]  # fmt: skip
    held = direct(cluster, "/nodeStatus/__default").json()[node]["current"]
    assert sorted(held) == ["country", "owners"]

    # a file the node cannot read leaves the lookup pending there, and `status` names the node
    gone = namespace(tmp_path / "missing.json", "2024-02")
    (tmp_path / "one.json").write_text(json.dumps(gone))
    assert strata_lookups(cluster, "set", "__default", "owners", str(tmp_path / "one.json")).returncode == 0
    wait_until(lambda: direct(cluster, "/status/__default/owners").json() == {"loaded": False},
               "owners to be pending", 30, [cluster["historical"]])  # fmt: skip
    everything = strata_lookups(cluster, "status").stdout.splitlines()
    assert everything == [
        "__default/country: loaded",
        f"__default/owners: pending on {node}",
        "analysts/country: loaded",
    ]  # no node serves `analysts`


def test_refusals_are_one_line_and_a_non_zero_status(cluster: dict[str, Any], tmp_path: Path) -> None:
    older = tmp_path / "older.json"
    older.write_text(json.dumps({**COUNTRY, "version": "v0"}))
    refused(
        strata_lookups(cluster, "set", "__default", "country", str(older)), 1, "can't replace existing spec"
    )
    assert direct(cluster, "/config/__default/country").json() == COUNTRY  # unchanged

    refused(strata_lookups(cluster, "get", "__default", "nope"), 1, "no lookup __default/nope")
    refused(strata_lookups(cluster, "delete", "nope", "country"), 1, "no lookup nope/country")
    refused(strata_lookups(cluster, "status", "nope"), 1, "no tier [nope]")
    refused(strata_lookups(cluster, "set", str(tmp_path / "absent.json")), 2, "cannot read")
    (tmp_path / "bad.json").write_text("{not json")
    refused(strata_lookups(cluster, "set", "-", stdin="{not json"), 2, "- is not JSON")
    refused(strata_lookups(cluster, "set", "only-tier", str(tmp_path / "bad.json")), 2, "TIER ID FILE")

    refused(strata_lookups(cluster, "list", password="wrong"), 1, "UNAUTHORIZED")
    refused(strata_lookups(cluster, "list", user=None), 1, "UNAUTHORIZED")  # no credentials at all
    env_free = strata_lookups(cluster, "list", password="")  # no STRATA_PASSWORD, no netrc, no terminal
    refused(env_free, 2, "no password for admin")
    unreachable = subprocess.run([sys.executable, "-m", "strata.cli.main", "lookups", "--coordinator",
                                  "127.0.0.1:1", "list"], capture_output=True, text=True, timeout=60)  # fmt: skip
    refused(unreachable, 2, "cannot reach http://127.0.0.1:1")


def test_delete(cluster: dict[str, Any]) -> None:
    done = strata_lookups(cluster, "delete", "analysts", "country")
    assert (done.returncode, done.stdout) == (0, "deleted analysts/country\n"), done.stderr
    assert direct(cluster, "/config/analysts/country").status_code == 404
    refused(strata_lookups(cluster, "get", "analysts", "country"), 1, "no lookup analysts/country")
