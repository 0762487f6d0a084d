"""`to_duckdb`: a Druid-dialect tree rewritten so DuckDB computes Druid's answer, and
`check_supported`: every function of a statement is known and supported, else a 501 naming it.

The walk is post-order: a node's arguments are rewritten first (keeping the planner's `.type`
annotation), then the node itself by its Druid function name.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from strata.query.errors import QueryUnsupported, invalid
from strata.query.filters.sql import values_or_null
from strata.sql.dialect import DIALECT
from strata.sql.functions.element_order import in_row_order
from strata.sql.functions.fragments import TIME, arguments, duck, kind, sql_of, typed, zone_name
from strata.sql.functions.registry import FILTERED_BY_REWRITE, OPERATOR_KEYS, REGISTRY, REWRITES
from strata.sql.functions.spec import Context, Rewrite

log = logging.getLogger(__name__)

# sqlglot classes whose SQL name differs from Druid's
_NAMES: dict[type[exp.Expr], str] = {
    exp.DateTrunc: "DATE_TRUNC",
    exp.TimestampTrunc: "DATE_TRUNC",
    exp.TimestampAdd: "TIMESTAMPADD",
    exp.TimestampDiff: "TIMESTAMPDIFF",
    exp.Pow: "POWER",
    exp.Trunc: "TRUNCATE",
    exp.Log: "LOG10",
    exp.StrPosition: "STRPOS",
    exp.GroupConcat: "STRING_AGG",
    exp.ApproxDistinct: "APPROX_COUNT_DISTINCT",
    exp.AnyValue: "ANY_VALUE",
    exp.Variance: "VAR_SAMP",
    exp.VariancePop: "VAR_POP",
    exp.TryCast: "CAST",
    exp.Array: "ARRAY",
    exp.ArraySize: "ARRAY_LENGTH",
    exp.JSONObject: "JSON_OBJECT",
    exp.JSONValue: "JSON_VALUE",
    exp.Mod: "MOD",
    exp.CurrentTimestamp: "CURRENT_TIMESTAMP",
    exp.CurrentDate: "CURRENT_DATE",
    exp.RegexpLike: "REGEXP_LIKE",
    exp.SafeDivide: "SAFE_DIVIDE",
}
# Func subclasses that are syntax, not functions of the catalog
_SYNTAX = (
    exp.Case, exp.If, exp.Cast, exp.Extract, exp.Paren, exp.Filter, exp.Window, exp.Distinct, exp.Connector,
    exp.Unnest, exp.Exists,
)  # fmt: skip


def druid_name(node: exp.Expr) -> str | None:
    """The Druid SQL function a node calls (None for a node that is no function call)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.Pad):
        return "LPAD" if node.args.get("is_left") else "RPAD"
    for cls, name in _NAMES.items():
        if type(node) is cls:
            return name
    if isinstance(node, (exp.Cast, exp.Case, exp.Extract)):
        return type(node).__name__.upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return None


def function_kind(node: exp.Expr) -> str | None:
    """ "scalar", "aggregate" or "window" for a call of a registered function (Druid's aggregates
    such as EARLIEST or DS_HLL parse as plain calls, so the planner asks here), else None."""
    spec = REGISTRY.get(druid_name(node) or "")
    return None if spec is None else spec.kind


def check_supported(tree: exp.Expr) -> None:
    """Raises QueryUnsupported (HTTP 501) naming the first unknown or unsupported function."""
    for node in tree.walk(prune=lambda n: isinstance(n, exp.Hint)):  # join hints are no calls
        if isinstance(node, exp.Hint):
            continue
        name = druid_name(node)
        if name is None or (isinstance(node, _SYNTAX) and name not in REGISTRY):
            continue
        spec = REGISTRY.get(name)
        if spec is None:
            raise QueryUnsupported(f"Function [{name}] is not supported")
        if spec.unsupported is not None:
            raise QueryUnsupported(f"Function [{name}] is not supported: {spec.unsupported}")


def to_duckdb(
    tree: exp.Expr,
    zone: str | None,
    *,
    now_ms: int | None = None,
    approximate_count_distinct: bool = False,
    schema: Mapping[str, Mapping[str, str]] | None = None,
) -> exp.Expr:
    """A rewritten copy of `tree` whose `.sql(dialect="duckdb")` computes Druid's answer.

    TIMESTAMP values are naive DuckDB TIMESTAMPs holding UTC; `zone` is the statement's
    sqlTimeZone (None: UTC); `now_ms` fixes CURRENT_TIMESTAMP (None: DuckDB's clock);
    `approximate_count_distinct` (the context's useApproximateCountDistinct) makes COUNT(DISTINCT)
    an HLL estimate as in Druid, else it is exact. Rewrites read the planner's type annotation;
    for a tree without one, `schema` (table -> column -> SQL type) lets this module annotate it.
    The connection needs `strata.sql.functions.install`.
    """
    check_supported(tree)
    if schema is not None and not _annotated(tree):
        tree = _annotate(tree, schema)
    has_time = schema is None or any(TIME in columns for columns in schema.values())
    ctx = Context(
        zone_name(zone),
        now_ms,
        approximate_count_distinct=approximate_count_distinct,
        has_time=has_time,
        timeless=frozenset(u.alias for u in tree.find_all(exp.Unnest) if u.alias),
    )
    return _rewrite(tree.copy(), ctx)


