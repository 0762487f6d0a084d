"""Druid's numeric functions in DuckDB: Java's integer arithmetic, bit operations and formats."""

from __future__ import annotations

from sqlglot import exp

from strata.query.errors import invalid
from strata.query.expressions.typed import java_long
from strata.sql.functions.fragments import arguments, duck, kind, sql_of, typed
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs


def _call(template: str, result: str | None = None, arity: tuple[int, int] = (1, 1)) -> Rewrite:
    """A rewrite filling `{0}`, `{1}`, ... with the arguments; `result` types it (None: as the
    first argument)."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        low, high = arity
        if not low <= len(args) <= high:
            raise invalid("Function needs %d to %d arguments, got %d", low, high, len(args))
        out = duck(template.format(*(sql_of(a) for a in args)))
        return typed(out, result or (kind(args[0]) if args else None) or "DOUBLE")

    return rewrite


def _integral(node: exp.Expr) -> bool:
    return all(kind(a) == "BIGINT" for a in arguments(node))


def _round(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    digits = sql_of(args[1]) if len(args) > 1 else "0"
    if kind(args[0]) == "BIGINT":  # a LONG rounds to tens, hundreds, ... and stays LONG
        return typed(duck(f"CAST(round({sql_of(args[0])}, {digits}) AS BIGINT)"), "BIGINT")
    return typed(duck(f"round(CAST({sql_of(args[0])} AS DOUBLE), {digits})"), "DOUBLE")


def _truncate(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    digits = sql_of(args[1]) if len(args) > 1 else "0"
    value = sql_of(args[0])
    if kind(args[0]) == "BIGINT":
        return typed(
            duck(f"CAST(trunc(CAST({value} AS DOUBLE) / pow(10, -{digits})) * pow(10, -{digits}) AS BIGINT)"),
            "BIGINT",
        )
    # Druid's TRUNCATE of a double: (double) (long) (x * 10^digits) / 10^digits, Java's narrowing
    # (TruncateOperatorConversion): NaN truncates to 0, an infinity to Long.MAX_VALUE's scale
    factor = f"pow(10.0, {digits})"
    return typed(
        duck(f"(CAST({java_long(f'CAST({value} AS DOUBLE) * {factor}')} AS DOUBLE) / {factor})"), "DOUBLE"
    )


def _mod(node: exp.Expr, ctx: Context) -> exp.Expr:
    a, b = arguments(node)
    if _integral(node):
        return typed(duck(f"{sql_of(a)} % {sql_of(b)}"), "BIGINT")
    return typed(duck(f"fmod(CAST({sql_of(a)} AS DOUBLE), CAST({sql_of(b)} AS DOUBLE))"), "DOUBLE")


def divide(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """Druid's `/`: two LONGs divide as Java longs (truncating), else as doubles."""
    if kind(a) == "BIGINT" and kind(b) == "BIGINT":
        return typed(duck(f"{sql_of(a)} // {sql_of(b)}"), "BIGINT")
    return typed(duck(f"CAST({sql_of(a)} AS DOUBLE) / {sql_of(b)}"), "DOUBLE")


def _safe_divide(node: exp.Expr, ctx: Context) -> exp.Expr:
    a, b = arguments(node)
    quotient = divide(a, b)
    return typed(
        duck(f"(CASE WHEN {sql_of(b)} = 0 THEN NULL ELSE {sql_of(quotient)} END)"), kind(quotient) or "DOUBLE"
    )


def _div(node: exp.Expr, ctx: Context) -> exp.Expr:
    a, b = arguments(node)
    return typed(
        duck(
            f"CAST(trunc(CAST({sql_of(a)} AS DOUBLE) / {sql_of(b)}) AS BIGINT)"
            if not _integral(node)
            else f"{sql_of(a)} // {sql_of(b)}"
        ),
        "BIGINT",
    )


def _floor_ceil(fn: str) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        value: exp.Expr = node.this
        if kind(value) == "BIGINT":
            return value
        return typed(duck(f"{fn}(CAST({sql_of(value)} AS DOUBLE))"), "DOUBLE")

    return rewrite


def _human(kind_name: str) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = arguments(node)
        precision = sql_of(args[1]) if len(args) > 1 else "2"
        return typed(duck(f"strata_human_readable({sql_of(args[0])}, {precision}, '{kind_name}')"), "VARCHAR")

    return rewrite


