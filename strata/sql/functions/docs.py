"""docs/sql-functions.md, generated from the registry so the page and the code cannot disagree."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from strata.sql.functions.registry import REGISTRY
from strata.sql.functions.spec import FunctionSpec

PAGE = Path(__file__).resolve().parents[3] / "docs" / "sql-functions.md"

_INTRO = """\
# SQL functions

Every scalar, aggregate and window function of Druid's SQL reference (the pages
`sql-functions.md`, `sql-scalar.md`, `sql-aggregations.md`, `sql-array-functions.md`,
`sql-multivalue-string-functions.md`, `sql-json-functions.md` and `sql-window-functions.md` of
Apache Druid's documentation), with its status in Strata. A statement calling an unsupported or
unknown function is refused with HTTP 501 naming the function.

This page is generated from the function registry (`strata/sql/functions/`) by
`python -m strata.sql.functions`; a test fails when the page and the registry differ.

- **Native**: the native planner writes the function into a native query (the data nodes compute
  it). Every supported function also runs in the broker's DuckDB stage (joins, windows, outer
  queries over subqueries), rewritten to Druid's semantics.
- **Time zones**: functions whose zone defaults to the statement's `sqlTimeZone` (TIME_FLOOR,
  TIME_CEIL, TIME_SHIFT, TIME_EXTRACT, TIME_FORMAT, TIME_PARSE, FLOOR/CEIL(ts TO unit), EXTRACT,
  DATE_TRUNC, TIMESTAMPADD/TIMESTAMPDIFF in months, CAST to DATE, TIMESTAMP literals and strings
  compared with timestamps) honour it; zones are names (`America/Los_Angeles`) or whole-hour
  offsets (`-05:00`).

## Where Strata's answers differ from Druid's

- `COUNT(DISTINCT x)` in the broker's DuckDB stage is exact; Druid's default
  (`useApproximateCountDistinct=true`) is an HLL estimate. `APPROX_COUNT_DISTINCT`,
  `APPROX_COUNT_DISTINCT_DS_HLL` and `_DS_THETA` build real DataSketches sketches (the
  `datasketches` package) over the group's values, so they estimate as Druid does.
- Sketch aggregates (`DS_HLL`, `DS_THETA`, `DS_QUANTILES_SKETCH`) gather the group's values and
  build the sketch in a Python function (DuckDB has no Python aggregates); a sketch value is its
  serialized image in Base64, as Druid prints it. Quantiles sketches are randomised, as in Druid.
- Tuple sketches (`DS_TUPLE_DOUBLES`) are DataSketches tuple sketches with array summaries in
  Strata's own serialization (the Python package has no ArrayOfDoubles sketch): their estimates
  and sums are Druid's, their Base64 images are not.
- `APPROX_COUNT_DISTINCT_BUILTIN` uses an HLL sketch of 2^11 buckets, not Druid's own
  HyperLogLog collector: estimates agree within HLL error, not bit for bit.
- `maxBytesPerValue` (EARLIEST, LATEST, ANY_VALUE) truncates strings to that many characters,
  not UTF-8 bytes. ARRAY_AGG and STRING_AGG keep Druid's size limits (1,024 bytes unless the call
  gives another) and refuse past them with Druid's message.
- A multi-value string a statement returns is a VARCHAR: its one value, or its values as JSON text
  (`["a","b"]`) where Druid's object result formats give an array; stored multi-value columns
  behave as Druid's (a filter matches when any value matches; grouping explodes the values).
- JSON functions (JSON_VALUE, JSON_QUERY, JSON_KEYS, JSON_PATHS, ...) read stored nested
  `COMPLEX<json>` columns and JSON a statement builds (PARSE_JSON, JSON_OBJECT) alike.
- TIME_FORMAT and TIME_PARSE patterns: fractions other than `SSS`, and zone letters in TIME_PARSE,
  are refused; `z` prints the zone database's short name (`PDT`), as Joda does for most zones.
"""


def _row(spec: FunctionSpec) -> str:
    status = "supported" if spec.unsupported is None else f"unsupported: {spec.unsupported}"
    native = "yes" if spec.native else ""
    return f"| `{spec.name}` | {spec.kind} | {status} | {native} | {spec.description} |"


def render() -> str:
    """The whole page."""
    by_family: dict[str, list[FunctionSpec]] = {}
    for spec in REGISTRY.values():
        by_family.setdefault(spec.family, []).append(spec)
    counts = Counter(spec.status for spec in REGISTRY.values())
    lines = [
        _INTRO,
        "## Summary",
        "",
        f"{len(REGISTRY)} functions: {counts['supported']} supported, {counts['unsupported']} unsupported.",
        "",
        "Unsupported, and why:",
        "",
    ]
    reasons = Counter(spec.unsupported for spec in REGISTRY.values() if spec.unsupported is not None)
    lines += [f"- {reason} ({n})" for reason, n in sorted(reasons.items())]
    for family in sorted(by_family):
        lines += [
            "",
            f"## {family[0].upper()}{family[1:]}",
            "",
            "| Function | Kind | Status | Native | Description |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [_row(spec) for spec in sorted(by_family[family], key=lambda s: s.name)]
    return "\n".join(lines) + "\n"
