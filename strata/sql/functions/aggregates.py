"""Druid's aggregate functions in DuckDB.

EARLIEST/LATEST take the value at the least/greatest `__time` of the rows aggregated (of the
table the value's columns come from), null or not, as Druid's first/last aggregators; a
`maxBytesPerValue` truncates strings (counted in characters). ARRAY_AGG/STRING_AGG with DISTINCT
sort their values, as Druid's sets do, and refuse a result past their size in bytes (default
1024) as Druid does, measured as Druid estimates its accumulator (`_checked`); a TIMESTAMP is
gathered as epoch milliseconds, a DOUBLE printed as Java prints it. COUNT(DISTINCT)
is exact here (Druid's default is approximate: an HLL sketch); APPROX_COUNT_DISTINCT and the
sketch aggregates are in `sketches`.
"""

from __future__ import annotations

from sqlglot import exp

from strata.query.errors import invalid
from strata.sql.functions.element_order import positions
from strata.sql.functions.fragments import (
    TIME,
    aggregate_filter,
    arguments,
    duck,
    kind,
    number_value,
    sql_of,
    text_of,
    typed,
)
from strata.sql.functions.other import cast
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs


def _time_of(value: exp.Expr, ctx: Context) -> exp.Expr:
    """`__time` of the table `value` reads: unqualified when it names none, or names an UNNEST
    (whose rows take the time of the row unnested, as in Druid)."""
    column = value.find(exp.Column)
    table = column.table if column is not None else ""
    return exp.column(TIME, table=None if not table or table in ctx.timeless else table, quoted=True)


def _truncated(value: exp.Expr, size: exp.Expr | None) -> str:
    limit = number_value(size, "EARLIEST/LATEST", "maxBytesPerValue") if size is not None else None
    if limit is None or kind(value) != "VARCHAR":
        return sql_of(value)
    return f"left({sql_of(value)}, {int(limit)})"


def _first_last(last: bool, by: bool) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        if not args:
            raise invalid("Aggregate needs an argument")
        value = args[0]
        size = args[2] if by and len(args) > 2 else (args[1] if not by and len(args) > 1 else None)
        if not by and not ctx.has_time:  # no timestamp to order by: the first value met, as Druid
            text = f"{'last' if last else 'first'}({_truncated(value, size)}){aggregate_filter(ctx)}"
            return typed(duck(text), kind(value) or "VARCHAR")
        time = args[1] if by else _time_of(value, ctx)
        if kind(time) == "VARCHAR":
            raise invalid("EARLIEST_BY/LATEST_BY need a TIMESTAMP as their second argument")
        fn, key = ("arg_max_null", _last_key(sql_of(time), node)) if last else ("arg_min_null", sql_of(time))
        text = f"{fn}({_truncated(value, size)}, {key}){aggregate_filter(ctx)}"
        return typed(duck(text), kind(value) or "VARCHAR")

    return rewrite


def _last_key(time: str, node: exp.Expr) -> str:
    """What LATEST orders by: the time, then the position of each element unnested in the rows
    read (`element_order`), so of one time's rows it keeps the last Druid reads, as its last
    aggregators do (`time >= lastTime`); DuckDB's arg_max keeps the first of equal keys."""
    elements = positions(node)
    if not elements:
        return time
    fields = ", ".join(f"'p{i}': {p.sql(dialect='duckdb')}" for i, p in enumerate(elements))
    return f"if({time} IS NULL, NULL, {{'t': {time}, {fields}}})"


def _any_value(node: exp.Expr, ctx: Context) -> exp.Expr:
    """The group's first value, null or not: Druid's any aggregators keep the first row they
    read, a null too (`NumericAnyAggregator`, `StringAnyAggregator`); DuckDB's any_value would
    skip it."""
    args = arguments(node)
    size = args[1] if len(args) > 1 else None
    return typed(
        duck(f"first({_truncated(args[0], size)}){aggregate_filter(ctx)}"), kind(args[0]) or "VARCHAR"
    )


def _distinct_arg(node: exp.Expr) -> tuple[exp.Expr, bool]:
    value = node.this
    if isinstance(value, exp.Distinct):
        return value.expressions[0], True
    return value, False


DEFAULT_AGG_BYTES = 1024  # Druid's maxSizeBytes of ARRAY_AGG and STRING_AGG
_FIXED_BYTES = {"BIGINT": 8, "INTEGER": 8, "DOUBLE": 8, "FLOAT": 8, "BOOLEAN": 8, "TIMESTAMP": 8}
_ELEMENT_TYPES = {"BIGINT": "LONG", "INTEGER": "LONG", "BOOLEAN": "LONG", "TIMESTAMP": "LONG",
                  "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE", "VARCHAR": "STRING"}  # fmt: skip


def _size(size: exp.Expr | None, name: str) -> int:
    """The aggregate's size in bytes: a literal (Druid requires one), 1024 when absent."""
    if size is None:
        return DEFAULT_AGG_BYTES
    if not isinstance(size, exp.Literal) or size.is_string or not str(size.this).isdigit():
        raise invalid(
            "Function [%s] needs a literal size in bytes, got [%s]", name, size.sql(dialect="druid")
        )
    return int(size.this)


