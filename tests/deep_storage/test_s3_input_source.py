"""The `s3` input source against a real S3 server (moto): objects by URI, by prefix and as
`objects`, gzip and Parquet, with the endpoint ingestion is given (`--s3-endpoint`)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.s3_server import S3Server
from strata.ingestion import IngestionError, ingest

pytestmark = pytest.mark.timeout(120)

ROWS: list[dict[str, Any]] = [
    {"ts": f"2020-01-01T{h:02d}:00:00Z", "k": f"k{h % 4}", "n": h} for h in range(24)
]


def _put(server: S3Server, key: str, data: bytes) -> None:
    with server.filesystem().open_output_stream(key) as f:
        f.write(data)


def _spec(source: dict[str, Any], fmt: str = "json") -> dict[str, Any]:
    return {
        "dataSchema": {
            "dataSource": "s3rows",
            "timestampSpec": {"column": "ts", "format": "auto"},
            "dimensionsSpec": {"dimensions": ["k", {"name": "n", "type": "long"}]},
            "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
        },
        "ioConfig": {"inputSource": source, "inputFormat": {"type": fmt}},
    }


def test_s3_source_reads_uris_prefixes_and_objects(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    lines = [json.dumps(r) + "\n" for r in ROWS]
    _put(s3_server, f"{s3_bucket}/in/a.json", "".join(lines[:10]).encode())
    _put(s3_server, f"{s3_bucket}/in/b.json.gz", gzip.compress("".join(lines[10:]).encode()))
    table = pa.table(
        {"ts": [r["ts"] for r in ROWS], "k": [r["k"] for r in ROWS], "n": [r["n"] for r in ROWS]}
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    _put(s3_server, f"{s3_bucket}/pq/rows.parquet", buf.getvalue())
    deep, meta, endpoint = tmp_path / "deep", tmp_path / "meta.db", s3_server.endpoint
    expected = sorted(int(r["n"]) for r in ROWS)
    for source, fmt in (
        ({"type": "s3", "prefixes": [f"s3://{s3_bucket}/in/"]}, "json"),
        ({"type": "s3", "uris": [f"s3://{s3_bucket}/in/a.json", f"s3://{s3_bucket}/in/b.json.gz"]}, "json"),
        ({"type": "s3", "objects": [{"bucket": s3_bucket, "path": "pq/rows.parquet"}]}, "parquet"),
    ):
        summary = ingest(_spec(source, fmt), deep_storage=deep, metadata=meta, s3_endpoint=endpoint)
        got = pa.concat_tables(pq.read_table(w.segment.load_spec["path"]) for w in summary.segments)
        assert sorted(got.column("n").to_pylist()) == expected, source
    with pytest.raises(IngestionError, match="no objects under"):
        ingest(_spec({"type": "s3", "prefixes": [f"s3://{s3_bucket}/none/"]}), deep_storage=deep, metadata=meta,
               s3_endpoint=endpoint)  # fmt: skip