def _annotated(tree: exp.Expr) -> bool:
    column = tree.find(exp.Column)
    return column is None or column.type is not None


def _annotate(tree: exp.Expr, schema: Mapping[str, Mapping[str, str]]) -> exp.Expr:
    """The tree qualified and typed over `schema`; as it was when its names do not resolve."""
    tables: dict[str, object] = {name: dict(columns) for name, columns in schema.items()}
    try:
        qualified = qualify(tree.copy(), schema=tables, dialect=DIALECT)
        return annotate_types(qualified, schema=tables, dialect=DIALECT)
    except SqlglotError:
        return tree


def _rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
    if isinstance(node, exp.Hint):
        return node
    if isinstance(node, exp.Filter) and druid_name(node.this) in FILTERED_BY_REWRITE:
        # the rewrite writes the FILTER onto the aggregates inside its SQL
        where = _rewrite(node.expression.this, ctx)
        inner = dataclasses.replace(ctx, filter=where.sql(dialect="duckdb"))
        return _keep_type(node, _rewrite(node.this, inner))
    if ctx.filter is not None and not isinstance(node, exp.Func):
        ctx = dataclasses.replace(ctx, filter=None)  # arguments of the aggregate see no filter
    if isinstance(node, exp.Window):
        return _window(node, ctx)
    if isinstance(node, exp.Unnest):
        return _unnest(node, ctx)
    _rewrite_arguments(node, ctx)
    name = OPERATOR_KEYS.get(type(node)) or druid_name(node) or ""
    rewrite = REWRITES.get(name)
    return node if rewrite is None else _apply(rewrite, name, node, ctx)


def _apply(rewrite: Rewrite, name: str, node: exp.Expr, ctx: Context) -> exp.Expr:
    """A function's rewrite; one that cannot read its arguments (too few, too many, of a shape it
    does not take) is the statement's error, as Druid's validator says so before planning."""
    try:
        return rewrite(node, ctx)
    except (IndexError, ValueError, TypeError, KeyError, AttributeError) as e:
        log.debug("rewrite of %s failed", name, exc_info=True)
        given = len(arguments(node))
        raise invalid("Invalid arguments to function [%s] (%d given): %s", name, given, _reason(e)) from None


def _reason(e: Exception) -> str:
    """What a rewrite's own failure says about the arguments, in the user's terms."""
    if isinstance(e, (IndexError, KeyError)) or "unpack" in str(e):
        return "the number of arguments is not one the function takes"
    return "an argument is not of a type or shape the function takes"


def _rewrite_arguments(node: exp.Expr, ctx: Context, skip: str | None = None) -> None:
    for key, value in list(node.args.items()):
        if key == skip:
            continue
        if isinstance(value, exp.Expr):
            node.set(key, _keep_type(value, _rewrite(value, ctx)))
        elif isinstance(value, list):
            node.set(key, [_keep_type(v, _rewrite(v, ctx)) if isinstance(v, exp.Expr) else v for v in value])


def _window(node: exp.Expr, ctx: Context) -> exp.Expr:
    """`fn(...) OVER (...)`: the function's rewrite applies only while it stays one call that OVER
    can follow; a LONG SUM is cast back to BIGINT around the whole window."""
    _rewrite_arguments(node, ctx, skip="this")
    function = node.this
    _rewrite_arguments(function, ctx)
    name = druid_name(function) or ""
    rewrite = REWRITES.get(name)
    if rewrite is not None and not isinstance(function, exp.Sum):
        rewritten = _apply(rewrite, name, function, ctx)
        if isinstance(rewritten, (exp.AggFunc, exp.Anonymous)):
            node.set("this", rewritten)
    if isinstance(function, exp.Sum) and kind(function.this) == "BIGINT":
        return typed(exp.Cast(this=node, to=exp.DataType.build("BIGINT")), "BIGINT")
    return node


def _unnest(node: exp.Unnest, ctx: Context) -> exp.Expr:
    """`UNNEST(MV_TO_ARRAY(col))` unnests the multi-value column itself, as Druid plans it: a row
    with no value (null or empty) gives one null row, where an empty or null array gives none."""
    multi_value = [druid_name(e) == "MV_TO_ARRAY" for e in node.expressions]
    booleans = [_boolean_array(e) for e in node.expressions]
    _rewrite_arguments(node, ctx)
    node.set(
        "expressions",
        [
            duck(values_or_null(sql_of(e)))
            if mv
            else duck(f"CAST({sql_of(e)} AS BOOLEAN[])")
            if boolean
            else e
            for e, mv, boolean in zip(node.expressions, multi_value, booleans, strict=True)
        ],
    )
    return in_row_order(node)


def _boolean_array(node: exp.Expr) -> bool:
    """Whether `node` is JSON_VALUE(.. RETURNING BOOLEAN ARRAY): its elements, Druid's 1 and 0 in
    the array, unnest as the BOOLEANs Druid's planner types them (printed true / false)."""
    returning = node.args.get("returning") if isinstance(node, exp.JSONValue) else None
    return (
        isinstance(returning, exp.DataType)
        and returning.is_type(exp.DataType.Type.ARRAY)
        and bool(returning.expressions)
        and returning.expressions[0].is_type(exp.DataType.Type.BOOLEAN)
    )


def _keep_type(old: exp.Expr, new: exp.Expr) -> exp.Expr:
    if new is not old and new.type is None and old.type is not None:
        new.type = old.type
    return new
