"""The per-row part of a SQL ingestion, run on each block of input before it is normalized.

A SQL statement's SELECT is planned by the SQL layer (`strata.sql.ingest`); when it works row by
row (expressions, WHERE, the inputs of rollup aggregations) every engine runs that part on each block
it reads, so Spark tasks run it side by side and the rows never sit in one place. A stage:

1. conforms the block to the input's declared signature (EXTERN's, or a data source's columns):
   missing columns are null, values that do not convert to the column's type are null, as SQL
   reads them (no row is dropped for it);
2. parses the text columns the statement passes to `TIME_PARSE` with the ingestion's vectorised
   timestamp parser (the same rules as a native spec's `iso` timestamps), into new columns;
3. runs the DuckDB statement the planner wrote over the block (`input`), or, when the SELECT only
   picks and renames columns, renames them without DuckDB.

Line numbers follow the rows through the statement (its `__row` column), so a bad row is still
reported where it was in the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.block import Block
from strata.ingestion.convert import convert_column, parse_timestamps

ROW = "__row"
SIGNATURE_TYPES = {"STRING": "string", "LONG": "long", "FLOAT": "float", "DOUBLE": "double"}
TIMESTAMP = "TIMESTAMP"  # a column holding instants (a data source's __time, an EXTERN __time of longs)
TIMESTAMP_ARROW = pa.timestamp("us")  # DuckDB's TIMESTAMP: naive, holding UTC


@dataclass(frozen=True)
class RowStage:
    signature: tuple[tuple[str, str], ...]  # input columns: STRING, LONG, FLOAT, DOUBLE or TIMESTAMP
    time_parsed: tuple[tuple[str, str], ...] = ()  # (text column, new TIMESTAMP column)
    sql: str | None = None  # a DuckDB SELECT over `input`, keeping `__row`; None: `columns` only
    columns: tuple[tuple[str, str], ...] = ()  # (output, input) picked and renamed when `sql` is None
    setup: Callable[[Any], None] | None = None  # installs on a connection the functions `sql` calls
    _connection: list[Any] = field(default_factory=list, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:  # shipped to Spark tasks without a connection
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "_connection": []}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    def apply(self, block: Block) -> Block:
        # without a statement to run, the parsed times go straight to the segment build, which
        # reads epoch milliseconds: no round trip through DuckDB's microseconds
        table = self.conform(block.table, time_unit="us" if self.sql is not None else "ms")
        if self.sql is None:
            out = pa.table({name: table.column(src) for name, src in self.columns})
            return Block(out, block.source, block.first_line, block.line_numbers, block.problems,
                         block.progress_bytes, block.end_line)  # fmt: skip
        table = table.append_column(ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        out = self._run(table)
        rows = out.column(ROW).to_numpy()
        out = out.drop_columns([ROW])
        lines = block.lines(rows.astype(np.intp))
        return Block(out, block.source, block.first_line, lines, block.problems, block.progress_bytes,
                     block.end_line)  # fmt: skip

    def conform(self, raw: pa.Table, *, time_unit: str = "us") -> pa.Table:
        """`raw` in the signature's types, with the `TIME_PARSE` columns added (as DuckDB's
        TIMESTAMP, or in `time_unit`)."""
        n = raw.num_rows
        columns: dict[str, pa.Array | pa.ChunkedArray] = {}
        for name, kind in self.signature:
            col = raw.column(name) if name in raw.column_names else None
            columns[name] = _typed(col, kind, n)
        for source, target in self.time_parsed:
            text = columns.get(source)
            columns[target] = _time_parse(text if text is not None else pa.nulls(n, pa.string()), time_unit)
        return pa.table(columns) if columns else pa.table({ROW: pa.nulls(n)}).drop_columns([ROW])

    def _run(self, table: pa.Table) -> pa.Table:
        assert self.sql is not None
        con = self._duckdb()
        con.register("input", table)
        try:
            return con.sql(self.sql).to_arrow_table()
        finally:
            con.unregister("input")

    def _duckdb(self) -> Any:
        """One connection per process, kept: it may read only what it is given (no files)."""
        if not self._connection:
            import duckdb

            con = duckdb.connect(config={"enable_external_access": False, "threads": 1})
            con.execute("SET TimeZone='UTC'")
            if self.setup is not None:
                self.setup(con)
            self._connection.append(con)
        return self._connection[0]


def _typed(col: pa.ChunkedArray | None, kind: str, n: int) -> pa.Array | pa.ChunkedArray:
    """A column in its signature type; values that do not convert are null."""
    if kind == TIMESTAMP:
        if col is None:
            return pa.nulls(n, TIMESTAMP_ARROW)
        millis, bad = parse_timestamps(col, "millis", None)
        return pa.array(millis, pa.int64(), mask=bad).cast(pa.timestamp("ms")).cast(TIMESTAMP_ARROW)
    target = SIGNATURE_TYPES[kind]
    if col is None:
        return convert_column(pa.nulls(n), target)[0]
    values, bad = convert_column(col, target)
    if bad.any():
        values = pc.if_else(pa.array(bad), pa.scalar(None, values.type), values)
    return values


def _time_parse(text: pa.Array | pa.ChunkedArray, unit: str = "us") -> pa.Array:
    """`TIME_PARSE(text)`: ISO 8601 instants as a native spec's `iso` timestamps read them; text
    that does not parse is null."""
    millis, bad = parse_timestamps(text, "iso", None)
    validity = pa.py_buffer(np.packbits(~bad, bitorder="little")) if bad.any() else None
    parsed = pa.Array.from_buffers(pa.timestamp("ms"), len(millis), [validity, pa.py_buffer(millis)])
    return parsed if unit == "ms" else parsed.cast(pa.timestamp(unit))
