"""TLS on every server (`--tls-cert/--tls-key`), verified by clients against `--tls-ca`: the broker
calls its data nodes over HTTPS, `strata sql` and an HTTP client verify the broker, and a
certificate from another CA is refused. The CAs are made here (trustme)."""

from __future__ import annotations

import os
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.ingestion.api import ingest
from tests.cluster.cluster_kit import synthetic_spec, write_rows
from tests.security.secured_cluster import ROWS

pytestmark = pytest.mark.integration

trustme = pytest.importorskip("trustme")


def _wait_https(node: StrataProcess, ca: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert node.alive(), node.log_text()[-3000:]
        try:
            if (
                httpx.get(
                    f"https://{node.address}/status/health",
                    verify=ssl.create_default_context(cafile=ca),
                    timeout=2,
                ).status_code
                == 200
            ):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{node.subcommand} not serving HTTPS:\n{node.log_text()[-3000:]}")


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("tls")
    ca, other = trustme.CA(), trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {
        "ca": root / "ca.pem",
        "other": root / "other-ca.pem",
        "cert": root / "node.pem",
        "key": root / "node.key",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    other.cert_pem.write_to_path(str(files["other"]))
    cert.private_key_pem.write_to_path(str(files["key"]))
    cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
    for blob in cert.cert_chain_pems[1:]:
        blob.write_to_path(str(files["cert"]), append=True)
    rows = write_rows(root / "rows" / "rows.json", ROWS)
    ingest(synthetic_spec("wikipedia", rows, "day"), deep_storage=root / "deep", metadata=root / "meta.db")
    admin = f"admin-{secrets.token_hex(8)}"
    env = {"STRATA_ADMIN_PASSWORD": admin, "STRATA_INTERNAL_PASSWORD": secrets.token_hex(8)}
    tls = ["--authenticator", "basic", "--metadata", str(root / "meta.db"), "--tls-cert", str(files["cert"]),
           "--tls-key", str(files["key"]), "--tls-ca", str(files["ca"])]  # fmt: skip
    historical = StrataProcess("historical", [*tls, "--deep-storage", str(root / "deep"), "--segment-cache",
                               str(root / "cache"), "--poll-period", "0.5"], root / "historical.log", env=env)  # fmt: skip
    broker = StrataProcess("broker", [*tls, "--discovery", "http", "--nodes", historical.address],
                           root / "broker.log", env=env)  # fmt: skip
    with running([historical, broker]):
        for node in (historical, broker):
            node.start(wait=None)
            _wait_https(node, files["ca"])
        yield {"broker": broker, "historical": historical, "admin": admin, **files}


def _query(c: dict) -> dict:
    return {"queryType": "timeseries", "dataSource": "wikipedia", "intervals": ["2025-01-01/2025-01-02"],
            "granularity": "all", "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}]}  # fmt: skip


def test_broker_answers_over_https_from_https_data_nodes(tls_cluster: dict) -> None:
    url = f"https://{tls_cluster['broker'].address}/druid/v2/"
    deadline = time.monotonic() + 60
    while True:
        r = httpx.post(
            url,
            json=_query(tls_cluster),
            auth=("admin", tls_cluster["admin"]),
            verify=ssl.create_default_context(cafile=tls_cluster["ca"]),
            timeout=30,
        )
        assert r.status_code == 200, r.text
        if r.json() or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert r.json()[0]["result"]["n"] == sum(row["n"] for row in ROWS)


def test_a_certificate_from_another_ca_is_refused(tls_cluster: dict) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(
            f"https://{tls_cluster['broker'].address}/status/health",
            verify=ssl.create_default_context(cafile=tls_cluster["other"]),
            timeout=10,
        )
    with pytest.raises(httpx.HTTPError):  # plain HTTP to an HTTPS port gets no answer
        httpx.get(f"http://{tls_cluster['broker'].address}/status/health", timeout=5)


def test_strata_sql_verifies_the_broker(tls_cluster: dict) -> None:
    base = {**os.environ, "STRATA_PASSWORD": tls_cluster["admin"]}
    argv = [sys.executable, "-m", "strata.cli.main", "sql", "--url", f"https://{tls_cluster['broker'].address}",
            "--user", "admin", "--format", "csv", "-e", "SELECT SUM(n) AS s FROM wikipedia"]  # fmt: skip
    ok = subprocess.run(
        [*argv, "--tls-ca", str(tls_cluster["ca"])], env=base, capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == ["s", str(sum(row["n"] for row in ROWS))]
    wrong = subprocess.run(
        [*argv, "--tls-ca", str(tls_cluster["other"])], env=base, capture_output=True, text=True, timeout=60
    )
    assert wrong.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in wrong.stderr


def test_the_spark_readers_broker_client_verifies_the_broker(tls_cluster: dict) -> None:
    from strata.spark.broker_client import BrokerClient, StrataError

    url = f"https://{tls_cluster['broker'].address}"
    auth = ("admin", tls_cluster["admin"])
    assert BrokerClient(url, 30, auth=auth, tls_ca=str(tls_cluster["ca"])).datasources() == ["wikipedia"]
    with pytest.raises(StrataError, match="CERTIFICATE_VERIFY_FAILED"):
        BrokerClient(url, 30, auth=auth, tls_ca=str(tls_cluster["other"])).datasources()
