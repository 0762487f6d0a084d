"""The function registry: every function of Druid's SQL reference, by name, with its status.

`REGISTRY` maps a name to its `FunctionSpec`; `REWRITES` maps it to the rewrite making DuckDB
compute it (functions DuckDB computes as written have none).
"""

from __future__ import annotations

from sqlglot import exp

from strata.sql.functions.aggregates import AGGREGATE_SPECS, AGGREGATES
from strata.sql.functions.arrays import ARRAY_SPECS, ARRAYS
from strata.sql.functions.histograms import HISTOGRAM_SPECS, HISTOGRAMS
from strata.sql.functions.json_functions import JSON_REWRITES, JSON_SPECS
from strata.sql.functions.numeric import NUMERIC, NUMERIC_SPECS
from strata.sql.functions.other import OPERATOR_KEYS as _OTHER_OPERATORS
from strata.sql.functions.other import OTHER, OTHER_SPECS
from strata.sql.functions.sketches import SKETCH_SPECS, SKETCHES
from strata.sql.functions.spec import FunctionSpec, Rewrite
from strata.sql.functions.strings import OPERATOR_KEYS as _STRING_OPERATORS
from strata.sql.functions.strings import STRING_SPECS, STRINGS
from strata.sql.functions.time import TIME_REWRITES, TIME_SPECS
from strata.sql.functions.tuples import TUPLE_SPECS, TUPLES
from strata.sql.functions.unsupported import OTHER_UNSUPPORTED
from strata.sql.functions.windows import WINDOW_SPECS

_ALL_SPECS: list[FunctionSpec] = [
    *TIME_SPECS,
    *NUMERIC_SPECS,
    *STRING_SPECS,
    *OTHER_SPECS,
    *OTHER_UNSUPPORTED,
    *AGGREGATE_SPECS,
    *HISTOGRAM_SPECS,
    *SKETCH_SPECS,
    *TUPLE_SPECS,
    *ARRAY_SPECS,
    *JSON_SPECS,
    *WINDOW_SPECS,
]
REGISTRY: dict[str, FunctionSpec] = {}
for _spec in _ALL_SPECS:
    if _spec.name in REGISTRY:
        raise AssertionError(f"function {_spec.name} registered twice")
    REGISTRY[_spec.name] = _spec

REWRITES: dict[str, Rewrite] = {
    **NUMERIC,
    **STRINGS,
    **OTHER,
    **AGGREGATES,
    **HISTOGRAMS,
    **SKETCHES,
    **TUPLES,
    **ARRAYS,
    **JSON_REWRITES,
    **TIME_REWRITES,  # FLOOR/CEIL: time units here, numbers through NUMERIC
}
OPERATOR_KEYS: dict[type[exp.Expr], str] = {**_OTHER_OPERATORS, **_STRING_OPERATORS}

# aggregates whose rewrite places FILTER (WHERE ...) itself (its SQL wraps the aggregate)
FILTERED_BY_REWRITE = frozenset(
    name for name in REWRITES if name in REGISTRY and REGISTRY[name].kind == "aggregate"
)
