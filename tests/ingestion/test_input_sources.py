"""Input sources beyond local files: `http` (a real HTTP server on loopback), `druid` (a data
source's visible segments, as reindexing reads them) and their refusals; `s3` is tested beside the
other S3 tests (tests/deep_storage/test_s3_input_source.py), where the S3 server lives."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.ingestion import IngestionError, SpecError, ingest, parse_spec
from strata.storage import open_metadata_store
from tests.ingestion.conftest import inline_spec

ROWS: list[dict[str, Any]] = [
    {"ts": f"2020-01-0{d}T{h:02d}:00:00Z", "k": f"k{h % 3}", "n": d * 100 + h}
    for d in (1, 2)
    for h in range(24)
]


def _rows(summary: Any) -> pa.Table:
    return pa.concat_tables(pq.read_table(w.segment.load_spec["path"]) for w in summary.segments)


def _spec(source: dict[str, Any], ds: str = "t", granularity: str = "day", **schema: Any) -> dict[str, Any]:
    spec = inline_spec("", dimensionsSpec={"dimensions": ["k", {"name": "n", "type": "long"}]},
                       granularitySpec={"segmentGranularity": granularity, "queryGranularity": "none",
                                        "rollup": False}, **schema)  # fmt: skip
    spec["dataSchema"]["dataSource"] = ds
    spec["ioConfig"]["inputSource"] = source
    return spec


@pytest.fixture
def http_files(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A threaded HTTP server on loopback serving `rows.json.gz` (gzip) and `rows.json`, asking for
    Basic credentials `u:p`; yields its URL and the Authorization headers it saw."""
    body = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    files = {"/rows.json.gz": gzip.compress(body), "/rows.json": body}
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            data = files.get(self.path)
            self.send_response(200 if data is not None else 404)
            self.end_headers()
            self.wfile.write(data or b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_http_source_reads_plain_and_gzip_files_with_credentials(http_files, stores):
    url, seen = http_files
    source = {"type": "http", "uris": [f"{url}/rows.json.gz", f"{url}/rows.json"],
              "httpAuthenticationUsername": "u", "httpAuthenticationPassword": {"type": "default", "password": "p"}}  # fmt: skip
    got = _rows(ingest(_spec(source), **stores))
    assert sorted(got.column("n").to_pylist()) == sorted([r["n"] for r in ROWS] * 2)
    assert seen == ["Basic dTpw"] * 2  # base64("u:p")
    missing = {"type": "http", "uris": [f"{url}/nope.json"]}
    with pytest.raises(IngestionError, match="HTTP 404"):
        ingest(_spec(missing), **stores)


def test_druid_source_reads_what_a_query_would_see(stores, tmp_path):
    """Day segments, then one hour of day 1 overwritten by a newer version: reading the data source
    back gives the newer hour and the rest of the older day, nothing twice."""
    data = "".join(json.dumps(r) + "\n" for r in ROWS)
    ingest(_spec({"type": "inline", "data": data}, "src"), **stores)
    newer = [{"ts": "2020-01-01T05:30:00Z", "k": "new", "n": -1}]
    hour = _spec({"type": "inline", "data": "".join(json.dumps(r) + "\n" for r in newer)}, "src", "hour")
    ingest(hour, **stores)
    expected = [r for r in ROWS if not r["ts"].startswith("2020-01-01T05")] + newer
    copy = _spec({"type": "druid", "dataSource": "src", "interval": "2020-01-01/2020-01-03"}, "dst",
                 timestampSpec={"column": "__time", "format": "millis"})  # fmt: skip
    got = _rows(ingest(copy, **stores)).to_pydict()
    assert sorted(zip(got["k"], got["n"], strict=True)) == sorted((r["k"], r["n"]) for r in expected)
    narrow = _spec({"type": "druid", "dataSource": "src", "interval": "2020-01-02T10/2020-01-02T12"}, "dst2",
                   timestampSpec={"column": "__time", "format": "millis"})  # fmt: skip
    assert sorted(_rows(ingest(narrow, **stores)).column("n").to_pylist()) == [210, 211]
    with closing(open_metadata_store(stores["metadata"])) as meta:
        assert {s.data_source for s in meta.used_segments()} == {"src", "dst", "dst2"}


@pytest.mark.parametrize(("source", "message"), [
    ({"type": "http", "uris": ["ftp://x/y"]}, "not an http"),
    ({"type": "http"}, "needs 'uris'"),
    ({"type": "s3", "uris": ["http://x/y"]}, "not an s3://"),
    ({"type": "s3", "objects": [{"bucket": "b"}]}, "'bucket' and 'path'"),
    ({"type": "druid", "dataSource": "x"}, "interval"),
    ({"type": "druid", "dataSource": "x", "interval": "2020/2021", "filter": {"type": "true"}}, "filter"),
])  # fmt: skip
def test_bad_sources_are_refused(source, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(_spec(source))