NUMERIC: dict[str, Rewrite] = {
    "ABS": _call("abs({0})"),
    "ACOS": _call("acos({0})", "DOUBLE"),
    "ASIN": _call("asin({0})", "DOUBLE"),
    "ATAN": _call("atan({0})", "DOUBLE"),
    "ATAN2": _call("atan2({0}, {1})", "DOUBLE", (2, 2)),
    "COS": _call("cos({0})", "DOUBLE"),
    "COT": _call("cot({0})", "DOUBLE"),
    "SIN": _call("sin({0})", "DOUBLE"),
    "TAN": _call("tan({0})", "DOUBLE"),
    "DEGREES": _call("degrees({0})", "DOUBLE"),
    "RADIANS": _call("radians({0})", "DOUBLE"),
    "EXP": _call("exp({0})", "DOUBLE"),
    "LN": _call("ln({0})", "DOUBLE"),
    "LOG10": lambda node, ctx: typed(duck(f"log10({sql_of(arguments(node)[-1])})"), "DOUBLE"),  # Log(10, x)
    "SQRT": _call("sqrt({0})", "DOUBLE"),
    "POWER": _call("pow(CAST({0} AS DOUBLE), {1})", "DOUBLE", (2, 2)),
    "PI": _call("pi()", "DOUBLE", (0, 0)),
    "CEIL": _floor_ceil("ceil"),
    "FLOOR": _floor_ceil("floor"),
    "ROUND": _round,
    "TRUNCATE": _truncate,
    "TRUNC": _truncate,
    "MOD": _mod,
    "DIV": _div,
    "SAFE_DIVIDE": _safe_divide,
    "BITWISE_AND": _call("(CAST({0} AS BIGINT) & CAST({1} AS BIGINT))", "BIGINT", (2, 2)),
    "BITWISE_OR": _call("(CAST({0} AS BIGINT) | CAST({1} AS BIGINT))", "BIGINT", (2, 2)),
    "BITWISE_XOR": _call("xor(CAST({0} AS BIGINT), CAST({1} AS BIGINT))", "BIGINT", (2, 2)),
    "BITWISE_COMPLEMENT": _call("(~CAST({0} AS BIGINT))", "BIGINT"),
    "BITWISE_SHIFT_LEFT": _call("(CAST({0} AS BIGINT) << CAST({1} AS BIGINT))", "BIGINT", (2, 2)),
    "BITWISE_SHIFT_RIGHT": _call("(CAST({0} AS BIGINT) >> CAST({1} AS BIGINT))", "BIGINT", (2, 2)),
    "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS": _call("strata_double_to_long_bits(CAST({0} AS DOUBLE))", "BIGINT"),
    "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE": _call("strata_long_bits_to_double(CAST({0} AS BIGINT))", "DOUBLE"),
    "HUMAN_READABLE_BINARY_BYTE_FORMAT": _human("binary"),
    "HUMAN_READABLE_DECIMAL_BYTE_FORMAT": _human("decimal_byte"),
    "HUMAN_READABLE_DECIMAL_FORMAT": _human("decimal"),
}

NUMERIC_SPECS: list[FunctionSpec] = specs(
    "scalar",
    "numeric",
    {
        "ABS": "Absolute value.",
        "ACOS": "Arc cosine.",
        "ASIN": "Arc sine.",
        "ATAN": "Arc tangent.",
        "ATAN2": "Arc tangent of y/x.",
        "COS": "Cosine.",
        "COT": "Cotangent.",
        "SIN": "Sine.",
        "TAN": "Tangent.",
        "DEGREES": "Radians to degrees.",
        "RADIANS": "Degrees to radians.",
        "EXP": "e to the power of x.",
        "LN": "Natural logarithm.",
        "LOG10": "Base-10 logarithm.",
        "SQRT": "Square root.",
        "POWER": "x to the power of y.",
        "PI": "The constant pi.",
        "CEIL": "Smallest integral value not below x; CEIL(timestamp TO unit) rounds a timestamp up.",
        "FLOOR": "Largest integral value not above x; FLOOR(timestamp TO unit) rounds a timestamp down.",
        "ROUND": "Rounds to a number of decimal digits (half away from zero).",
        "TRUNCATE": "Truncates to a number of decimal digits.",
        "TRUNC": "Alias of TRUNCATE.",
        "MOD": "Remainder of x / y (sign of x, as Java).",
        "DIV": "Integer division, truncating.",
        "SAFE_DIVIDE": "x / y, null when y is 0.",
        "BITWISE_AND": "x & y on LONGs.",
        "BITWISE_OR": "x | y on LONGs.",
        "BITWISE_XOR": "x ^ y on LONGs.",
        "BITWISE_COMPLEMENT": "~x on a LONG.",
        "BITWISE_SHIFT_LEFT": "x << y on LONGs.",
        "BITWISE_SHIFT_RIGHT": "x >> y on LONGs (arithmetic).",
        "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS": "The IEEE 754 bits of a DOUBLE as a LONG.",
        "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE": "The DOUBLE whose IEEE 754 bits are a LONG.",
        "HUMAN_READABLE_BINARY_BYTE_FORMAT": "A byte count in IEC units (KiB, MiB, ...).",
        "HUMAN_READABLE_DECIMAL_BYTE_FORMAT": "A byte count in SI units (KB, MB, ...).",
        "HUMAN_READABLE_DECIMAL_FORMAT": "A number with an SI suffix (K, M, ...).",
    },
    native=frozenset({"ABS", "SQRT", "EXP", "LN", "CEIL", "FLOOR", "POWER", "ROUND", "DIV", "MOD"}),
)
