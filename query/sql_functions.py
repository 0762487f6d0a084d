"""Python scalar functions the engine's SQL may call, installed on every engine connection.

Druid's `alphanumeric` and `version` orderings have no SQL equivalent, so filters compare through
these. They run on Arrow batches; the Python loop is per distinct-ish value, which is fine for the
dimension columns they are used on.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pyarrow as pa
from duckdb.func import ARROW, SPECIAL

from query.string_comparators import Comparator, compare_alphanumeric, compare_version

ALPHANUMERIC_CMP = "strata_alphanumeric_cmp"
VERSION_CMP = "strata_version_cmp"


def _arrow_comparator(cmp: Comparator) -> Callable[[pa.Array, pa.Array], pa.Array]:
    def run(left: pa.Array, right: pa.Array) -> pa.Array:
        out = [
            None if a is None or b is None else cmp(a, b)
            for a, b in zip(left.to_pylist(), right.to_pylist(), strict=True)
        ]
        return pa.array(out, pa.int32())

    return run


def install(conn: duckdb.DuckDBPyConnection) -> None:
    for name, cmp in ((ALPHANUMERIC_CMP, compare_alphanumeric), (VERSION_CMP, compare_version)):
        conn.create_function(
            name,
            _arrow_comparator(cmp),
            ["VARCHAR", "VARCHAR"],
            "INTEGER",
            type=ARROW,
            null_handling=SPECIAL,
            side_effects=False,
        )
