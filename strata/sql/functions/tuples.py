"""Druid's DS_TUPLE_DOUBLES functions with DataSketches tuple sketches.

A sketch maps each distinct key (the first argument, as text) to an array of doubles (the
metrics), summed when a key repeats and when sketches intersect or unite, as Druid's
ArrayOfDoubles sketches do. The Python package has no ArrayOfDoubles sketch, so a value is a
tuple sketch with list summaries, serialized as the number of metrics then the sketch (Base64 in
SQL): it reads back here, not in Druid. At the top of a SELECT, DS_TUPLE_DOUBLES is finalized to
its distinct-count estimate, as Druid prints it; inside a function it stays a sketch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import datasketches as ds
import duckdb
import pyarrow as pa
from sqlglot import exp

from strata.query.errors import invalid
from strata.sql.functions.fragments import (
    aggregate_filter,
    arguments,
    duck,
    number_value,
    sql_of,
    top_level,
    typed,
)
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs
from strata.sql.functions.udfs import create, register, rows

NOMINAL_ENTRIES = 16384


class _Sum(ds.TuplePolicy):  # type: ignore[misc]
    """Summaries are arrays of doubles added element by element."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def create_summary(self) -> list[float]:
        return [0.0] * self.size

    def update_summary(self, summary: list[float], update: list[float]) -> list[float]:
        for i, value in enumerate(update):
            summary[i] += value
        return summary

    def __call__(self, summary: list[float], other: list[float]) -> list[float]:
        return [a + b for a, b in zip(summary, other, strict=True)]


class _Doubles(ds.PyObjectSerDe):  # type: ignore[misc]
    def get_size(self, item: list[float]) -> int:
        return 4 + 8 * len(item)

    def to_bytes(self, item: list[float]) -> bytes:
        return struct.pack(f"<i{len(item)}d", len(item), *item)

    def from_bytes(self, data: bytes, offset: int) -> tuple[list[float], int]:
        (size,) = struct.unpack_from("<i", data, offset)
        return list(struct.unpack_from(f"<{size}d", data, offset + 4)), 4 + 8 * size


def _lg_k(nominal: int) -> int:
    return max(4, nominal.bit_length() - 1)


def _pack(size: int, sketch: Any) -> bytes:
    return struct.pack("<i", size) + bytes(sketch.serialize(_Doubles()))


def _unpack(blob: bytes) -> tuple[int, Any]:
    (size,) = struct.unpack_from("<i", blob, 0)
    return size, ds.compact_tuple_sketch.deserialize(blob[4:], serde=_Doubles())


def build(entries: list[dict[str, Any] | None], size: int, nominal: int) -> bytes:
    sketch = ds.update_tuple_sketch(_Sum(size), _lg_k(nominal))
    for entry in entries:
        if entry is not None and entry["k"] is not None:
            sketch.update(entry["k"], [0.0 if v is None else float(v) for v in entry["v"]])
    return _pack(size, sketch.compact())


def _combine(kind: str) -> Callable[[list[bytes | None], int], bytes]:
    def combine(blobs: list[bytes | None], nominal: int) -> bytes:
        sketches = [_unpack(b) for b in blobs if b is not None]
        if not sketches:
            raise invalid("DS_TUPLE_DOUBLES_%s needs a sketch", kind.upper())
        size = sketches[0][0]
        if kind == "not":
            result = sketches[0][1]
            for _, other in sketches[1:]:
                result = ds.tuple_a_not_b().compute(result, other)
            return _pack(size, result)
        operation = (
            ds.tuple_union(_Sum(size), _lg_k(nominal))
            if kind == "union"
            else ds.tuple_intersection(_Sum(size))
        )
        for _, sketch in sketches:
            operation.update(sketch)
        return _pack(size, operation.get_result())

    return combine


def sums(blob: bytes) -> list[float]:
    """Each metric's sum over the sketch, scaled up by its sampling rate (theta)."""
    size, sketch = _unpack(blob)
    totals = [0.0] * size
    for _, summary in sketch:
        for i, value in enumerate(summary):
            totals[i] += value
    return [t / sketch.theta for t in totals]


