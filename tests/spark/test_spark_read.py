"""`spark.read.format("strata")` against a real cluster (ZooKeeper, two historicals, a broker).

The wikipedia sample is served as 24 hourly segments. Every expected answer comes from Spark
reading the raw JSON itself, or from the broker's own HTTP APIs for the `sql`/`query` options.
"""

# ruff: noqa: F811 - pytest fixtures imported from another module are parameters here

from __future__ import annotations

import functools
import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from strata.spark.reader import SegmentsPartition
from strata.spark.results import table_schema
from strata.spark.source import StrataDataSource
from strata.storage import open_metadata_store
from strata.storage.deep_storage import SEGMENT_FILE, LocalDeepStorage
from strata.storage.segment_file import write_segment_file
from tests.cluster.cluster_kit import raw, wait_until
from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from timeline import DataSegment, Interval, ShardSpec

pytestmark = pytest.mark.integration

SEGMENTS = 24


def url(cluster: dict[str, Any]) -> str:
    return str(cluster["broker"].url)


def strata(spark: SparkSession, cluster: dict[str, Any], **options: Any) -> DataFrame:
    reader = spark.read.format("strata").option("broker", url(cluster))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


@pytest.fixture(scope="module")
def raw_df(spark: SparkSession, wikipedia_sample: Path) -> DataFrame:
    """Spark's own reading of the raw JSON: the oracle."""
    df = spark.read.json(str(wikipedia_sample))
    return df.withColumn("__time", F.to_timestamp("time")).drop("time").cache()


