"""APPROX_QUANTILE_FIXED_BUCKETS: Druid's fixed-buckets histogram (druid-histogram) quantile.

The values fall into `numBuckets` equal buckets between the lower limit (inclusive) and the upper
limit (exclusive); outliers are ignored, counted apart (`overflow`) or clipped into the end
buckets (`clip`). A quantile is interpolated inside the bucket holding its cumulative count:
lower bound + (cut-off - count before the bucket) / bucket count * bucket width, as a FLOAT.
DuckDB gathers each group's values with `list` and a Python function builds the histogram.
"""

from __future__ import annotations

import struct

import duckdb
import pyarrow as pa
from sqlglot import exp

from strata.query.errors import invalid
from strata.sql.functions.fragments import (
    aggregate_filter,
    arguments,
    duck,
    number_value,
    quote,
    sql_of,
    string_value,
    typed,
)
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs
from strata.sql.functions.udfs import create, register, rows

MODES = ("ignore", "overflow", "clip")


def fixed_buckets_quantile(
    values: list[float | None], probability: float, buckets: int, lower: float, upper: float, mode: str
) -> float:
    width = (upper - lower) / buckets
    counts = [0] * buckets
    for v in values:
        if v is None:
            continue
        if v < lower or v >= upper:
            if mode != "clip":
                continue  # ignored, or counted apart from the buckets
            v = lower if v < lower else upper - width / 2
        counts[min(buckets - 1, int((v - lower) / width))] += 1
    total = sum(counts)
    if total == 0:
        return 0.0
    cut = probability * 100.0
    before, before_pct, before_bound = 0, 0.0, lower
    for i, count in enumerate(counts):
        through = before + count
        through_pct = 100.0 * through / total
        through_bound = (i + 1) * width + lower
        if through_pct >= cut:
            fraction = (cut - before_pct) / (through_pct - before_pct)
            return _float(fraction * (through_bound - before_bound) + before_bound)
        before, before_pct, before_bound = through, through_pct, through_bound
    return _float(upper)


def _float(value: float) -> float:
    """Druid's histogram answers a Java float."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _quantile(node: exp.Expr, ctx: Context) -> exp.Expr:
    name = "APPROX_QUANTILE_FIXED_BUCKETS"
    args = arguments(node)
    if not 5 <= len(args) <= 6:
        raise invalid("Function [%s] needs 5 or 6 arguments, got %d", name, len(args))
    buckets = number_value(args[2], name, "numBuckets")
    lower = number_value(args[3], name, "lowerLimit")
    upper = number_value(args[4], name, "upperLimit")
    mode = (string_value(args[5], name, "outlierHandlingMode") if len(args) > 5 else None) or "ignore"
    if mode not in MODES or not isinstance(buckets, int) or buckets < 1 or lower is None or upper <= lower:
        raise invalid("Function [%s]: invalid histogram parameters", name)
    values = f"coalesce(list(CAST({sql_of(args[0])} AS DOUBLE)){aggregate_filter(ctx)}, [])"
    call = (
        f"strata_fixed_buckets_quantile({values}, CAST({sql_of(args[1])} AS DOUBLE), {buckets},"
        f" CAST({lower} AS DOUBLE), CAST({upper} AS DOUBLE), {quote(mode)})"
    )
    return typed(duck(call), "DOUBLE")


HISTOGRAMS: dict[str, Rewrite] = {"APPROX_QUANTILE_FIXED_BUCKETS": _quantile}


def _install(conn: duckdb.DuckDBPyConnection) -> None:
    params = ["DOUBLE[]", "DOUBLE", "INTEGER", "DOUBLE", "DOUBLE", "VARCHAR"]
    quantile = rows(fixed_buckets_quantile, pa.float64(), len(params))
    create(conn, "strata_fixed_buckets_quantile", quantile, params, "DOUBLE")


register(_install)

HISTOGRAM_SPECS: list[FunctionSpec] = specs(
    "aggregate",
    "aggregation",
    {
        "APPROX_QUANTILE_FIXED_BUCKETS": "A quantile from a fixed-buckets histogram "
        "(probability, numBuckets, lowerLimit, upperLimit[, outlierHandlingMode]).",
    },
)
