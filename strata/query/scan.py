"""The scan query: raw rows, optionally time-ordered, limited and offset.

Partials are the rows themselves (with `__segment`, `__time` ms). Data nodes cut their partial at
offset+limit rows (in time order when ordered), merge concatenates and re-cuts, finalize drops the
offset and groups rows into Druid's `{"segmentId","columns","events"}` batches. Time-ordered
results carry `segmentId: null`, as Druid's. With no `columns`, each segment lists its own columns
(`__time`, dimensions, metrics); that list travels in the partial's schema metadata.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.query.aggregators.base import non_finite_as_text
from strata.query.base import SEGMENT_COLUMN, CommonFields, Query, register
from strata.query.columns import TIME_COLUMN
from strata.query.druid_types import COMPLEX_JSON, MULTI_VALUE_STRING, field_druid_type, json_value, reported
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import get_bool, get_int, get_list, get_str
from strata.query.filters import Filter, parse_filter
from strata.query.virtual_columns import NO_VIRTUAL_COLUMNS, VirtualColumns, parse_virtual_columns
from timeline import format_instant

if TYPE_CHECKING:
    pass

COLUMNS_METADATA_KEY = b"strata.scan.columns"
ORDERS = ("none", "ascending", "descending")
RESULT_FORMATS = ("list", "compactedList")
DEFAULT_BATCH_SIZE = 20480


@register
@dataclass(frozen=True, kw_only=True)
class ScanQuery(Query):
    query_type = "scan"
    segment_cacheable = False  # Druid's broker never caches scan results

    columns: tuple[str, ...] = ()
    result_format: str = "list"
    batch_size: int = DEFAULT_BATCH_SIZE
    limit: int | None = None
    offset: int = 0
    order: str = "none"
    filter: Filter | None = None
    virtual_columns: VirtualColumns = NO_VIRTUAL_COLUMNS
    legacy: bool = False

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        what = "scan query"
        columns = get_list(obj, "columns", [], what=what)
        if not all(isinstance(c, str) for c in columns):
            raise invalid("Field [columns] of scan query must be an array of strings")
        result_format = get_str(obj, "resultFormat", "list", what=what)
        if result_format == "valueVector":
            raise QueryUnsupported("resultFormat [valueVector] is not supported")
        if result_format not in RESULT_FORMATS:
            raise invalid("Unknown resultFormat [%s]; expected list or compactedList", result_format)
        order = _parse_order(obj)
        if order != "none" and columns and TIME_COLUMN not in columns:
            raise invalid("Scan query ordered by [__time] must include [__time] in [columns]")
        limit = get_int(obj, "limit", None, what=what)
        if limit is not None and limit <= 0:
            raise invalid("Field [limit] of scan query must be greater than 0, got %d", limit)
        return cls(
            **common.as_kwargs(),
            columns=tuple(columns),
            result_format=result_format,
            batch_size=get_int(obj, "batchSize", DEFAULT_BATCH_SIZE, what=what, minimum=1),
            limit=limit,
            offset=get_int(obj, "offset", 0, what=what, minimum=0),
            order=order,
            filter=parse_filter(obj.get("filter")),
            virtual_columns=parse_virtual_columns(obj, what),
            legacy=get_bool(obj, "legacy", False, what=what),
        )

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        out.update(
            {
                "columns": list(self.columns),
                "resultFormat": self.result_format,
                "batchSize": self.batch_size,
                "limit": self.limit,
                "offset": self.offset,
                "order": self.order,
                "filter": None if self.filter is None else self.filter.to_json(),
                "virtualColumns": self.virtual_columns.to_json(),
                "legacy": self.legacy,
            }
        )
        return out

    # -- merge and finalize (the pass over segment rows: strata.engine.scan) -----------------------
    @property
    def row_cap(self) -> int | None:
        """Rows any partial needs to keep: offset+limit (the offset is dropped only at finalize)."""
        return None if self.limit is None else self.offset + self.limit

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        partials = [p for p in partials if p.num_columns]
        if not partials:
            return pa.table(
                {SEGMENT_COLUMN: pa.array([], pa.string()), TIME_COLUMN: pa.array([], pa.int64())}
            )
        own_columns: dict[str, list[str]] = {}
        for p in partials:
            own_columns.update(_columns_metadata(p))
        merged = pa.concat_tables(
            [p.replace_schema_metadata(None) for p in partials], promote_options="permissive"
        )
        if self.order != "none":
            direction = "descending" if self.order == "descending" else "ascending"
            merged = merged.take(pc.sort_indices(merged, [(TIME_COLUMN, direction)]))
        if self.row_cap is not None:
            merged = merged.slice(0, self.row_cap)
        return with_columns_metadata(merged, own_columns)

    def answer_table(self, merged: pa.Table) -> pa.Table:
        """The rows `finalize` answers, as the merged table's columns (the broker's engine reads
        them so, strata.sql.stage_tables)."""
        return merged.slice(self.offset, self.limit) if self.limit is not None else merged.slice(self.offset)

    def finalize(self, merged: pa.Table) -> list[Any]:
        rows = self.answer_table(merged)
        if rows.num_rows == 0:
            return []
        own_columns = _columns_metadata(merged)
        kinds = {f.name: field_druid_type(f) for f in rows.schema}
        values = {name: _json_values(rows.column(name), kinds[name]) for name in rows.column_names}
        types = {name: reported(kind) for name, kind in kinds.items()}
        segments = values.get(SEGMENT_COLUMN) or [None] * rows.num_rows  # none asked (segmentLabels)
        out: list[Any] = []
        start = 0
        while start < rows.num_rows:
            end = start
            segment = segments[start] if self.order == "none" else None
            while (
                end < rows.num_rows
                and end - start < self.batch_size
                and (segment is None or segments[end] == segment)
            ):
                end += 1
            columns = list(self.columns) if self.columns else own_columns.get(str(segment), [])
            if not columns:  # time-ordered over segments with different columns: all of them
                columns = [
                    TIME_COLUMN,
                    *[c for c in rows.column_names if c not in (SEGMENT_COLUMN, TIME_COLUMN)],
                ]
            out.append(self._batch(segment, columns, values, types, start, end))
            start = end
        return out

    def _batch(
        self,
        segment: str | None,
        columns: list[str],
        values: Mapping[str, list[Any]],
        types: Mapping[str, str],
        start: int,
        end: int,
    ) -> dict[str, Any]:
        names = list(columns)
        if self.legacy:  # the old contrib extension's shape: ISO "timestamp" always first
            names = ["timestamp", *[c for c in names if c not in (TIME_COLUMN, "timestamp")]]
        columns_values = [self._column_slice(c, values, start, end) for c in names]
        if self.result_format == "compactedList":
            events: list[Any] = [list(r) for r in zip(*columns_values, strict=True)]
        else:
            events = [dict(zip(names, r, strict=True)) for r in zip(*columns_values, strict=True)]
        signature = [
            {"name": n, "type": "STRING" if n == "timestamp" and self.legacy else types.get(n, "STRING")}
            for n in names
        ]
        return {"segmentId": segment, "columns": names, "events": events, "rowSignature": signature}

    def _column_slice(self, name: str, values: Mapping[str, list[Any]], start: int, end: int) -> list[Any]:
        if self.legacy and name == "timestamp":
            return [format_instant(t) for t in values[TIME_COLUMN][start:end]]
        column = values.get(name)
        return column[start:end] if column is not None else [None] * (end - start)


def _parse_order(obj: Mapping[str, Any]) -> str:
    order = get_str(obj, "order", "none", what="scan query").lower()
    if order not in ORDERS:
        raise invalid("Unknown scan order [%s]; expected none, ascending or descending", order)
    order_by = get_list(obj, "orderBy", [], what="scan query")
    if order_by:
        first = order_by[0] if isinstance(order_by[0], dict) else {}
        if len(order_by) > 1 or first.get("columnName") != TIME_COLUMN:
            raise QueryUnsupported("Scan [orderBy] supports only [__time]")
        order = str(first.get("order", "ascending")).lower()
        if order not in ORDERS:
            raise invalid("Unknown scan order [%s] in [orderBy]", order)
    return order


def _json_values(column: pa.ChunkedArray, kind: str) -> list[Any]:
    values: list[Any] = column.to_pylist()
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return [None if v is None else base64.b64encode(v).decode() for v in values]
    if kind in (MULTI_VALUE_STRING, COMPLEX_JSON):
        return [json_value(kind, v) for v in values]
    return non_finite_as_text(column, values)


def with_columns_metadata(table: pa.Table, own_columns: Mapping[str, list[str]]) -> pa.Table:
    if not own_columns:
        return table
    return table.replace_schema_metadata({COLUMNS_METADATA_KEY: orjson.dumps(own_columns)})


def _columns_metadata(table: pa.Table) -> dict[str, list[str]]:
    meta = table.schema.metadata or {}
    raw = meta.get(COLUMNS_METADATA_KEY)
    return dict(orjson.loads(raw)) if raw else {}