def metric(cluster: dict[str, Any], name: str) -> float:
    text = httpx.get(f"{url(cluster)}/metrics", timeout=10).text
    m = re.search(rf"^{name}(?:_total)? ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def per_channel(df: DataFrame) -> dict[str, tuple[int, int, int]]:
    rows = df.groupBy("channel").agg(F.count("*"), F.sum("added"), F.sum("deleted")).collect()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def millis(df: DataFrame) -> list[int]:
    return sorted(r[0] for r in df.select(F.unix_millis("__time")).collect())


def test_table_read_equals_the_raw_json(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    df = strata(spark, cluster, datasource="wikipedia")
    assert df.schema["__time"].dataType == TimestampType()
    # Druid's __time is never null (Spark then reads it without a null check); every other column may be
    assert [f.name for f in df.schema.fields if not f.nullable] == ["__time"]
    assert df.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism  # one per core
    assert df.count() == raw_df.count()
    assert per_channel(df) == per_channel(raw_df)
    assert millis(df) == millis(raw_df)  # exact to the millisecond, not 1000x off
    first = df.orderBy("__time").select(F.date_format("__time", "yyyy-MM-dd'T'HH:mm:ss.SSS")).first()
    assert first is not None and first[0] == "2015-09-12T00:46:58.771"


def test_segments_per_partition_and_columns(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    df = strata(spark, cluster, datasource="wikipedia", segmentsPerPartition=5, columns="__time,page,added")
    assert df.columns == ["__time", "page", "added"]
    assert df.rdd.getNumPartitions() == 5  # ceil(24 / 5)
    got = df.agg(F.count("*"), F.sum("added"), F.countDistinct("page")).first()
    want = raw_df.agg(F.count("*"), F.sum("added"), F.countDistinct("page")).first()
    assert got is not None and want is not None and tuple(got) == tuple(want)


def node_metrics(cluster: dict[str, Any]) -> tuple[float, float]:
    """Summed over the historicals: scan requests answered, and segments scanned (any query)."""
    requests = segments = 0.0
    for node in cluster["historicals"]:
        text = httpx.get(f"{node.url}/metrics", timeout=10).text
        m = re.search(r'^strata_historical_queries_total\{ok="true",type="scan"\} ([0-9.e+]+)$', text, re.M)
        requests += float(m.group(1)) if m else 0.0
        m = re.search(r"^druid_query_segment_time_count ([0-9.e+]+)$", text, re.M)
        segments += float(m.group(1)) if m else 0.0
    return requests, segments


def node_metrics_since(cluster: dict[str, Any], before: tuple[float, float]) -> tuple[float, float]:
    now = node_metrics(cluster)
    return now[0] - before[0], now[1] - before[1]


def published(cluster: dict[str, Any]) -> list[tuple[str, str, int]]:
    """The metadata store's used segments of wikipedia: what a full read must cover, once each."""
    store = open_metadata_store(cluster["root"] / "meta.db")
    try:
        used = store.used_segments("wikipedia")
    finally:
        store.close()
    return sorted((str(s.interval), s.version, s.shard_spec.partition_num) for s in used)


def planned(cluster: dict[str, Any], **options: str) -> list[SegmentsPartition]:
    """The partitions a table read plans, built in this process as Spark's planner builds them."""
    source = StrataDataSource({"broker": url(cluster), "datasource": "wikipedia", **options})
    parts = source.reader(source.schema()).partitions()
    assert all(isinstance(p, SegmentsPartition) for p in parts)
    return [p for p in parts if isinstance(p, SegmentsPartition)]


def test_partitions_pack_every_segment_once(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    want = published(cluster)
    assert len(want) == SEGMENTS
    for options, count in (({}, StrataDataSource.default_partitions), ({"partitions": "5"}, 5),
                           ({"partitions": "100"}, SEGMENTS), ({"segmentsPerPartition": "7"}, 4)):  # fmt: skip
        parts = planned(cluster, **options)
        assert len(parts) == count, options
        got = sorted((d["itvl"], d["ver"], d["part"]) for p in parts for d in p.segments)
        assert got == want, options  # every segment in exactly one partition
    df = strata(spark, cluster, datasource="wikipedia", partitions=5)
    assert df.rdd.getNumPartitions() == 5
    assert strata(spark, cluster, datasource="wikipedia").rdd.getNumPartitions() == 2  # local[2]
    before = node_metrics(cluster)
    assert per_channel(df) == per_channel(raw_df)
    requests, segments = node_metrics_since(cluster, before)
    assert segments == SEGMENTS  # the historicals scanned each segment once
    assert requests <= 5 * len(cluster["historicals"])  # at most one request per node per task


def test_tasks_read_from_the_data_nodes(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    df = strata(spark, cluster, datasource="wikipedia")
    broker_before = metric(cluster, "strata_broker_streamed_segments")
    before = node_metrics(cluster)
    assert per_channel(df) == per_channel(raw_df)
    assert millis(df) == millis(raw_df)
    requests, segments = node_metrics_since(cluster, before)
    assert metric(cluster, "strata_broker_streamed_segments") == broker_before  # no scan via the broker
    assert segments == 2 * SEGMENTS  # two reads, every segment scanned once by its historical each time
    assert 2 <= requests <= 2 * 2 * len(cluster["historicals"])  # one per node per task, two reads


def free_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def settled_plan(cluster: dict[str, Any], timeout: float = 60.0) -> SegmentsPartition:
    """One partition's plan once the historicals stopped moving segments between them: the cases
    below say which node serves what, and a segment loaded by the other node meanwhile (replicas
    balancing as nodes join) would change how many the broker must answer."""
    deadline = time.monotonic() + timeout
    previous: list[list[str]] | None = None
    while True:
        (part,) = planned(cluster, partitions="1", columns="__time,channel,added")
        servers = [sorted(s) for s in part.servers]
        if servers == previous and all(len(s) == 1 for s in servers):
            return part
        assert time.monotonic() < deadline, f"segments still moving between nodes: {servers}"
        previous = servers
        time.sleep(2.0)


def missed_by(node: str, segments: list[dict[str, Any]]) -> int:
    """How many of `segments` the data node at `node` reports missing when asked for them."""
    body = {"queryType": "scan", "dataSource": "wikipedia", "columns": ["__time"],
            "intervals": {"type": "segments", "segments": segments}}  # fmt: skip
    response = httpx.post(f"{node}/druid/v2/", json=body, timeout=10)
    context = json.loads(response.headers.get("X-Druid-Response-Context") or "{}")
    return len(context.get("missingSegments", []))


def test_a_failing_data_node_falls_back_to_the_broker(
    cluster: dict[str, Any], wikipedia_sample: Path
) -> None:
    part = settled_plan(cluster)
    source = StrataDataSource({"broker": url(cluster), "datasource": "wikipedia"})
    reader = source.reader(
        table_schema(source._column_types(source._client()), ["__time", "channel", "added"])
    )
    want = {
        (c, n, a)
        for c, n, a in raw("SELECT channel, count(*), sum(added) FROM RAW GROUP BY 1", wikipedia_sample)
    }
    nodes = [str(h.url) for h in cluster["historicals"]]
    dead = free_url()
    assert all(servers and servers[0] in nodes for servers in part.servers)
    unserved = [s for s in part.servers if set(nodes) - set(s)]  # held by one node only
    assert unserved  # (a segment may be on both for a while, as the nodes balance)
    for node in nodes:  # a node keeps answering segments it handed over until --drop-delay ends
        others = [seg for seg, s in zip(part.segments, part.servers, strict=True) if node not in s]
        ready = functools.partial(lambda n, segs: missed_by(n, segs) == len(segs), node, others)
        wait_until(ready, f"{node} to drop what it handed over")
    cases = {  # the servers each segment is said to be on -> segments the broker must answer
        "a node stopped": ([[dead] if i % 2 else s for i, s in enumerate(part.servers)], SEGMENTS // 2),
        "a node that does not serve them": (
            [[n for n in nodes if n not in s][:1] or s for s in part.servers],
            len(unserved),
        ),
        "every node down": ([[dead] for _ in part.servers], SEGMENTS),
        "all well": (part.servers, 0),
    }
    for name, (servers, via_broker) in cases.items():
        before = metric(cluster, "strata_broker_streamed_segments")
        batches = list(reader.read(SegmentsPartition(part.segments, servers, part.sizes)))
        table = (
            pa.Table.from_batches(batches)
            .group_by("channel")
            .aggregate([("added", "count"), ("added", "sum")])
        )
        got = set(
            zip(*(table.column(c).to_pylist() for c in ("channel", "added_count", "added_sum")), strict=True)
        )
        assert got == want, name
        assert metric(cluster, "strata_broker_streamed_segments") - before == via_broker, name


def test_filters_are_pushed_to_the_broker(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    def where(df: DataFrame) -> DataFrame:
        return df.where(
            (F.col("channel") == "#en.wikipedia")
            & (F.col("added") > 50)
            & (F.col("deleted") <= 10)
            & F.col("page").startswith("User")
            & ~F.col("namespace").isin("User talk", "Talk")
            & F.col("cityName").isNull()
            & ~F.col("comment").contains("bot")
        )

    df = where(strata(spark, cluster, datasource="wikipedia", dataNodes="false"))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert not re.search(r"\bFilter\b", plan), plan  # every conjunct went to the broker: no Filter node
    before = metric(cluster, "strata_broker_streamed_rows")
    got = sorted(tuple(r) for r in df.select("page", "user", "added", F.unix_millis("__time")).collect())
    streamed = metric(cluster, "strata_broker_streamed_rows") - before
    want = sorted(
        tuple(r) for r in where(raw_df).select("page", "user", "added", F.unix_millis("__time")).collect()
    )
    assert got == want and len(want) > 0
    assert streamed == len(want)  # the broker filtered: it sent exactly the matching rows


def test_filters_spark_cannot_push_stay_in_spark(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    def where(df: DataFrame) -> DataFrame:  # OR and a function are never offered to the source
        return df.where(((F.col("added") > 1000) | (F.col("deleted") > 1000)) & (F.length("page") < 12))

    df = where(strata(spark, cluster, datasource="wikipedia"))
    assert re.search(r"\bFilter\b", df._jdf.queryExecution().executedPlan().toString())  # Spark filters
    got = df.count()
    assert got == where(raw_df).count() and got > 0


def test_null_safe_and_negations_match_spark(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    cases = [
        F.col("countryName").eqNullSafe("Italy"),
        ~F.col("countryName").eqNullSafe("Italy"),
        F.col("countryName").eqNullSafe(F.lit(None)),
        ~(F.col("countryName") == "Italy"),
        F.col("regionIsoCode").isNotNull() & (F.col("delta") < 0),
        F.col("countryName").isin("Italy", "France"),
        F.col("page").endswith("ia"),
    ]
    df = strata(spark, cluster, datasource="wikipedia")
    for cond in cases:
        assert df.where(cond).count() == raw_df.where(cond).count(), str(cond)


def test_time_range_asks_only_its_segments(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    def window(df: DataFrame) -> DataFrame:
        return df.where(
            (F.col("__time") >= F.lit("2015-09-12 05:00:00").cast("timestamp"))
            & (F.col("__time") < F.lit("2015-09-12 07:30:00").cast("timestamp"))
        )

    df = window(strata(spark, cluster, datasource="wikipedia", segmentsPerPartition=1, dataNodes="false"))
    assert df.rdd.getNumPartitions() == 3  # hours 05, 06, 07
    before = metric(cluster, "strata_broker_streamed_segments")
    assert millis(df) == millis(window(raw_df))
    assert metric(cluster, "strata_broker_streamed_segments") - before == 3
    as_sql = strata(spark, cluster, datasource="wikipedia", segmentsPerPartition=1).where(
        "__time >= '2015-09-12 05:00:00' AND __time < '2015-09-12 07:30:00'"
    )
    assert as_sql.rdd.getNumPartitions() == 3  # string literals are cast to timestamps, then pushed


def test_intervals_option(spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame) -> None:
    df = strata(spark, cluster, datasource="wikipedia", intervals="2015-09-12T10:00Z/2015-09-12T12:00Z")
    want = raw_df.where(F.hour("__time").isin(10, 11))
    assert df.rdd.getNumPartitions() == 2
    assert millis(df) == millis(want)


def sql_api(cluster: dict[str, Any], sql: str) -> list[dict[str, Any]]:
    resp = httpx.post(f"{url(cluster)}/druid/v2/sql", json={"query": sql}, timeout=60)
    assert resp.status_code == 200, resp.text
    return list(resp.json())


def test_sql_option_equals_the_sql_api(spark: SparkSession, cluster: dict[str, Any]) -> None:
    sql = "SELECT channel, COUNT(*) AS edits, SUM(added) AS added FROM wikipedia GROUP BY channel"
    df = strata(spark, cluster, sql=sql)
    assert df.columns == ["channel", "edits", "added"]
    assert sorted(tuple(r) for r in df.collect()) == sorted(
        (r["channel"], r["edits"], r["added"]) for r in sql_api(cluster, sql)
    )
    hourly = "SELECT TIME_FLOOR(__time, 'PT1H') AS hour, COUNT(*) AS n FROM wikipedia GROUP BY 1"
    df = strata(spark, cluster, sql=hourly)
    assert df.schema["hour"].dataType == TimestampType()
    got = sorted(
        (r[0], r[1]) for r in df.select(F.date_format("hour", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), "n").collect()
    )
    assert got == sorted((r["hour"], r["n"]) for r in sql_api(cluster, hourly))


def native_api(cluster: dict[str, Any], query: dict[str, Any]) -> list[Any]:
    resp = httpx.post(f"{url(cluster)}/druid/v2/", json=query, timeout=60)
    assert resp.status_code == 200, resp.text
    return list(resp.json())


def test_query_option_equals_the_native_api(spark: SparkSession, cluster: dict[str, Any]) -> None:
    base = {"dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"]}
    topn = {**base, "queryType": "topN", "granularity": "all", "dimension": "page", "metric": "edits",
            "threshold": 5, "aggregations": [{"type": "count", "name": "edits"}]}  # fmt: skip
    df = strata(spark, cluster, query=json.dumps(topn))
    want = [(e["page"], e["edits"]) for r in native_api(cluster, topn) for e in r["result"]]
    assert [(r["page"], r["edits"]) for r in df.orderBy(F.desc("edits"), "page").collect()] == sorted(
        want, key=lambda x: (-x[1], x[0])
    )
    series = {**base, "queryType": "timeseries", "granularity": "hour",
              "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}  # fmt: skip
    df = strata(spark, cluster, query=json.dumps(series))
    assert df.schema["timestamp"].dataType == TimestampType()
    got = sorted(
        (r[0], r[1])
        for r in df.select(F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), "added").collect()
    )
    assert got == sorted((r["timestamp"], r["result"]["added"]) for r in native_api(cluster, series))


def one_line_error(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """Spark's message is the worker's one line (plus Spark's SQLSTATE), no traceback, no Java stack."""
    text = str(excinfo.value)
    assert "Traceback" not in text and "at org.apache" not in text, text[:2000]
    assert len(text.strip().splitlines()) <= 2, text[:2000]
    return text


def test_unreachable_broker(spark: SparkSession) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Exception) as excinfo:
        spark.read.format("strata").option("broker", f"http://127.0.0.1:{port}").option(
            "datasource", "x"
        ).load()
    text = one_line_error(excinfo)
    assert f"StrataError: cannot reach the Strata broker at http://127.0.0.1:{port}" in text


def test_unknown_datasource(spark: SparkSession, cluster: dict[str, Any]) -> None:
    with pytest.raises(Exception) as excinfo:
        strata(spark, cluster, datasource="nope")
    assert "StrataError: unknown datasource 'nope'" in one_line_error(excinfo)


def test_invalid_sql_and_query(spark: SparkSession, cluster: dict[str, Any]) -> None:
    with pytest.raises(Exception) as excinfo:
        strata(spark, cluster, sql="SELEC channel FROM wikipedia")
    assert re.search(r"StrataError: .*HTTP 400\): INVALID_INPUT", one_line_error(excinfo))
    with pytest.raises(Exception) as excinfo:
        strata(spark, cluster, query=json.dumps({"queryType": "topN", "dataSource": "wikipedia"}))
    assert re.search(r"StrataError: .*HTTP 400\)", one_line_error(excinfo))


WIDE_ROWS = 200_000
PAYLOAD = 1000  # bytes of text per row: about 200 MB in one segment, one Spark partition


def publish_wide_segment(root: Path) -> Interval:
    """One hourly segment of wide rows, written into the cluster's deep storage and published."""
    start = 1_577_836_800_000  # 2020-01-01T00:00:00Z
    interval = Interval(start, start + 3_600_000)
    n = pa.array(range(WIDE_ROWS), pa.int64())
    payload = pc.binary_join_element_wise(pc.cast(n, pa.string()), pa.scalar("x" * PAYLOAD), "")
    table = pa.table({"__time": pc.add(n, start).cast(pa.timestamp("ms", tz="UTC")),
                      "payload": pc.utf8_slice_codeunits(payload, 0, PAYLOAD), "n": n})  # fmt: skip
    deep = LocalDeepStorage(root / "deep")
    staging = deep.staging_dir()
    facts = {"dataSource": "wide", "interval": str(interval), "version": "v1", "partitionNum": 0,
             "dimensions": [{"name": "payload", "type": "string"}], "metrics": [{"type": "longSum", "name": "n", "fieldName": "n"}],
             "queryGranularity": {"type": "none"}, "rollup": False, "numRows": WIDE_ROWS}  # fmt: skip
    write_segment_file(table, staging / SEGMENT_FILE, facts)
    segment = DataSegment("wide", interval, "v1", dimensions=("payload",), metrics=("n",),
                          shard_spec=ShardSpec.numbered(0, 1))  # fmt: skip
    store = open_metadata_store(root / "meta.db")
    try:
        store.publish([deep.push(staging, segment)], overwrite=False)
    finally:
        store.close()
    return interval


def test_a_partition_of_hundreds_of_megabytes(spark: SparkSession, cluster: dict[str, Any]) -> None:
    publish_wide_segment(cluster["root"])
    wait_until(lambda: "wide" in httpx.get(f"{url(cluster)}/druid/v2/datasources", timeout=10).json(),
               "the broker to see the wide segment", 60, [cluster["broker"]])  # fmt: skip
    df = strata(spark, cluster, datasource="wide", dataNodes="false")
    assert df.rdd.getNumPartitions() == 1
    before = metric(cluster, "strata_broker_streamed_bytes")
    got = df.agg(F.count("*"), F.sum("n"), F.sum(F.length("payload")), F.countDistinct("payload")).first()
    streamed = metric(cluster, "strata_broker_streamed_bytes") - before
    assert got is not None
    assert tuple(got) == (WIDE_ROWS, WIDE_ROWS * (WIDE_ROWS - 1) // 2, WIDE_ROWS * PAYLOAD, WIDE_ROWS)
    assert streamed > WIDE_ROWS * PAYLOAD  # one response of about 200 MB, streamed in batches
