"""A SQL answer written from a groupBy's Arrow columns where the native one is (the merge worker),
not from the native answer's JSON parsed back into Python rows.

A statement planned to one native groupBy whose SQL columns are that groupBy's own output columns
(GROUP BY with aggregates, ORDER BY / LIMIT in its limitSpec, nothing after it in the broker) is
answered from the merged partial: each SQL column's texts made from its native column by Druid
SQL's value rules (`strata.sql.plan.sql_value`: timestamps as ISO instants in the session's zone,
BOOLEANs as true/false; `sqlStringifyArrays`: arrays as their JSON text), the rows joined by Arrow
kernels (`strata.query.json_text`) in every result format. At 10M rows (~2.7M groups) the old way
parsed 293 MB of native JSON and made and encoded 2.7M Python rows: about three times the CPU of
the native answer. The bytes are those `encode_rows` prints for `SqlPlan.rows` of the native answer;
a column of a type the kernels do not cover goes value by value through those same rules.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.query.base import Query
from strata.query.collector import collector_paused
from strata.query.groupby import GroupByQuery
from strata.query.json_text import ROWS_PER_PASS, rows_text, separated, slice_texts
from strata.sql.arrow_order import comparable, picked_rows
from strata.sql.filters import TIME
from strata.sql.formats import RowEncoder, csv_text, may_hold_arrays
from strata.sql.plan import Output, SqlPlan, sql_value
from timeline import format_instant

JSON_FORMATS = ("object", "array")
_NULL = b"null"


@dataclass(frozen=True)
class SqlAnswer:
    """How one statement's body is written from its groupBy's merged partial (picklable: it goes to
    the merge worker with the partials)."""

    outputs: tuple[Output, ...]
    time_zone: str | None
    fmt: str
    header: bool = False
    types_header: bool = False
    sql_types_header: bool = False
    stringify_arrays: bool = True
    order: tuple[tuple[int, bool], ...] = ()  # the broker's ORDER BY: (output index, descending)
    offset: int = 0
    limit: int | None = None

    @property
    def media_type(self) -> str:
        return self._encoder().media_type

    def takes(self, query: Query) -> bool:
        """Whether `query`'s answer is one this writes (else the native answer, and rows from it)."""
        return (
            isinstance(query, GroupByQuery) and query.subtotals is None and not query.context.result_as_array
        )

    def body(self, query: Query, merged: pa.Table) -> bytes:
        """The whole SQL body of the statement from the groupBy's merged partial."""
        assert isinstance(query, GroupByQuery)
        times, columns = query.output_columns(merged)
        if self.order or self.offset or self.limit is not None:
            picked = self._picked(query, times, columns)
            if picked is None:
                return self._rows_encoded(query, merged)
            times, taken = times[picked], pa.array(picked, pa.int64())
            columns = {k: _taken(v, picked, taken) for k, v in columns.items()}
        encoder = self._encoder()
        line_end = None if self.fmt in JSON_FORMATS else b"\n"
        passes = []
        for start in range(0, len(times), ROWS_PER_PASS):
            part = times[start : start + ROWS_PER_PASS]
            texts = [self._texts(o, columns.get(o.source), query, part, start) for o in self.outputs]
            passes.append(rows_text(self._row_pieces(texts), len(part), line_end))
        rows = (b"," if line_end is None else b"").join(p for p in passes if len(p))
        lead = b"," if line_end is None and self.header and rows else b""
        return encoder.start() + lead + rows + encoder.end()

    def _picked(
        self, query: GroupByQuery, times: np.ndarray, columns: Mapping[str, pa.Array | list[Any]]
    ) -> np.ndarray | None:
        """The answer's rows in the statement's order, offset and limited (None: an order the
        columns cannot give)."""
        keys: list[tuple[pa.Array | None, bool]] = []
        for index, descending in self.order:
            out = self.outputs[index]
            column = columns.get(out.source)
            if out.source == TIME:
                values = _instants(times, self._zone or query.granularity.tz)
            elif column is None:
                keys.append((None, descending))
                continue
            elif isinstance(column, list):
                return None
            elif out.sql_type_name == "BOOLEAN":  # compared as true/false: numbers but integers aside
                kind = column.type
                values = column if pa.types.is_boolean(kind) else None
                values = pc.not_equal(column, 0) if pa.types.is_integer(kind) else values
            elif out.timestamp:
                values = _instants(column, self._zone) if pa.types.is_integer(column.type) else None
            else:
                values = comparable(column)
            if values is None:
                return None
            keys.append((values, descending))
        return picked_rows(keys, len(times), self.offset, self.limit)

    def _rows_encoded(self, query: GroupByQuery, merged: pa.Table) -> bytes:
        """The old way, for an order of values Arrow does not rank as Python compares them: the
        native answer's rows, ordered, encoded."""
        plan = SqlPlan(list(self.outputs), {"queryType": "groupBy"}, order=list(self.order),
                       offset=self.offset, limit=self.limit, time_zone=self.time_zone)  # fmt: skip
        encoder = self._encoder()
        with collector_paused():
            rows = plan.rows(orjson.loads(query.finalize_json(merged)))
            return encoder.start() + encoder.rows(rows) + encoder.end()

    def _encoder(self) -> RowEncoder:
        return RowEncoder(
            [o.name for o in self.outputs],
            [o.druid_type for o in self.outputs],
            [o.sql_type for o in self.outputs],
            fmt=self.fmt,
            header=self.header,
            types_header=self.types_header,
            sql_types_header=self.sql_types_header,
            stringify_arrays=self.stringify_arrays,
        )

    def _row_pieces(self, texts: list[bytes | pa.Array]) -> list[bytes | pa.Array]:
        if self.fmt in ("object", "objectLines"):
            fields: list[bytes | pa.Array] = []
            for i, (o, text) in enumerate(zip(self.outputs, texts, strict=True)):
                fields += [(b"," if i else b"{") + orjson.dumps(o.name) + b":", text]
            return [*fields, b"}"] if fields else [b"{}"]
        if self.fmt == "csv":
            return separated(texts, b",")
        return [b"[", *separated(texts, b","), b"]"]

    @property
    def _zone(self) -> ZoneInfo | None:
        return None if self.time_zone is None else ZoneInfo(self.time_zone)

    def _texts(
        self,
        out: Output,
        column: pa.Array | list[Any] | None,  # None: the groupBy has no such output
        query: GroupByQuery,
        times: np.ndarray,
        start: int,
    ) -> bytes | pa.Array:
        """One SQL column's texts for `times`' rows (JSON values, or CSV fields)."""
        csv = self.fmt == "csv"
        if out.source == TIME:  # the row's bucket start, as the native answer's timestamp is parsed back
            stamps = _instants(times, self._zone or query.granularity.tz)
            return _csv_fields(stamps, len(self.outputs)) if csv else _json_strings(stamps)
        if column is None:
            return _csv_fields(pa.nulls(len(times), pa.string()), len(self.outputs)) if csv else _NULL
        rows = len(times)
        part = column[start : start + rows] if isinstance(column, list) else column.slice(start, rows)
        if isinstance(part, pa.Array):
            written = self._csv_texts(out, part) if csv else self._json_texts(out, part)
            if written is not None:
                return written
        return self._python_texts(out, part)

    def _json_texts(self, out: Output, part: pa.Array) -> pa.Array | None:
        kind = part.type
        if out.sql_type_name == "BOOLEAN":
            if pa.types.is_integer(kind):
                return pc.fill_null(pc.cast(_booleans(part), pa.binary()), pa.scalar(_NULL, pa.binary()))
            return slice_texts(part, 0, len(part)) if pa.types.is_boolean(kind) else None
        if out.timestamp:
            return _json_strings(_instants(part, self._zone)) if pa.types.is_integer(kind) else None
        texts = slice_texts(part, 0, len(part))
        if self.stringify_arrays and may_hold_arrays(out.druid_type) and _is_list(kind):
            return pc.if_else(part.is_null(), pa.scalar(_NULL, pa.binary()), _json_strings(texts))
        return texts

    def _csv_texts(self, out: Output, part: pa.Array) -> pa.Array | None:
        kind = part.type
        columns = len(self.outputs)
        if out.sql_type_name == "BOOLEAN" and pa.types.is_integer(kind):
            return _csv_fields(_booleans(part), columns)
        if out.timestamp:
            return _csv_fields(_instants(part, self._zone), columns) if pa.types.is_integer(kind) else None
        if pa.types.is_integer(kind):
            return _csv_fields(pc.cast(part, pa.string()), columns)
        if pa.types.is_boolean(kind):
            return _csv_fields(_booleans(part), columns)
        if _is_text(kind):
            return _csv_fields(part, columns)
        if _is_list(kind):  # an array's field is its JSON text, stringified or not
            texts = slice_texts(part, 0, len(part))
            return _csv_fields(pc.if_else(part.is_null(), pa.scalar(None, pa.binary()), texts), columns)
        return None

    def _python_texts(self, out: Output, part: pa.Array | list[Any]) -> pa.Array:
        """Value by value, as the old way: the native JSON parsed, Druid SQL's rules, then printed."""
        native = slice_texts(part, 0, len(part))
        values = orjson.loads(b"[" + b",".join(native.to_pylist()) + b"]")
        zone, stringify = self._zone, self.stringify_arrays and may_hold_arrays(out.druid_type)
        values = [sql_value(out, v, zone) for v in values]
        if stringify:
            values = [orjson.dumps(v).decode() if type(v) is list else v for v in values]
        if self.fmt == "csv":
            return _csv_fields(pa.array([csv_text(v) for v in values], pa.string()), len(self.outputs))
        return pa.array([orjson.dumps(v) for v in values], pa.binary())


