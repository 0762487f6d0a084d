"""Druid's SQL function catalog: the registry, and DuckDB rewrites computing Druid's answers.

- `REGISTRY`: name -> `FunctionSpec` (kind, description, status, whether the native planner
  writes it) for every scalar, aggregate and window function of Druid's SQL reference.
- `to_duckdb(tree, zone)`: a copy of a qualified Druid-dialect tree that DuckDB computes as Druid.
- `check_supported(tree)`: a 501 naming any unknown or unsupported function.
- `install(conn)`: the Python functions the rewritten SQL calls.
- `function_kind(node)`: whether a call is a scalar, aggregate or window function.
"""

from strata.sql.functions.registry import REGISTRY
from strata.sql.functions.rewrite import check_supported, druid_name, function_kind, to_duckdb
from strata.sql.functions.spec import FunctionSpec
from strata.sql.functions.udfs import install

__all__ = [
    "REGISTRY",
    "FunctionSpec",
    "check_supported",
    "druid_name",
    "function_kind",
    "install",
    "to_duckdb",
]