def _trailing_nominal(args: list[exp.Expr], function: str) -> tuple[list[exp.Expr], int]:
    """Druid reads a numeric literal in last place as the nominal entries."""
    if len(args) > 1 and isinstance(args[-1], exp.Literal) and not args[-1].is_string:
        return args[:-1], int(number_value(args[-1], function, "nominalEntries"))
    return args, NOMINAL_ENTRIES


def _ds_tuple_doubles(node: exp.Expr, ctx: Context) -> exp.Expr:
    args, nominal = _trailing_nominal(arguments(node), "DS_TUPLE_DOUBLES")
    if len(args) < 2:
        raise invalid("DS_TUPLE_DOUBLES needs a key and at least one metric (Strata has no sketch columns)")
    key, metrics = args[0], args[1:]
    values = ", ".join(f"CAST({sql_of(m)} AS DOUBLE)" for m in metrics)
    entries = (
        f"coalesce(list({{'k': CAST({sql_of(key)} AS VARCHAR), 'v': [{values}]}}){aggregate_filter(ctx)}, [])"
    )
    sketch = f"strata_tuple_build({entries}, {len(metrics)}, {nominal})"
    if top_level(node):
        return typed(duck(f"strata_tuple_estimate({sketch})"), "DOUBLE")
    return typed(duck(f"to_base64({sketch})"), "VARCHAR")


def _set_operation(kind: str) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args, nominal = _trailing_nominal(arguments(node), f"DS_TUPLE_DOUBLES_{kind.upper()}")
        listed = "[" + ", ".join(f"from_base64({sql_of(a)})" for a in args) + "]::BLOB[]"
        return typed(duck(f"to_base64(strata_tuple_{kind}({listed}, {nominal}))"), "VARCHAR")

    return rewrite


def _metrics_sum(node: exp.Expr, ctx: Context) -> exp.Expr:
    return typed(duck(f"strata_tuple_sums(from_base64({sql_of(arguments(node)[0])}))"), "DOUBLE[]")


TUPLES: dict[str, Rewrite] = {
    "DS_TUPLE_DOUBLES": _ds_tuple_doubles,
    "DS_TUPLE_DOUBLES_INTERSECT": _set_operation("intersect"),
    "DS_TUPLE_DOUBLES_UNION": _set_operation("union"),
    "DS_TUPLE_DOUBLES_NOT": _set_operation("not"),
    "DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE": _metrics_sum,
}


def _install(conn: duckdb.DuckDBPyConnection) -> None:
    entry = "STRUCT(k VARCHAR, v DOUBLE[])[]"
    create(conn, "strata_tuple_build", rows(build, pa.binary(), 3), [entry, "INTEGER", "INTEGER"], "BLOB")
    for kind in ("intersect", "union", "not"):
        create(
            conn, f"strata_tuple_{kind}", rows(_combine(kind), pa.binary(), 2), ["BLOB[]", "INTEGER"], "BLOB"
        )
    create(conn, "strata_tuple_sums", rows(sums, pa.list_(pa.float64()), 1), ["BLOB"], "DOUBLE[]")
    estimate = rows(lambda b: float(_unpack(b)[1].get_estimate()), pa.float64(), 1)
    create(conn, "strata_tuple_estimate", estimate, ["BLOB"], "DOUBLE")


register(_install)

TUPLE_SPECS: list[FunctionSpec] = [
    *specs(
        "aggregate",
        "sketch",
        {"DS_TUPLE_DOUBLES": "A Tuple sketch of keys with arrays of doubles (its estimate at the top)."},
    ),
    *specs(
        "scalar",
        "sketch",
        {
            "DS_TUPLE_DOUBLES_INTERSECT": "Intersection of Tuple sketches, summing the arrays.",
            "DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE": "Estimated sums of a Tuple sketch's metrics.",
            "DS_TUPLE_DOUBLES_NOT": "The first Tuple sketch minus the others.",
            "DS_TUPLE_DOUBLES_UNION": "Union of Tuple sketches, summing the arrays.",
        },
    ),
]