def _checked(values: str, element: str | None, size: int) -> str:
    """`values` (a list) unless Druid's estimate of its accumulator passes `size` bytes, then an
    error as Druid's: 5 bytes for the array, 1 per element, 8 per number, 4 plus its UTF-8 bytes
    per string."""
    each = _FIXED_BYTES.get(element or "")
    inner = str(each) if each is not None else '(4 + strlen(CAST("__e" AS VARCHAR)))'
    estimate = (
        f"(5 + len({values}) + coalesce(list_sum(list_transform({values}, "
        f'lambda "__e": CASE WHEN "__e" IS NULL THEN 0 ELSE {inner} END)), 0))'
    )
    kind = f"ARRAY<{_ELEMENT_TYPES.get(element or '', 'STRING')}>"
    message = (
        f"'Exceeded memory usage when aggregating type [{kind}], size [' || {estimate} || "
        f"'] is larger than max [{size}]'"
    )
    return f"(CASE WHEN {estimate} > {size} THEN error({message}) ELSE {values} END)"


def _array_agg(node: exp.Expr, ctx: Context) -> exp.Expr:
    value, distinct = _distinct_arg(node)
    element = kind(value)
    item = f"epoch_ms({sql_of(value)})" if element == "TIMESTAMP" else sql_of(value)  # Druid's LONG
    if distinct:
        gathered = f"list_sort(list(DISTINCT {item}){aggregate_filter(ctx)}, 'ASC', 'NULLS FIRST')"
    else:
        gathered = f"list({item}){aggregate_filter(ctx)}"
    result = {"TIMESTAMP": "BIGINT[]", "BIGINT": "BIGINT[]", "DOUBLE": "DOUBLE[]"}.get(
        element or "", "VARCHAR[]"
    )
    return typed(duck(_checked(gathered, element, _size(node.meta.get("size"), "ARRAY_AGG"))), result)


