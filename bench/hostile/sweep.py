"""The error sweep (issue 36, item 4): every SQL function of the registry and every native filter,
aggregator, extraction function, post-aggregator, having spec, query type and expression function,
driven with wrong-typed, null, huge, negative, empty and malformed arguments. Each case may be
answered (200), refused as the user's input (400) or as something Strata does not do (501); a 5xx
is a failure the sweep exists to find.

`sweep_cases(seed)` lists every case, deterministically; CI runs a sample, `python -m bench.hostile`
as many as asked.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from bench.hostile import native_templates as t
from bench.hostile.request import Hostile, native, sql
from strata.query.expressions.functions import FUNCTIONS
from strata.sql.functions.registry import REGISTRY

ANSWERED_OR_REFUSED = (200, 400, 501)
HOSTILE_VALUES: list[Any] = [
    None,
    "",
    "x",
    "(((((",
    "\x00",
    "2015-13-45",
    "PXX",
    "%",
    -1,
    0,
    1.5,
    2**63,
    2**64,
    -(2**63) - 1,
    1e308,
    -1e308,
    True,
    [],
    {},
    ["x", None],
    {"a": 1},
    "x" * 10_000,
]
SQL_ARGUMENTS = [
    "NULL",
    "''",
    "'x'",
    "'((((('",
    "-1",
    "0",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "-1.5",
    "'P1D'",
    "'PXX'",
    "'2015-13-45'",
    "'yyyy-MM-dd'",
    "TIMESTAMP '2015-09-12 00:00:00'",
    "__time",
    "page",
    "added",
    "channel",
    "delta",
    "ARRAY['a', NULL]",
    "ARRAY[1, 2]",
    "'{\"a\": 1}'",
    "'not json'",
    "'$.a'",
    "TRUE",
    "'en'",
    "CAST(NULL AS BIGINT)",
    "'x' || page",
    "added / 0",
    "'%'",
]
EXPRESSION_ARGUMENTS = [
    "null",
    "''",
    "'x'",
    "'((((('",
    "-1",
    "0",
    "9223372036854775807",
    "1e308",
    "-1.5",
    "'P1D'",
    "'PXX'",
    "'2015-13-45'",
    "'yyyy-MM-dd'",
    "__time",
    "page",
    "added",
    "channel",
    "nope",
    "'UTC'",
    "'Mars/Phobos'",
    "'%'",
    "added / 0",
]
CALLS_PER_FUNCTION = 12


def sweep_cases(seed: int = 36) -> list[Hostile]:
    """Every case of the sweep, the same list for the same seed."""
    rnd = random.Random(seed)
    return [*sql_function_cases(rnd), *expression_function_cases(rnd), *native_field_cases()]


def sql_function_cases(rnd: random.Random) -> Iterator[Hostile]:
    """Each SQL function called with random hostile arguments, where its kind may appear."""
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        for _ in range(CALLS_PER_FUNCTION):
            args = ", ".join(rnd.choice(SQL_ARGUMENTS) for _ in range(rnd.randint(0, 4)))
            call = f"{name}({args})"
            if spec.kind == "aggregate":
                statement = rnd.choice(
                    [
                        f"SELECT {call} FROM wikipedia",
                        f"SELECT channel, {call} FROM wikipedia GROUP BY channel LIMIT 3",
                        f"SELECT {call} FROM (SELECT * FROM wikipedia LIMIT 50)",
                    ]
                )
            elif spec.kind == "window":
                statement = (
                    f"SELECT page, {call} OVER (PARTITION BY channel ORDER BY __time) FROM wikipedia LIMIT 3"
                )
            else:
                statement = rnd.choice(
                    [
                        f"SELECT {call}",
                        f"SELECT {call} FROM wikipedia LIMIT 3",
                        f"SELECT COUNT(*) FROM wikipedia WHERE {call} IS NOT NULL",
                        f"SELECT {call}, COUNT(*) FROM wikipedia GROUP BY 1 LIMIT 3",
                    ]
                )
            yield sql(f"sweep: SQL {spec.kind}s", statement, ANSWERED_OR_REFUSED)


def expression_function_cases(rnd: random.Random) -> Iterator[Hostile]:
    """Each native expression function called with random hostile arguments, computed per row."""
    for name in sorted(FUNCTIONS):
        for _ in range(CALLS_PER_FUNCTION):
            args = ", ".join(rnd.choice(EXPRESSION_ARGUMENTS) for _ in range(rnd.randint(0, 4)))
            expression = f"{name}({args})"
            query = (
                t.with_expression(expression)
                if rnd.random() < 0.7
                else t.with_filter({"type": "expression", "expression": expression})
            )
            yield native("sweep: expression functions", query, ANSWERED_OR_REFUSED)


def native_field_cases() -> Iterator[Hostile]:
    """Every field of every template broken with every hostile value (and left out)."""
    for family, templates, wrap in t.FAMILIES:
        for template in templates.values():
            for broken in broken_variants(template):
                yield native(f"sweep: native {family}", wrap(broken), ANSWERED_OR_REFUSED)


def broken_variants(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`template` with one value, anywhere in it, replaced by each hostile value or removed."""
    for path in _paths(template):
        for value in [*HOSTILE_VALUES, _REMOVED]:
            broken = copy.deepcopy(template)
            parent = broken
            for key in path[:-1]:
                parent = parent[key]
            if value is _REMOVED:
                if isinstance(parent, dict):
                    del parent[path[-1]]
                else:
                    parent.pop(path[-1])
            else:
                parent[path[-1]] = value
            yield broken


_REMOVED = object()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, inner in items:
        yield (*prefix, key)
        yield from _paths(inner, (*prefix, key))
