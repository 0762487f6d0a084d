"""`spark.read.format("strata")`: the PySpark Python data source over a Strata (or Druid) broker.

Options (all strings, as Spark passes them):
- `broker`: the broker's URL (`http://host:8082`; required);
- `datasource` with optional `columns` (comma-separated): a table read, split by segment, filters
  and `__time` ranges pushed down; `partitions` (default: Spark's default parallelism, one task
  per core) or `segmentsPerPartition` set how segments are packed into Spark partitions, and
  `dataNodes` (default true) whether tasks ask the historicals serving their segments directly;
  `metadata` (the metadata store, as the writer takes it) lets tasks read published segments'
  files straight from deep storage, `segmentFiles` (default true) whether they do; `batchRows`
  (default 65,536) the rows of each Arrow batch a task hands Spark;
- `sql`: one Druid SQL statement, or `query`: one native JSON query (timeseries, topN, groupBy,
  scan), run whole on the broker so aggregations never reach Spark;
- `intervals`: comma-separated ISO-8601 intervals (default: all time);
- `timeout`: seconds for each broker request (default 300);
- `user` and `password` (or STRATA_PASSWORD in the driver's environment) for a secured broker,
  `tlsCa`: the CA file an https:// broker's certificate must chain to;
  with either, `dataNodes` and `segmentFiles` default to false (data nodes answer only the
  cluster's own identity, and its deep storage is rarely the caller's to read).
Writing (`df.write.format("strata")`) takes the options of `strata.spark.write_options`.
The schema comes from the broker (segmentMetadata, or the SQL/native answer's types) unless the
caller gives `.schema(...)`. Everything here runs in Spark's Python workers; broker failures
raise `StrataError` with a one-line message.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from strata.spark.broker_client import ETERNITY, BrokerClient, StrataError
from strata.spark.data_nodes import BATCH_ROWS
from strata.spark.reader import NativeReader, Split, SqlReader, TableReader, parse_native
from strata.spark.results import infer_schema, native_rows, sql_schema, table_schema
from timeline import Interval, condense_intervals

DEFAULT_TIMEOUT_S = 300.0


class StrataDataSource(DataSource):
    # Spark plans a Python data source in a worker without a SparkContext: `register` binds the
    # session's default parallelism into a subclass, which Spark pickles by value.
    default_partitions = 2

    @classmethod
    def name(cls) -> str:
        return "strata"

    # -- options ----------------------------------------------------------------------------------
    def _option(self, key: str) -> str | None:
        value = self.options.get(key)
        return None if value is None or str(value).strip() == "" else str(value).strip()

    def _client(self) -> BrokerClient:
        url = self._option("broker")
        if url is None:
            raise StrataError("option broker (the broker's URL, e.g. http://127.0.0.1:8082) is required")
        timeout = self._option("timeout")
        try:
            seconds = float(timeout) if timeout else DEFAULT_TIMEOUT_S
        except ValueError:
            raise StrataError(f"option timeout must be a number of seconds, got {timeout!r}") from None
        return BrokerClient(url, seconds, auth=self._auth(), tls_ca=self._option("tlsCa"))

    def _auth(self) -> tuple[str, str] | None:
        """Options user and password; the password may instead come from STRATA_PASSWORD in the
        driver's environment, so it stays out of the job's code."""
        user = self._option("user")
        if user is None:
            return None
        password = self.options.get("password") or os.environ.get("STRATA_PASSWORD")
        if not password:
            raise StrataError("option user needs option password (or STRATA_PASSWORD in the environment)")
        return user, str(password)

    def _mode(self) -> str:
        given = [k for k in ("sql", "query") if self._option(k)]
        if len(given) > 1:
            raise StrataError("give either option sql or option query, not both")
        if given:
            return given[0]
        if self._option("datasource") is None:
            raise StrataError("option datasource is required (or give option sql or option query)")
        return "table"

    def _intervals(self) -> list[Interval]:
        raw = self._option("intervals") or ETERNITY
        try:
            return list(condense_intervals(Interval.parse(p.strip()) for p in raw.split(",") if p.strip()))
        except ValueError as e:
            raise StrataError(f"option intervals is not a list of ISO-8601 intervals: {e}") from None

    def _columns(self) -> list[str]:
        raw = self._option("columns")
        return [c.strip() for c in raw.split(",") if c.strip()] if raw else []

    def _positive(self, key: str) -> int | None:
        raw = self._option(key)
        if raw is None:
            return None
        if not raw.isdigit() or int(raw) < 1:
            raise StrataError(f"option {key} must be a positive integer, got {raw!r}")
        return int(raw)

    def _split(self) -> Split:
        partitions, segments = self._positive("partitions"), self._positive("segmentsPerPartition")
        if partitions is not None and segments is not None:
            raise StrataError("give either option partitions or option segmentsPerPartition, not both")
        if segments is not None:
            return Split(segments=segments)
        return Split(partitions=partitions or max(1, int(self.default_partitions)))

    def _flag(self, key: str) -> bool:
        # a secured cluster's data nodes answer only its internal identity, and its deep storage is
        # its own: a user reads through the broker unless told otherwise
        default = "false" if self._option("user") or self._option("tlsCa") else "true"
        raw = (self._option(key) or default).lower()
        if raw not in ("true", "false"):
            raise StrataError(f"option {key} must be true or false, got {raw!r}")
        return raw == "true"

    def _metadata(self) -> str | None:
        """The metadata store whose loadSpecs say where segment files lie, when tasks read them."""
        metadata = self._option("metadata")
        if metadata is None or not self._flag("segmentFiles"):
            return None
        return metadata if "://" in metadata else os.path.abspath(metadata)

    def _context(self) -> dict[str, Any]:
        timeout = self._option("timeout")
        return {"timeout": int(float(timeout) * 1000)} if timeout else {}

    def _column_types(self, client: BrokerClient) -> dict[str, str]:
        """Asked once: Spark pickles this object after `schema()` and every read reuses it."""
        cached: dict[str, str] | None = getattr(self, "_types", None)
        if cached is None:
            data_source = str(self._option("datasource"))
            client.require_datasource(data_source)
            cached = client.column_types(data_source, [str(i) for i in self._intervals()])
            self._types = cached
        return cached

    # -- Spark's entry points ---------------------------------------------------------------------
    def schema(self) -> StructType:
        client = self._client()
        mode = self._mode()
        if mode == "sql":
            return sql_schema(client.sql(str(self._option("sql")), self._context()))
        if mode == "query":
            query = parse_native(str(self._option("query")))
            names, rows = native_rows(query, client.native(query))
            return infer_schema(names, rows)
        return table_schema(self._column_types(client), self._columns())

    def reader(self, schema: StructType) -> DataSourceReader:
        client = self._client()
        mode = self._mode()
        if mode == "sql":
            return SqlReader(client, str(self._option("sql")), schema, self._context())
        if mode == "query":
            return NativeReader(client, parse_native(str(self._option("query"))), schema)
        return TableReader(
            client,
            str(self._option("datasource")),
            self._intervals(),
            schema,
            self._column_types(client),
            self._split(),
            self._context(),
            self._flag("dataNodes"),
            self._metadata(),
            self._positive("batchRows") or BATCH_ROWS,
        )

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """`df.write.format("strata")`: options in `strata.spark.write_options`."""
        from strata.spark.writer import StrataWriter

        return StrataWriter(dict(self.options), schema, overwrite)