def _array_concat_agg(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    value, distinct = (
        (args[0].expressions[0], True) if isinstance(args[0], exp.Distinct) else (args[0], False)
    )
    flat = f"flatten(list({sql_of(value)}){aggregate_filter(ctx)})"
    # no array at all (no rows, or only null arrays) is null, as Druid's fold never ran
    none = f"count({sql_of(value)}){aggregate_filter(ctx)} = 0"
    if not distinct:
        return typed(duck(f"(CASE WHEN {none} THEN NULL ELSE {flat} END)"), "VARCHAR[]")
    nulls = f"(CASE WHEN list_count({flat}) < len({flat}) THEN [NULL] ELSE [] END)"
    distinct_flat = f"list_concat({nulls}, list_sort(list_distinct({flat})))"
    return typed(duck(f"(CASE WHEN {none} THEN NULL ELSE {distinct_flat} END)"), "VARCHAR[]")


def _string_agg(node: exp.Expr, ctx: Context) -> exp.Expr:
    # no separator: the values are concatenated without one, as Druid documents; a number is
    # joined with as its text (Druid's STRING_AGG takes any literal as the separator)
    if isinstance(node, exp.Anonymous):  # LISTAGG(expr[, separator[, size]])
        args = list(node.expressions)
        value, distinct = (
            (args[0].expressions[0], True) if isinstance(args[0], exp.Distinct) else (args[0], False)
        )
        separator = args[1] if len(args) > 1 else exp.Literal.string("")
        size = args[2] if len(args) > 2 else None
    else:
        value, distinct = _distinct_arg(node)
        separator = node.args.get("separator") or exp.Literal.string("")
        size = node.args.get("on_overflow")
    # Druid joins a TIMESTAMP's epoch milliseconds
    text = f"CAST(epoch_ms({sql_of(value)}) AS VARCHAR)" if kind(value) == "TIMESTAMP" else text_of(value)
    # the non-null values, as Druid's accumulator holds them; no value at all is null
    kept = f" FILTER (WHERE {text} IS NOT NULL{'' if ctx.filter is None else f' AND ({ctx.filter})'})"
    gathered = f"list_sort(list(DISTINCT {text}){kept})" if distinct else f"list({text}){kept}"
    checked = _checked(gathered, "VARCHAR", _size(size, "STRING_AGG"))
    joined = (
        f"(CASE WHEN len({checked}) = 0 THEN NULL ELSE array_to_string({checked}, {text_of(separator)}) END)"
    )
    return typed(duck(joined), "VARCHAR")


def _sum(node: exp.Expr, ctx: Context) -> exp.Expr:
    """A LONG sum stays a BIGINT (DuckDB widens it to HUGEINT)."""
    value = node.this
    total = f"sum({sql_of(value)}){aggregate_filter(ctx)}"
    if kind(value) == "BIGINT" and not isinstance(value, exp.Distinct):
        return typed(duck(f"CAST({total} AS BIGINT)"), "BIGINT")
    if ctx.filter is None:
        return node
    return typed(duck(f"{node.sql(dialect='duckdb')}{aggregate_filter(ctx)}"), kind(value) or "DOUBLE")


def _bits(fn: str) -> Rewrite:
    """BIT_AND/OR/XOR as Druid plans them: over the rows whose argument is not null (a column as
    read, an expression once cast to LONG), a fold of `bitwiseAnd/Or/Xor(acc, value)` from 0 with
    each value cast to LONG as Druid casts it (a string that is no number adds nothing); no such
    row is null. So BIT_AND is 0 whatever the values: its fold starts from 0."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        argument = arguments(node)[0]
        value = cast(exp.Cast(this=argument, to=exp.DataType.build("BIGINT")), ctx)
        counted = sql_of(argument if isinstance(argument, exp.Column) else value)
        folded = "0" if fn == "bit_and" else f"coalesce({fn}({sql_of(value)}){aggregate_filter(ctx)}, 0)"
        text = f"CAST((CASE WHEN count({counted}){aggregate_filter(ctx)} > 0 THEN {folded} END) AS BIGINT)"
        return typed(duck(text), "BIGINT")

    return rewrite


def _count(node: exp.Expr, ctx: Context) -> exp.Expr:
    """COUNT(DISTINCT x) is an HLL estimate when the statement asks for approximation."""
    value = node.this
    if ctx.approximate_count_distinct and isinstance(value, exp.Distinct) and len(value.expressions) == 1:
        from strata.sql.functions.sketches import approximate_distinct

        return approximate_distinct(value.expressions[0], ctx)
    if ctx.filter is None:
        return node
    return typed(duck(f"{node.sql(dialect='duckdb')}{aggregate_filter(ctx)}"), "BIGINT")


AGGREGATES: dict[str, Rewrite] = {
    "COUNT": _count,
    "SUM": _sum,
    "EARLIEST": _first_last(False, False),
    "LATEST": _first_last(True, False),
    "EARLIEST_BY": _first_last(False, True),
    "LATEST_BY": _first_last(True, True),
    "ANY_VALUE": _any_value,
    "ARRAY_AGG": _array_agg,
    "ARRAY_CONCAT_AGG": _array_concat_agg,
    "STRING_AGG": _string_agg,
    "LISTAGG": _string_agg,
    "BIT_AND": _bits("bit_and"),
    "BIT_OR": _bits("bit_or"),
    "BIT_XOR": _bits("bit_xor"),
}

AGGREGATE_SPECS: list[FunctionSpec] = specs(
    "aggregate",
    "aggregation",
    {
        "COUNT": "Counts rows, or non-null values; COUNT(DISTINCT) is exact here.",
        "SUM": "Sum.",
        "MIN": "Minimum.",
        "MAX": "Maximum.",
        "AVG": "Average.",
        "ANY_VALUE": "Any value of the group (strings truncated to maxBytesPerValue characters).",
        "EARLIEST": "The value at the earliest __time (strings truncated to maxBytesPerValue).",
        "LATEST": "The value at the latest __time (strings truncated to maxBytesPerValue).",
        "EARLIEST_BY": "The value at the earliest of a timestamp expression.",
        "LATEST_BY": "The value at the latest of a timestamp expression.",
        "ARRAY_AGG": "The values as an array ([DISTINCT] sorted).",
        "ARRAY_CONCAT_AGG": "The concatenation of array values ([DISTINCT] sorted).",
        "STRING_AGG": "The non-null values joined by a separator ([DISTINCT] sorted).",
        "LISTAGG": "Alias of STRING_AGG.",
        "BIT_AND": "Bitwise AND of LONG values, folded from 0 as in Druid: 0 over any non-null value.",
        "BIT_OR": "Bitwise OR of LONG values.",
        "BIT_XOR": "Bitwise XOR of LONG values.",
        "GROUPING": "Which grouping-set columns a row aggregates over.",
        "STDDEV": "Alias of STDDEV_SAMP (druid-stats).",
        "STDDEV_POP": "Population standard deviation (druid-stats).",
        "STDDEV_SAMP": "Sample standard deviation (druid-stats).",
        "VARIANCE": "Alias of VAR_SAMP (druid-stats).",
        "VAR_POP": "Population variance (druid-stats).",
        "VAR_SAMP": "Sample variance (druid-stats).",
        "BLOOM_FILTER": "A Bloom filter of the values.",
        "TDIGEST_GENERATE_SKETCH": "A T-Digest sketch of the values.",
        "TDIGEST_QUANTILE": "A quantile from a T-Digest sketch of the values.",
        "APPROX_QUANTILE": "Approximate quantile with the approximate-histogram aggregator.",
    },
    native=frozenset({"COUNT", "SUM", "MIN", "MAX", "AVG", "ANY_VALUE", "EARLIEST", "LATEST"}),
    unsupported={
        "BLOOM_FILTER": "needs the druid-bloom-filter extension, outside Strata's scope",
        "TDIGEST_GENERATE_SKETCH": "needs the druid-tdigestsketch extension, outside Strata's scope",
        "TDIGEST_QUANTILE": "needs the druid-tdigestsketch extension, outside Strata's scope",
        "APPROX_QUANTILE": "needs the druid-histogram extension, outside Strata's scope "
        "(use APPROX_QUANTILE_DS)",
    },
)
