"""Druid's DataSketches functions in DuckDB, with real sketches from the datasketches package.

DuckDB has no Python aggregate functions, so an aggregate gathers the group's values with `list`
and a Python function builds the sketch from the list (the same HLL functions the native engine
uses). A sketch value is its serialized compact image in Base64, as Druid prints sketches; the
estimate functions read it back. Values hash as Druid's do (UTF-8 strings, 64-bit longs,
doubles), so estimates match Druid's for the same values and parameters. Quantiles follow
DataSketches' inclusive rule (Druid's library default). Tuple sketches are in `tuples`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import datasketches as ds
import duckdb
import pyarrow as pa
from sqlglot import exp

import strata.sql.functions.fragments as fr
from strata.query.errors import invalid
from strata.query.sketch_functions import HLL_BUILD, HLL_UNION
from strata.sql.functions.fragments import arguments, duck, sql_of, typed
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs
from strata.sql.functions.udfs import create, register, rows

HLL_LG_K, HLL_TYPE = 12, "HLL_4"
THETA_SIZE = 16384
QUANTILES_K = 128


def _values(value: exp.Expr, ctx: Context, distinct: bool = True) -> tuple[str, str]:
    """(SQL listing the group's values, their element type VARCHAR/BIGINT/DOUBLE)."""
    element = fr.kind(value)
    element = element if element in ("BIGINT", "DOUBLE") else "VARCHAR"
    text = sql_of(value) if fr.kind(value) == element else f"CAST({sql_of(value)} AS {element})"
    listed = f"list({'DISTINCT ' if distinct else ''}{text}){fr.aggregate_filter(ctx)}"
    return f"coalesce({listed}, [])", element  # no rows: an empty sketch


def _hll_params(args: list[exp.Expr], at: int, function: str) -> tuple[int, str]:
    lg_k = fr.number_value(args[at], function, "lgK") if len(args) > at else None
    tgt = fr.string_value(args[at + 1], function, "tgtHllType") if len(args) > at + 1 else None
    return int(lg_k or HLL_LG_K), (tgt or HLL_TYPE).upper()


def hll_build(value: exp.Expr, lg_k: int, tgt: str, ctx: Context) -> str:
    values, element = _values(value, ctx)
    return f"{HLL_BUILD[element]}({values}, {lg_k}, {fr.quote(tgt)})"


def _ds_hll(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    lg_k, tgt = _hll_params(args, 1, "DS_HLL")
    return typed(duck(f"to_base64({hll_build(args[0], lg_k, tgt, ctx)})"), "VARCHAR")


def approximate_distinct(
    value: exp.Expr, ctx: Context, lg_k: int = HLL_LG_K, tgt: str = HLL_TYPE
) -> exp.Expr:
    """The rounded HLL estimate of the distinct values, 0 for no rows."""
    estimate = f"strata_hll_estimate({hll_build(value, lg_k, tgt, ctx)}, true)"
    return typed(duck(f"coalesce(CAST({estimate} AS BIGINT), 0)"), "BIGINT")


def _approx_hll(lg_k_default: int) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        lg_k, tgt = _hll_params(args, 1, "APPROX_COUNT_DISTINCT_DS_HLL")
        return approximate_distinct(args[0], ctx, lg_k if len(args) > 1 else lg_k_default, tgt)

    return rewrite


def _param(args: list[exp.Expr], at: int, function: str, what: str, default: int) -> int:
    """An optional literal integer parameter."""
    value = fr.number_value(args[at], function, what) if len(args) > at else None
    return default if value is None else int(value)


def _blob(node: exp.Expr) -> str:
    return f"from_base64({sql_of(node)})"


def _hll_estimate(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    rounded = fr.number_value(args[1], "HLL_SKETCH_ESTIMATE", "round") if len(args) > 1 else False
    out = f"strata_hll_estimate({_blob(args[0])}, {'true' if rounded else 'false'})"
    return typed(duck(out), "DOUBLE")


def _hll_bounds(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    deviations = _param(args, 1, "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS", "numStdDev", 1)
    return typed(duck(f"strata_hll_bounds({_blob(args[0])}, {deviations})"), "DOUBLE[]")


def _leading_params(args: list[exp.Expr], count: int) -> tuple[list[exp.Expr], list[exp.Expr]]:
    """Splits the optional literal parameters before the sketch arguments."""
    params: list[exp.Expr] = []
    while args and len(params) < count and isinstance(args[0], exp.Literal):
        params.append(args.pop(0))
    return params, args


def _hll_union(node: exp.Expr, ctx: Context) -> exp.Expr:
    params, sketches = _leading_params(arguments(node), 2)
    lg_k, tgt = _hll_params(params, 0, "HLL_SKETCH_UNION")
    listed = "[" + ", ".join(_blob(s) for s in sketches) + "]::BLOB[]"
    return typed(duck(f"to_base64({HLL_UNION}({listed}, {lg_k}, {fr.quote(tgt)}))"), "VARCHAR")


def _udf(name: str, result: str) -> Rewrite:
    """A function over one sketch and literal parameters."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        rest = ", ".join(sql_of(a) for a in args[1:])
        return typed(duck(f"{name}({_blob(args[0])}{', ' if rest else ''}{rest})"), result)

    return rewrite


def _udf_list(name: str, result: str) -> Rewrite:
    """A function over one sketch and a list of numbers (fractions, split points)."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        points = "[" + ", ".join(f"CAST({sql_of(a)} AS DOUBLE)" for a in args[1:]) + "]::DOUBLE[]"
        return typed(duck(f"{name}({_blob(args[0])}, {points})"), result)

    return rewrite


def _theta_build(value: exp.Expr, size: int, ctx: Context) -> str:
    values, element = _values(value, ctx)
    return f"strata_theta_build_{element.lower()}({values}, {size})"


def _sketch_of(
    function: str, what: str, default: int, build: Callable[[exp.Expr, int, Context], str]
) -> Rewrite:
    """DS_THETA / DS_QUANTILES_SKETCH(expr[, size]): the sketch in Base64."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        size = _param(args, 1, function, what, default)
        return typed(duck(f"to_base64({build(args[0], size, ctx)})"), "VARCHAR")

    return rewrite


def _approx_theta(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    size = _param(args, 1, "APPROX_COUNT_DISTINCT_DS_THETA", "size", THETA_SIZE)
    return typed(
        duck(
            f"coalesce(CAST(round(strata_theta_estimate({_theta_build(args[0], size, ctx)})) AS BIGINT), 0)"
        ),
        "BIGINT",
    )


def _theta_set(operation: str) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        params, sketches = _leading_params(arguments(node), 1)
        size = int(fr.number_value(params[0], operation, "size")) if params else THETA_SIZE
        listed = "[" + ", ".join(_blob(s) for s in sketches) + "]::BLOB[]"
        return typed(duck(f"to_base64(strata_theta_{operation}({listed}, {size}))"), "VARCHAR")

    return rewrite


def _quantiles_build(value: exp.Expr, k: int, ctx: Context) -> str:
    listed = f"list(CAST({sql_of(value)} AS DOUBLE)){fr.aggregate_filter(ctx)}"
    return f"strata_quantiles_build(coalesce({listed}, []), {k})"


def _approx_quantile(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    if len(args) < 2:
        raise invalid("Function [APPROX_QUANTILE_DS] needs a value and a probability")
    k = _param(args, 2, "APPROX_QUANTILE_DS", "k", QUANTILES_K)
    sketch = _quantiles_build(args[0], k, ctx)
    return typed(duck(f"strata_quantiles_quantile({sketch}, CAST({sql_of(args[1])} AS DOUBLE))"), "DOUBLE")


# complex types whose Base64 image is the DataSketches serialization these functions read
_DECODABLE = {"HLLSketch", "HLLSketchBuild", "HLLSketchMerge", "thetaSketch", "quantilesDoublesSketch"}


def _decode_complex(node: exp.Expr, ctx: Context) -> exp.Expr:
    """DECODE_BASE64_COMPLEX(type, base64): a sketch value is its Base64 image already."""
    args = arguments(node)
    if len(args) != 2:
        raise invalid("Function [DECODE_BASE64_COMPLEX] needs a type and a Base64 string")
    type_name = fr.string_value(args[0], "DECODE_BASE64_COMPLEX", "type")
    if type_name not in _DECODABLE:
        raise invalid(
            "DECODE_BASE64_COMPLEX: type [%s] is not one of %s", type_name, ", ".join(sorted(_DECODABLE))
        )
    return typed(duck(f"to_base64(from_base64({sql_of(args[1])}))"), "VARCHAR")  # checks the Base64


SKETCHES: dict[str, Rewrite] = {
    "DECODE_BASE64_COMPLEX": _decode_complex,
    "DS_HLL": _ds_hll,
    "APPROX_COUNT_DISTINCT": _approx_hll(HLL_LG_K),
    "APPROX_COUNT_DISTINCT_DS_HLL": _approx_hll(HLL_LG_K),
    "APPROX_COUNT_DISTINCT_BUILTIN": _approx_hll(11),
    "HLL_SKETCH_ESTIMATE": _hll_estimate,
    "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS": _hll_bounds,
    "HLL_SKETCH_UNION": _hll_union,
    "HLL_SKETCH_TO_STRING": _udf("strata_hll_to_string", "VARCHAR"),
    "DS_THETA": _sketch_of("DS_THETA", "size", THETA_SIZE, _theta_build),
    "APPROX_COUNT_DISTINCT_DS_THETA": _approx_theta,
    "THETA_SKETCH_ESTIMATE": _udf("strata_theta_estimate", "DOUBLE"),
    "THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS": _udf("strata_theta_bounds", "VARCHAR"),
    "THETA_SKETCH_UNION": _theta_set("union"),
    "THETA_SKETCH_INTERSECT": _theta_set("intersect"),
    "THETA_SKETCH_NOT": _theta_set("not"),
    "DS_QUANTILES_SKETCH": _sketch_of("DS_QUANTILES_SKETCH", "k", QUANTILES_K, _quantiles_build),
    "APPROX_QUANTILE_DS": _approx_quantile,
    "DS_GET_QUANTILE": _udf("strata_quantiles_quantile", "DOUBLE"),
    "DS_GET_QUANTILES": _udf_list("strata_quantiles_quantiles", "DOUBLE[]"),
    "DS_HISTOGRAM": _udf_list("strata_quantiles_histogram", "DOUBLE[]"),
    "DS_CDF": _udf_list("strata_quantiles_cdf", "DOUBLE[]"),
    "DS_RANK": _udf("strata_quantiles_rank", "DOUBLE"),
    "DS_QUANTILE_SUMMARY": _udf("strata_quantiles_summary", "VARCHAR"),
}


# -- Python functions -----------------------------------------------------------------------------
def _hll_estimate_py(blob: bytes, rounded: bool) -> float:
    estimate = ds.hll_sketch.deserialize(blob).get_estimate()
    return float(round(estimate)) if rounded else float(estimate)


def _hll_bounds_py(blob: bytes, deviations: int) -> list[float]:
    sketch = ds.hll_sketch.deserialize(blob)
    return [sketch.get_estimate(), sketch.get_lower_bound(deviations), sketch.get_upper_bound(deviations)]


def _theta_builder(values: list[Any], size: int) -> bytes:
    sketch = ds.update_theta_sketch(max(4, size.bit_length() - 1))
    for v in values:
        if v is not None:
            sketch.update(v)
    return bytes(sketch.compact().serialize())


def _theta(blob: bytes) -> Any:
    return ds.compact_theta_sketch.deserialize(blob)


def _theta_bounds_py(blob: bytes, deviations: int) -> str:
    sketch = _theta(blob)
    out = {
        "estimate": sketch.get_estimate(),
        "highBound": sketch.get_upper_bound(deviations),
        "lowBound": sketch.get_lower_bound(deviations),
        "numStdDev": deviations,
    }
    return json.dumps(out, separators=(",", ":"))


def _theta_combine(make: Callable[[int], Any]) -> Callable[[list[bytes | None], int], bytes]:
    """Union or intersection of the non-null sketches of a list."""

    def combine(blobs: list[bytes | None], size: int) -> bytes:
        operation = make(max(4, size.bit_length() - 1))
        for b in blobs:
            if b is not None:
                operation.update(_theta(b))
        return bytes(operation.get_result().serialize())

    return combine


_theta_union_py = _theta_combine(ds.theta_union)
_theta_intersect_py = _theta_combine(lambda lg_k: ds.theta_intersection())


def _theta_not_py(blobs: list[bytes | None], size: int) -> bytes:
    present = [_theta(b) for b in blobs if b is not None]
    result = present[0] if present else ds.update_theta_sketch().compact()
    for other in present[1:]:
        result = ds.theta_a_not_b().compute(result, other)
    return bytes(result.serialize())


def _quantiles_builder(values: list[float | None], k: int) -> bytes:
    sketch = ds.quantiles_doubles_sketch(k)
    for v in values:
        if v is not None:
            sketch.update(v)
    return bytes(sketch.serialize())


def _sketch(blob: bytes) -> Any:
    return ds.quantiles_doubles_sketch.deserialize(blob)


def _quantile_py(blob: bytes, fraction: float) -> float | None:
    sketch = _sketch(blob)
    return None if sketch.is_empty() else float(sketch.get_quantile(fraction, True))


def _quantiles_py(blob: bytes, fractions: list[float]) -> list[float] | None:
    sketch = _sketch(blob)
    return None if sketch.is_empty() else [float(sketch.get_quantile(f, True)) for f in fractions]


def _histogram_py(blob: bytes, splits: list[float]) -> list[float] | None:
    sketch = _sketch(blob)
    if sketch.is_empty():
        return None
    return [p * sketch.n for p in sketch.get_pmf(splits, True)]


def _cdf_py(blob: bytes, splits: list[float]) -> list[float] | None:
    sketch = _sketch(blob)
    return None if sketch.is_empty() else list(sketch.get_cdf(splits, True))


def _rank_py(blob: bytes, value: float) -> float | None:
    sketch = _sketch(blob)
    return None if sketch.is_empty() else float(sketch.get_rank(value, True))


_DOUBLES = pa.list_(pa.float64())
_FUNCTIONS: list[tuple[str, Callable[..., Any], pa.DataType, list[str], str]] = [
    ("strata_hll_estimate", _hll_estimate_py, pa.float64(), ["BLOB", "BOOLEAN"], "DOUBLE"),
    ("strata_hll_bounds", _hll_bounds_py, _DOUBLES, ["BLOB", "INTEGER"], "DOUBLE[]"),
    ("strata_hll_to_string", lambda b: str(ds.hll_sketch.deserialize(b)), pa.string(), ["BLOB"], "VARCHAR"),
    *(
        (f"strata_theta_build_{t.lower()}", _theta_builder, pa.binary(), [f"{t}[]", "INTEGER"], "BLOB")
        for t in ("VARCHAR", "BIGINT", "DOUBLE")
    ),
    ("strata_theta_estimate", lambda b: float(_theta(b).get_estimate()), pa.float64(), ["BLOB"], "DOUBLE"),
    ("strata_theta_bounds", _theta_bounds_py, pa.string(), ["BLOB", "INTEGER"], "VARCHAR"),
    ("strata_theta_union", _theta_union_py, pa.binary(), ["BLOB[]", "INTEGER"], "BLOB"),
    ("strata_theta_intersect", _theta_intersect_py, pa.binary(), ["BLOB[]", "INTEGER"], "BLOB"),
    ("strata_theta_not", _theta_not_py, pa.binary(), ["BLOB[]", "INTEGER"], "BLOB"),
    ("strata_quantiles_build", _quantiles_builder, pa.binary(), ["DOUBLE[]", "INTEGER"], "BLOB"),
    ("strata_quantiles_quantile", _quantile_py, pa.float64(), ["BLOB", "DOUBLE"], "DOUBLE"),
    ("strata_quantiles_quantiles", _quantiles_py, _DOUBLES, ["BLOB", "DOUBLE[]"], "DOUBLE[]"),
    ("strata_quantiles_histogram", _histogram_py, _DOUBLES, ["BLOB", "DOUBLE[]"], "DOUBLE[]"),
    ("strata_quantiles_cdf", _cdf_py, _DOUBLES, ["BLOB", "DOUBLE[]"], "DOUBLE[]"),
    ("strata_quantiles_rank", _rank_py, pa.float64(), ["BLOB", "DOUBLE"], "DOUBLE"),
    ("strata_quantiles_summary", lambda b: str(_sketch(b)), pa.string(), ["BLOB"], "VARCHAR"),
]


def _install(conn: duckdb.DuckDBPyConnection) -> None:
    for name, fn, arrow_type, params, result in _FUNCTIONS:
        create(conn, name, rows(fn, arrow_type, len(params)), params, result)


register(_install)

SKETCH_SPECS: list[FunctionSpec] = [
    *specs(
        "aggregate",
        "sketch",
        {
            "APPROX_COUNT_DISTINCT": "Distinct count with an HLL sketch (lgK 12), as Druid's default.",
            "APPROX_COUNT_DISTINCT_BUILTIN": "Distinct count with an HLL sketch of 2^11 buckets.",
            "APPROX_COUNT_DISTINCT_DS_HLL": "Distinct count with an HLL sketch [lgK, tgtHllType].",
            "APPROX_COUNT_DISTINCT_DS_THETA": "Distinct count with a Theta sketch [size].",
            "APPROX_QUANTILE_DS": "A quantile from a Quantiles sketch [k].",
            "DS_HLL": "An HLL sketch of the values (Base64).",
            "DS_THETA": "A Theta sketch of the values (Base64).",
            "DS_QUANTILES_SKETCH": "A Quantiles sketch of the values (Base64).",
        },
        native=frozenset({"APPROX_COUNT_DISTINCT"}),
    ),
    *specs(
        "scalar",
        "sketch",
        {
            "HLL_SKETCH_ESTIMATE": "Distinct-count estimate of an HLL sketch [round].",
            "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS": "[estimate, lower, upper] of an HLL sketch.",
            "HLL_SKETCH_UNION": "Union of HLL sketches.",
            "HLL_SKETCH_TO_STRING": "A readable summary of an HLL sketch.",
            "THETA_SKETCH_ESTIMATE": "Distinct-count estimate of a Theta sketch.",
            "THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS": "Estimate and bounds of a Theta sketch.",
            "THETA_SKETCH_UNION": "Union of Theta sketches.",
            "THETA_SKETCH_INTERSECT": "Intersection of Theta sketches.",
            "THETA_SKETCH_NOT": "The first Theta sketch minus the others.",
            "DS_GET_QUANTILE": "A quantile of a Quantiles sketch.",
            "DS_GET_QUANTILES": "Quantiles of a Quantiles sketch.",
            "DS_HISTOGRAM": "Histogram of a Quantiles sketch over split points.",
            "DS_CDF": "CDF of a Quantiles sketch over split points.",
            "DS_RANK": "Rank of a value in a Quantiles sketch.",
            "DS_QUANTILE_SUMMARY": "A readable summary of a Quantiles sketch.",
            "DECODE_BASE64_COMPLEX": "A sketch (HLLSketch, thetaSketch, quantilesDoublesSketch) from Base64.",
        },
    ),
]