def sql_answer(plan: SqlPlan, encoding: Mapping[str, Any]) -> SqlAnswer | None:
    """The writer of a plan's answer from Arrow columns, or None when the plan does more than print,
    order and cut one groupBy's columns (an empty aggregate's row, a subquery's rows)."""
    native = plan.native
    if native is None or native.get("queryType") != "groupBy" or native.get("subtotalsSpec"):
        return None
    if plan.row_bound is not None or plan.empty_row or plan.raw_times or plan.explain or plan.constant_rows:
        return None
    names = [o.name for o in plan.outputs]
    if len(set(names)) != len(names):  # an object row keeps one of them
        return None
    writer = SqlAnswer(tuple(plan.outputs), plan.time_zone, **encoding)
    return dataclasses.replace(writer, order=tuple(plan.order), offset=plan.offset, limit=plan.limit)


def _taken(column: pa.Array | list[Any], picked: np.ndarray, taken: pa.Array) -> pa.Array | list[Any]:
    return [column[i] for i in picked] if isinstance(column, list) else column.take(taken)


def _is_list(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return _is_text(kind.value_type)
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _instants(values: np.ndarray | pa.Array, zone: ZoneInfo | None) -> pa.Array:
    """Epoch milliseconds printed as ISO instants (each distinct one once); nulls stay null."""
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.int64())
    distinct = pc.unique(arr.drop_null())
    printed = pa.array([format_instant(int(ms), zone) for ms in distinct.to_pylist()], pa.string())
    return printed.take(pc.index_in(arr, distinct))


