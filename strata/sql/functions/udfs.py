"""Python functions DuckDB calls where it has no equivalent of a Druid function.

`install` also installs the native engine's own functions (Druid's time floors and ISO parsing,
HLL sketches), so one definition of those rules serves both paths.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
from duckdb.func import ARROW, DEFAULT, SPECIAL

from strata.query import sketch_functions, sql_functions
from strata.query.java_text import java_double


def rows(fn: Callable[..., Any], out_type: pa.DataType, arity: int) -> Callable[..., pa.Array]:
    """An Arrow UDF of `arity` columns applying `fn` to each row (null in, null out)."""

    def run(*columns: pa.Array) -> pa.Array:
        values = [c.to_pylist() for c in columns]
        out = [None if any(v is None for v in row) else fn(*row) for row in zip(*values, strict=True)]
        return pa.array(out, out_type)

    # DuckDB reads the parameter count from the signature
    fixed: list[Callable[..., pa.Array]] = [
        lambda: run(),
        lambda a: run(a),
        lambda a, b: run(a, b),
        lambda a, b, c: run(a, b, c),
        lambda a, b, c, d: run(a, b, c, d),
        lambda a, b, c, d, e: run(a, b, c, d, e),
        lambda a, b, c, d, e, f: run(a, b, c, d, e, f),
    ]
    return fixed[arity]


def double_to_long_bits(value: float) -> int:
    return int(struct.unpack(">q", struct.pack(">d", value))[0])


def long_bits_to_double(value: int) -> float:
    return float(struct.unpack(">d", struct.pack(">q", value))[0])


_UNITS = {
    "binary": (1024, ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]),
    "decimal_byte": (1000, ["B", "KB", "MB", "GB", "TB", "PB", "EB"]),
    "decimal": (1000, ["", "K", "M", "G", "T", "P", "E"]),
}


def human_readable(value: int, precision: int, style: str) -> str:
    """Druid's HUMAN_READABLE_* formats: whole numbers below the first unit print as they are."""
    base, units = _UNITS[style]
    number = float(value)
    sign = "-" if number < 0 else ""
    number = abs(number)
    if number < base:
        text = str(int(number))
        return f"{sign}{text}{(' ' + units[0]) if units[0] else ''}"
    i = 0
    while number >= base and i < len(units) - 1:
        number /= base
        i += 1
    return f"{sign}{number:.{precision}f} {units[i]}"


_SCALARS: list[tuple[str, Callable[..., Any], list[Any], str, pa.DataType]] = [
    ("strata_double_to_long_bits", double_to_long_bits, ["DOUBLE"], "BIGINT", pa.int64()),
    ("strata_long_bits_to_double", long_bits_to_double, ["BIGINT"], "DOUBLE", pa.float64()),
    ("strata_human_readable", human_readable, ["BIGINT", "INTEGER", "VARCHAR"], "VARCHAR", pa.string()),
    ("strata_java_double", java_double, ["DOUBLE"], "VARCHAR", pa.string()),
]
_EXTRA: list[Callable[[duckdb.DuckDBPyConnection], None]] = []


def register(installer: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
    """Adds a family's own installer (sketches, strings) to `install`."""
    _EXTRA.append(installer)


def create(
    conn: duckdb.DuckDBPyConnection,
    name: str,
    fn: Callable[..., Any],
    params: list[Any],
    result: str,
    *,
    may_return_null: bool = False,
) -> None:
    """Registers an Arrow UDF once per connection. DuckDB refuses a null from a UDF registered with
    its default null handling ("InvalidInputException"): one that answers null for some values
    (`may_return_null`, a `rows` UDF, which maps a null in to a null out) is registered with
    DuckDB's special null handling."""
    nulls = SPECIAL if may_return_null else DEFAULT
    try:
        conn.create_function(name, fn, params, result, type=ARROW, null_handling=nulls, side_effects=False)
    except duckdb.Error as e:
        if "already" not in str(e).lower():
            raise


def install(conn: duckdb.DuckDBPyConnection) -> None:
    """Everything `to_duckdb`'s SQL calls, on one connection."""
    try:
        sql_functions.install(conn)
    except duckdb.Error as e:  # installed before on this connection (every function at once)
        if "already" not in str(e).lower():
            raise
    sketch_functions.install(conn)
    for name, fn, params, result, arrow_type in _SCALARS:
        create(conn, name, rows(fn, arrow_type, len(params)), params, result)
    for installer in _EXTRA:
        installer(conn)
