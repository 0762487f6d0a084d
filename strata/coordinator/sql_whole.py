"""A SQL ingestion's statement run whole: DuckDB over the task's sources, the result staged as
Parquet for the segment build.

Each source streams into DuckDB as Arrow batches, read by the ingestion's own readers (the same
formats, the same parse errors as any ingestion) and conformed to its signature: an external table
through its input source, a data source through its visible segments in deep storage. DuckDB may
read nothing else (external access is off: the statement came over the network) and spills to the
task's scratch directory when a grouping or join outgrows memory. Its result is written as it
comes, so memory holds a batch of it, not all of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from strata.ingestion.errors import IngestionError, ParseProblem, TooManyParseExceptions
from strata.ingestion.fetch import InputStorage
from strata.ingestion.input_sources import DruidInputSource, parse_input_source
from strata.ingestion.readers import read_blocks, resolve_inputs
from strata.ingestion.row_stage import RowStage
from strata.ingestion.spec import InputFormat, parse_input_format
from strata.sql.ingest.columns import signature_of
from timeline import ETERNITY

BATCH_ROWS = 1 << 20
RESULT = "result.parquet"


@dataclass
class Reading:
    """What the sources gave while DuckDB read them."""

    limit: int  # maxParseExceptions
    rows: int = 0
    unparseable: int = 0
    problems: list[ParseProblem] = field(default_factory=list)
    failure: BaseException | None = None  # raised inside a source: DuckDB only sees its text


@dataclass(frozen=True)
class Staged:
    path: Path
    rows: int
    reading: Reading


def run_whole(
    sql: str,
    sources: Mapping[str, Mapping[str, Any]],
    storage: InputStorage,
    scratch: Path,
    setup: Any,
    max_parse_exceptions: int,
) -> Staged:
    reading = Reading(max_parse_exceptions)
    con = duckdb.connect(config={"enable_external_access": False, "temp_directory": str(scratch / "spill")})
    out = scratch / RESULT
    rows = 0
    try:
        con.execute("SET TimeZone='UTC'")
        con.execute("SET enable_progress_bar = false")
        setup(con)
        for name, source in sources.items():
            con.register(name, _reader(source, storage, reading))
        try:
            result = con.sql(sql).to_arrow_reader(BATCH_ROWS)
            with pq.ParquetWriter(out, result.schema) as writer:
                for batch in result:
                    writer.write_batch(batch)
                    rows += batch.num_rows
        except duckdb.Error as e:
            if reading.failure is not None:
                raise reading.failure from None
            raise IngestionError(f"the statement failed: {e}") from None
    finally:
        con.close()
    return Staged(out, rows, reading)


def _reader(source: Mapping[str, Any], storage: InputStorage, reading: Reading) -> pa.RecordBatchReader:
    stage = RowStage(tuple(signature_of(source)))
    schema = stage.conform(pa.table({})).schema
    if source["type"] == "external":
        input_source = parse_input_source(source["inputSource"])
        text = tuple(n for n, t in stage.signature if t == "STRING")
        fmt = dataclasses.replace(parse_input_format(source["inputFormat"]), text_fields=text)
    else:
        input_source, fmt = DruidInputSource(str(source["dataSource"]), ETERNITY), InputFormat("parquet")

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for f in resolve_inputs(input_source, storage):
                for block in read_blocks(f, fmt):
                    reading.rows += block.table.num_rows
                    reading.unparseable += len(block.problems)
                    reading.problems += block.problems[: 100 - len(reading.problems)]
                    if reading.unparseable > reading.limit:
                        raise TooManyParseExceptions(reading.unparseable, reading.limit, reading.problems)
                    yield from stage.conform(block.table).to_batches()
        except BaseException as e:  # DuckDB reports only a line of text: keep the error itself
            reading.failure = e
            raise

    return pa.RecordBatchReader.from_batches(schema, batches())
