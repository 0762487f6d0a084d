"""Readers of `spark.read.format("strata")`: a datasource read by segment, or one SQL / native query.

A table read learns the segments and the data nodes serving them from the broker (Druid's
`candidates` listing) over the query's time window, the option `intervals` narrowed by pushed
`__time` comparisons, and packs them into Spark partitions: by default one per core, as each Spark
task costs tens of milliseconds whatever it reads (or `partitions` of them, or
`segmentsPerPartition` segments each). Each task asks for a native scan of exactly its segments
(`{"type":"segments"}`, Druid's MultipleSpecificSegmentSpec), with the pushed filters and the asked
columns: of each data node holding some of them, one request per node (strata.spark.data_nodes),
or of the broker, read as a streamed Arrow stream; given the metadata store, a task first reads
what it can of that scan from the segments' own files (strata.spark.segment_files). A task makes
its batches in a thread, ahead of Spark's converting them (strata.spark.read_ahead). Readers hold
only plain values: Spark pickles them to its executors.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from strata.spark.broker_client import BrokerClient, StrataError
from strata.spark.data_nodes import BATCH_ROWS, DATA_NODE_TYPES, read_from_nodes
from strata.spark.pushdown import Pushed, push
from strata.spark.read_ahead import DEPTH, read_ahead
from strata.spark.results import conform_batch, native_rows, rows_batch
from strata.spark.segment_files import published_files, read_files, split_by_file
from strata.spark.task_timing import AheadTimes, record, timed_task, timing_enabled
from strata.wire import SEGMENT_LABELS
from timeline import Interval


class SegmentsPartition(InputPartition):
    """Exact segments for one Spark task: Druid descriptors `{"itvl", "ver", "part"}`, and for each
    the URLs of the data nodes serving it (the broker's `locations`, historicals only), its size,
    and its file in deep storage when the task may read it there (strata.spark.segment_files)."""

    def __init__(
        self,
        segments: list[dict[str, Any]],
        servers: list[list[str]] | None = None,
        sizes: list[int] | None = None,
        files: list[str | None] | None = None,
    ) -> None:
        super().__init__(segments)
        self.segments = segments
        self.servers = servers if servers is not None else [[] for _ in segments]
        self.sizes = sizes if sizes is not None else [0 for _ in segments]
        self.files: list[str | None] = files if files is not None else [None for _ in segments]


@dataclass(frozen=True)
class Split:
    """How a table read becomes Spark partitions: `partitions` of them, or `segments` per one."""

    partitions: int = 1
    segments: int | None = None


def pack(sizes: Sequence[int], parts: int) -> list[list[int]]:
    """`min(parts, len(sizes))` contiguous runs of indexes, of about equal total size (each >= 1).

    A run ends at whichever side of its share of the total lies nearer (not only once past it): a
    read's tasks run side by side and it lasts as long as the largest, so 8 equal segments in 2
    tasks go 4 and 4, never 5 and 3 because one file came out a few bytes smaller."""
    parts = min(parts, len(sizes))
    if parts <= 0:
        return []
    weights = [max(1, s) for s in sizes]
    total = sum(weights)
    runs: list[list[int]] = []
    current: list[int] = []
    acc = 0  # the weight of every index placed so far
    for i, w in enumerate(weights):
        after = parts - len(runs) - 1  # runs still to start once `current` ends
        if current and after > 0:
            share = total * (len(runs) + 1)  # where `current` should end, times `parts`
            nearer_without = (acc + w) * parts - share > share - acc * parts
            if nearer_without or len(weights) - i == after:
                runs.append(current)
                current = []
        current.append(i)
        acc += w
    runs.append(current)
    return runs


def node_urls(locations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The historicals of a candidate's `locations`, as query URLs; realtime nodes are left to the
    broker (their segments change while they run)."""
    return [
        f"http://{loc['host']}"
        for loc in locations
        if loc.get("host") and str(loc.get("type", "historical")) in DATA_NODE_TYPES
    ]


class TableReader(DataSourceReader):
    def __init__(
        self,
        client: BrokerClient,
        data_source: str,
        intervals: Sequence[Interval],
        schema: StructType,
        column_types: dict[str, str],
        split: Split,
        context: dict[str, Any],
        data_nodes: bool = True,
        metadata: str | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> None:
        self.client = client
        self.data_source = data_source
        self.intervals = list(intervals)
        self.schema = schema
        self.column_types = column_types
        self.split = split
        self.context = context
        self.data_nodes = data_nodes
        self.metadata = metadata  # the metadata store: segments' files are read from deep storage
        self.batch_rows = batch_rows  # rows per Arrow batch handed to Spark (option batchRows)
        self.pushed = Pushed()

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        return push(filters, self.column_types, self.pushed)

    def window(self) -> list[Interval]:
        """The option intervals narrowed to the pushed `__time` bounds (empty: nothing to read)."""
        out = []
        for interval in self.intervals:
            start = max(interval.start, self.pushed.start_ms)
            end = min(interval.end, self.pushed.end_ms)
            if start < end:
                out.append(Interval(start, end))
        return out

    def partitions(self) -> list[InputPartition]:
        start = time.time()
        planned = self.plan()
        record("plan", start=start, end=time.time(), partitions=len(planned))
        return planned

    def plan(self) -> list[InputPartition]:
        """The read's segments packed into partitions, each segment with its servers and file."""
        descriptors: list[dict[str, Any]] = []
        servers: list[list[str]] = []
        sizes: list[int] = []
        files: list[str | None] = []
        window = self.window()
        published = published_files(self.metadata, self.data_source) if self.metadata and window else {}
        for interval in window:
            for c in self.client.candidates(self.data_source, [str(interval)]):
                clipped = Interval.parse(c["itvl"]).overlap(interval)
                if clipped is not None and not clipped.is_empty:
                    descriptors.append({"itvl": str(clipped), "ver": c["ver"], "part": c["part"]})
                    servers.append(node_urls(c.get("locations") or []))
                    sizes.append(int(c.get("size") or 0))
                    # a file only for what a historical serves: published, no realtime rows
                    key = (str(c["itvl"]), str(c["ver"]), int(c["part"]))
                    files.append(published.get(key) if servers[-1] else None)
        if self.split.segments is not None:
            n = self.split.segments
            runs = [list(range(i, min(i + n, len(descriptors)))) for i in range(0, len(descriptors), n)]
        else:  # segments of one node side by side: a task then asks few nodes
            order = sorted(range(len(descriptors)), key=lambda i: (servers[i][:1], i))
            runs = [[order[j] for j in run] for run in pack([sizes[i] for i in order], self.split.partitions)]
        return [
            SegmentsPartition(
                [descriptors[i] for i in run],
                [servers[i] for i in run],
                [sizes[i] for i in run],
                [files[i] for i in run],
            )
            for run in map(sorted, runs)
        ]

    def scan_query(self, segments: list[dict[str, Any]]) -> dict[str, Any]:
        query: dict[str, Any] = {
            "queryType": "scan",
            "dataSource": self.data_source,
            "intervals": {"type": "segments", "segments": segments},
            "columns": self.schema.fieldNames(),
            "context": {**self.context, SEGMENT_LABELS: False},  # rows need no segment id each
        }
        druid_filter = self.pushed.druid_filter()
        if druid_filter is not None:
            query["filter"] = druid_filter
        return query

    def raw_batches(self, partition: SegmentsPartition) -> Iterator[pa.RecordBatch]:
        """The partition's rows as its sources give them, before `conform_batch`: the segment files
        it may read, then the data nodes (or the broker) for the others."""
        rest = list(range(len(partition.segments)))
        if any(partition.files):
            scan = self.scan_query(partition.segments)
            direct, rest = split_by_file(scan, partition.segments, partition.files)
            yield from read_files(direct, self.batch_rows)
        if not rest:
            return
        segments = [partition.segments[i] for i in rest]
        servers = [partition.servers[i] for i in rest]
        if self.data_nodes and any(servers):
            sizes = [partition.sizes[i] for i in rest]
            yield from read_from_nodes(self.client, segments, servers, sizes, self.scan_query)
        else:
            yield from self.client.scan_batches(self.scan_query(segments))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentsPartition) or not partition.segments:
            return  # no segment in the window: Spark's single empty partition
        # as many rows made ahead whatever the batch size: smaller batches, more of them
        ahead = max(DEPTH, DEPTH * BATCH_ROWS // self.batch_rows)
        if not timing_enabled():
            yield from read_ahead(self.conformed_batches(partition), ahead)
            return
        times = AheadTimes()
        batches = read_ahead(self.conformed_batches(partition), ahead, times)
        files = sum(f is not None for f in partition.files)
        yield from timed_task(batches, times, segments=len(partition.segments), files=files)

    def conformed_batches(self, partition: SegmentsPartition) -> Iterator[pa.RecordBatch]:
        """The partition's rows in Spark's exact Arrow schema (`conform_batch`)."""
        target = to_arrow_schema(self.schema, timezone="UTC")
        for batch in self.raw_batches(partition):
            if batch.num_rows:
                conformed = conform_batch(batch, target)
                for start in range(0, batch.num_rows, self.batch_rows):
                    yield conformed.slice(start, self.batch_rows)


class SqlReader(DataSourceReader):
    """One Druid SQL statement, run whole on the broker (aggregations stay there)."""

    def __init__(self, client: BrokerClient, sql: str, schema: StructType, context: dict[str, Any]) -> None:
        self.client = client
        self.sql = sql
        self.schema = schema
        self.context = context

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        result = self.client.sql(self.sql, self.context)
        yield rows_batch(self.schema, result.names, result.rows)


class NativeReader(DataSourceReader):
    """One native JSON query, run whole on the broker; its answer flattened to rows."""

    def __init__(self, client: BrokerClient, query: dict[str, Any], schema: StructType) -> None:
        self.client = client
        self.query = query
        self.schema = schema

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        names, rows = native_rows(self.query, self.client.native(self.query))
        yield rows_batch(self.schema, names, rows)


def parse_native(text: str) -> dict[str, Any]:
    try:
        query = json.loads(text)
    except ValueError as e:
        raise StrataError(f"option query is not valid JSON: {e}") from None
    if not isinstance(query, dict) or "queryType" not in query:
        raise StrataError("option query must be a native Druid query object with a queryType")
    return query