def _booleans(values: pa.Array) -> pa.Array:
    """true/false texts of booleans, or of numbers as Druid SQL's BOOLEAN reads them (non-zero)."""
    truth = values if pa.types.is_boolean(values.type) else pc.not_equal(values, 0)
    return pc.if_else(truth, pa.scalar("true"), pa.scalar("false"))


def _json_strings(texts: pa.Array) -> pa.Array:
    """Each text as a JSON string, as orjson quotes it: only `\\` and `"` are escaped here, so the
    texts must hold no control character (ISO instants and JSON texts hold none); nulls print null."""
    as_text = texts if pa.types.is_string(texts.type) else pc.cast(texts, pa.string())
    escaped = pc.replace_substring(pc.replace_substring(as_text, "\\", "\\\\"), '"', '\\"')
    quoted = pc.binary_join_element_wise('"', escaped, '"', "")
    return pc.fill_null(pc.cast(quoted, pa.binary()), pa.scalar(_NULL, pa.binary()))


def _csv_quoted() -> str:
    """A regex of the characters that make Python's csv writer (as `RowEncoder` sets it up) quote a
    field: a comma, a quote, LF, and CR on the Python versions that quote it (3.12 on; 3.11 not)."""
    quoted = []
    for c, pattern in ((",", ","), ('"', '"'), ("\r", r"\r"), ("\n", r"\n")):
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow([c, ""])
        if out.getvalue().startswith('"'):
            quoted.append(pattern)
    return f"[{''.join(quoted)}]"


_CSV_QUOTED = _csv_quoted()


def _csv_fields(texts: pa.Array, columns: int) -> pa.Array:
    """CSV fields as Python's csv writer quotes them (a null: empty; a row's only field, when empty,
    quoted, so the row is not blank)."""
    filled = pc.fill_null(texts if pa.types.is_string(texts.type) else pc.cast(texts, pa.string()), "")
    doubled = pc.binary_join_element_wise('"', pc.replace_substring(filled, '"', '""'), '"', "")
    quote = pc.match_substring_regex(filled, _CSV_QUOTED)
    if columns == 1:
        quote = pc.or_(quote, pc.equal(filled, ""))
    return pc.cast(pc.if_else(quote, doubled, filled), pa.binary())
