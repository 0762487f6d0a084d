"""Readers of `spark.read.format("strata")`: a datasource read by segment, or one SQL / native query.

A table read learns the segments from the broker (Druid's `candidates` listing) over the query's
time window, the option `intervals` narrowed by pushed `__time` comparisons, and groups them,
`segmentsPerPartition` at a time, into Spark partitions. Each task then asks the broker for a
native scan of exactly its segments (`{"type":"segments"}`, Druid's MultipleSpecificSegmentSpec),
with the pushed filters and the asked columns, and reads the answer as a streamed Arrow stream,
batch by batch. Readers hold only plain values: Spark pickles them to its executors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from strata_spark.broker_client import BrokerClient, StrataError
from strata_spark.pushdown import Pushed, push
from strata_spark.results import conform_batch, native_rows, rows_batch
from timeline import Interval


class SegmentsPartition(InputPartition):
    """Exact segments for one Spark task: Druid descriptors `{"itvl", "ver", "part"}`."""

    def __init__(self, segments: list[dict[str, Any]]) -> None:
        super().__init__(segments)
        self.segments = segments


class TableReader(DataSourceReader):
    def __init__(
        self,
        client: BrokerClient,
        data_source: str,
        intervals: Sequence[Interval],
        schema: StructType,
        column_types: dict[str, str],
        segments_per_partition: int,
        context: dict[str, Any],
    ) -> None:
        self.client = client
        self.data_source = data_source
        self.intervals = list(intervals)
        self.schema = schema
        self.column_types = column_types
        self.segments_per_partition = segments_per_partition
        self.context = context
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
        descriptors: list[dict[str, Any]] = []
        for interval in self.window():
            for c in self.client.candidates(self.data_source, [str(interval)]):
                clipped = Interval.parse(c["itvl"]).overlap(interval)
                if clipped is not None and not clipped.is_empty:
                    descriptors.append({"itvl": str(clipped), "ver": c["ver"], "part": c["part"]})
        n = self.segments_per_partition
        return [SegmentsPartition(descriptors[i : i + n]) for i in range(0, len(descriptors), n)]

    def scan_query(self, segments: list[dict[str, Any]]) -> dict[str, Any]:
        query: dict[str, Any] = {
            "queryType": "scan",
            "dataSource": self.data_source,
            "intervals": {"type": "segments", "segments": segments},
            "columns": self.schema.fieldNames(),
            "context": dict(self.context),
        }
        druid_filter = self.pushed.druid_filter()
        if druid_filter is not None:
            query["filter"] = druid_filter
        return query

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentsPartition) or not partition.segments:
            return  # no segment in the window: Spark's single empty partition
        target = to_arrow_schema(self.schema, timezone="UTC")
        for batch in self.client.scan_batches(self.scan_query(partition.segments)):
            if batch.num_rows:
                yield conform_batch(batch, target)


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
