"""Scans answered as a streamed Arrow IPC stream (`Accept: application/vnd.apache.arrow.stream`)
by a real broker over two historicals, checked against the same scan's JSON answer and DuckDB."""

# ruff: noqa: F811 - pytest fixtures imported from another module are parameters here

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from strata.spark.broker_client import BrokerClient, StrataError
from tests.cluster.test_broker_cluster import cluster, raw  # noqa: F401 - the module's cluster fixture

pytestmark = pytest.mark.integration

ARROW = "application/vnd.apache.arrow.stream"
DAY = "2015-09-12/2015-09-13"


def arrow_scan(broker_url: str, body: dict[str, Any]) -> pa.Table:
    resp = httpx.post(f"{broker_url}/druid/v2/", json=body, headers={"Accept": ARROW}, timeout=60)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith(ARROW)
    return pa.ipc.open_stream(resp.content).read_all()


def json_events(broker_url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    resp = httpx.post(f"{broker_url}/druid/v2/", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return [e for batch in resp.json() for e in batch["events"]]


def test_arrow_scan_equals_the_json_scan(cluster: dict[str, Any]) -> None:
    url = cluster["broker"].url
    body = {"queryType": "scan", "dataSource": "wikipedia", "intervals": [DAY],
            "columns": ["__time", "page", "added", "cityName"],
            "filter": {"type": "equals", "column": "channel", "matchValueType": "STRING", "matchValue": "#de.wikipedia"}}  # fmt: skip
    table = arrow_scan(url, body)
    assert table.schema.field("__time").type == pa.timestamp("ms", tz="UTC")
    assert table.schema.field("added").type == pa.int64()
    assert table.schema.field("page").type == pa.string()
    got = sorted(
        zip(table.column("__time").cast(pa.int64()).to_pylist(), table.column("page").to_pylist(),
            table.column("added").to_pylist(), table.column("cityName").to_pylist(), strict=True),
        key=repr,
    )  # fmt: skip
    want = sorted(
        ((e["__time"], e["page"], e["added"], e["cityName"]) for e in json_events(url, body)), key=repr
    )
    assert got == want and len(got) > 0


def test_every_column_and_limit_offset(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    url = cluster["broker"].url
    whole = arrow_scan(url, {"queryType": "scan", "dataSource": "wikipedia", "intervals": DAY})
    ((rows,),) = raw("SELECT count(*) FROM RAW", wikipedia_sample)
    assert whole.num_rows == rows and whole.column_names[0] == "__time" and "channel" in whole.column_names
    part = arrow_scan(url, {"queryType": "scan", "dataSource": "wikipedia", "intervals": DAY,
                            "columns": ["page"], "offset": 100, "limit": 2500})  # fmt: skip
    assert part.num_rows == 2500


def test_named_segments_only(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    url = cluster["broker"].url
    located = httpx.get(f"{url}/druid/v2/datasources/wikipedia/candidates", params={"intervals": DAY}).json()
    picked = [{k: c[k] for k in ("itvl", "ver", "part")} for c in located[3:5]]  # hours 03 and 04
    table = arrow_scan(url, {"queryType": "scan", "dataSource": "wikipedia", "columns": ["__time"],
                             "intervals": {"type": "segments", "segments": picked}})  # fmt: skip
    ((rows,),) = raw("SELECT count(*) FROM RAW WHERE hour(time::TIMESTAMP) IN (3, 4)", wikipedia_sample)
    assert table.num_rows == rows


def test_ordered_scan_is_refused_with_a_status(cluster: dict[str, Any]) -> None:
    body = {"queryType": "scan", "dataSource": "wikipedia", "intervals": DAY, "columns": ["__time"],
            "order": "ascending"}  # fmt: skip
    resp = httpx.post(f"{cluster['broker'].url}/druid/v2/", json=body, headers={"Accept": ARROW}, timeout=60)
    assert resp.status_code == 501 and "unordered" in resp.json()["errorMessage"]


def test_a_failure_mid_stream_reaches_the_client(cluster: dict[str, Any]) -> None:
    body = {"queryType": "scan", "dataSource": "wikipedia", "intervals": DAY, "context": {"timeout": 1}}
    client = BrokerClient(cluster["broker"].url, 60)
    with pytest.raises(StrataError, match=r"failed a scan: .*timed out"):
        for _ in client.scan_batches(body):
            pass


def test_a_streamed_scan_gathers_within_max_scatter_gather_bytes(cluster: dict[str, Any]) -> None:
    """Druid counts a scan's partials like any query's: past the context's maxScatterGatherBytes the
    stream ends with Druid's capacity error, within it the same scan streams whole."""
    body = {"queryType": "scan", "dataSource": "wikipedia", "intervals": DAY, "columns": ["page"]}
    client = BrokerClient(cluster["broker"].url, 60)
    limited = {**body, "context": {"maxScatterGatherBytes": 100_000}}
    with pytest.raises(StrataError, match=r"max scatter-gather bytes limit reached"):
        for _ in client.scan_batches(limited):
            pass
    whole = pa.Table.from_batches(
        list(client.scan_batches({**body, "context": {"maxScatterGatherBytes": 10**9}}))
    )
    assert whole.num_rows == arrow_scan(cluster["broker"].url, body).num_rows > 0
