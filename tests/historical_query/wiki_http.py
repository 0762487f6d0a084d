"""The wikipedia sample served by an in-process historical query app, and a DuckDB oracle over the raw rows.

The segments are ingested with HOUR segment granularity so every query merges many partials. The
oracle reads the gz sample itself with plain SQL (table `raw`), typed as the tutorial spec ingests it:
booleans and metroCode as strings, `ms` the event time in epoch milliseconds, `t` a UTC timestamp.
"""

from __future__ import annotations

import asyncio
import functools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import httpx
import orjson
import pyarrow as pa
from starlette.applications import Starlette

from strata.data_node.query_api import QueryEndpoint
from strata.data_node.served import ServedSegments
from strata.ingestion.api import ingest
from strata.storage import open_metadata_store

RAW_SELECT = """
SELECT
    epoch_ms(time::TIMESTAMP) AS ms, time::TIMESTAMP AS t,
    channel, cityName, comment, countryIsoCode, countryName,
    isAnonymous::VARCHAR AS isAnonymous, isMinor::VARCHAR AS isMinor, isNew::VARCHAR AS isNew,
    isRobot::VARCHAR AS isRobot, isUnpatrolled::VARCHAR AS isUnpatrolled,
    metroCode::VARCHAR AS metroCode, namespace, page, regionIsoCode, regionName, "user",
    delta::BIGINT AS delta, added::BIGINT AS added, deleted::BIGINT AS deleted
FROM read_json('{sample}', format='newline_delimited', columns={{
    time: 'VARCHAR', channel: 'VARCHAR', cityName: 'VARCHAR', comment: 'VARCHAR',
    countryIsoCode: 'VARCHAR', countryName: 'VARCHAR', isAnonymous: 'BOOLEAN', isMinor: 'BOOLEAN',
    isNew: 'BOOLEAN', isRobot: 'BOOLEAN', isUnpatrolled: 'BOOLEAN', metroCode: 'BIGINT',
    namespace: 'VARCHAR', page: 'VARCHAR', regionIsoCode: 'VARCHAR', regionName: 'VARCHAR',
    "user": 'VARCHAR', delta: 'BIGINT', added: 'BIGINT', deleted: 'BIGINT'}})
"""


@functools.cache
def _raw_arrow(sample: Path) -> pa.Table:
    """The sample's rows as RAW_SELECT types them, parsed from the gz JSON once per process (a view
    over `read_json` parsed the whole file again for every oracle query, 20x the query's cost)."""
    with duckdb.connect() as conn:
        conn.execute("SET TimeZone='UTC'")
        return conn.execute(RAW_SELECT.format(sample=sample)).to_arrow_table()


def create_raw(conn: duckdb.DuckDBPyConnection, sample: Path, name: str = "raw") -> None:
    """Table `name` in `conn`: the raw sample rows (RAW_SELECT), a copy of this process's one parse."""
    conn.register("raw_sample_rows", _raw_arrow(sample))
    try:
        conn.execute(f"CREATE TABLE {name} AS SELECT * FROM raw_sample_rows")
    finally:
        conn.unregister("raw_sample_rows")


def ingest_hourly(root: Path, sample: Path, index_spec: Path) -> ServedSegments:
    """Ingest the sample into HOUR segments under `root` and serve every used segment."""
    spec = json.loads(index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(sample.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")
    data_source = spec["spec"]["dataSchema"]["dataSource"]
    store = open_metadata_store(str(root / "meta.db"))
    try:
        served = ServedSegments()
        for seg in store.used_segments(data_source):
            served.add(seg, seg.load_spec["path"])
    finally:
        store.close()
    return served


def query_app(served: ServedSegments) -> Starlette:
    return Starlette(routes=QueryEndpoint(served, "test-host:8083").routes())


def post(app: Starlette, body: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post("/druid/v2/", content=orjson.dumps(body))

    return asyncio.run(go())


def druid_json(app: Starlette, body: Any) -> Any:
    """POST a native query and return its JSON, failing with the error body on a non-200."""
    resp = post(app, body)
    assert resp.status_code == 200, resp.text
    return resp.json()


class RawRows:
    """SQL over the raw sample rows; independent of the engine under test."""

    def __init__(self, sample: Path):
        self.conn = duckdb.connect()
        self.conn.execute("SET TimeZone='UTC'")
        create_raw(self.conn, sample)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql).fetchall()

    def one(self, sql: str) -> tuple[Any, ...]:
        (row,) = self.rows(sql)
        return row

    def scalar(self, sql: str) -> Any:
        return self.one(sql)[0]


def iso_utc(ms: int) -> str:
    """Druid's UTC instant: 2015-09-12T00:46:58.771Z."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def iso_zoned(ms: int, zone: str) -> str:
    """Druid's zoned instant: 2015-09-11T17:00:00.000-07:00."""
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).isoformat(timespec="milliseconds")
