"""The registry covers Druid's SQL reference, docs/sql-functions.md is the registry's table, and
unsupported or unknown functions are refused with a 501 naming them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
import sqlglot.errors
from sqlglot import exp

from strata.query.errors import QueryError, QueryUnsupported
from strata.sql.dialect import DIALECT
from strata.sql.expressions import ExpressionWriter
from strata.sql.functions import REGISTRY, check_supported, druid_name, function_kind, to_duckdb
from strata.sql.functions.docs import PAGE, render

# every function heading of Druid's "All Druid SQL functions" page (apache/druid,
# docs/querying/sql-functions.md), and those sql-scalar.md and sql-multivalue-string-functions.md
# list besides (PI, MV_FILTER_REGEX, MV_FILTER_PREFIX)
DRUID_REFERENCE = [
    "ABS",
    "ACOS",
    "ANY_VALUE",
    "APPROX_COUNT_DISTINCT",
    "APPROX_COUNT_DISTINCT_BUILTIN",
    "APPROX_COUNT_DISTINCT_DS_HLL",
    "APPROX_COUNT_DISTINCT_DS_THETA",
    "APPROX_QUANTILE",
    "APPROX_QUANTILE_DS",
    "APPROX_QUANTILE_FIXED_BUCKETS",
    "ARRAY",
    "ARRAY_AGG",
    "ARRAY_APPEND",
    "ARRAY_CONCAT",
    "ARRAY_CONCAT_AGG",
    "ARRAY_CONTAINS",
    "ARRAY_LENGTH",
    "ARRAY_OFFSET",
    "ARRAY_OFFSET_OF",
    "ARRAY_ORDINAL",
    "ARRAY_ORDINAL_OF",
    "ARRAY_OVERLAP",
    "SCALAR_IN_ARRAY",
    "ARRAY_PREPEND",
    "ARRAY_SLICE",
    "ARRAY_TO_MV",
    "ARRAY_TO_STRING",
    "ASIN",
    "ATAN",
    "ATAN2",
    "AVG",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "BITWISE_AND",
    "BITWISE_COMPLEMENT",
    "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS",
    "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE",
    "BITWISE_OR",
    "BITWISE_SHIFT_LEFT",
    "BITWISE_SHIFT_RIGHT",
    "BITWISE_XOR",
    "BLOOM_FILTER",
    "BLOOM_FILTER_TEST",
    "BTRIM",
    "CASE",
    "CAST",
    "CEIL",
    "CHAR_LENGTH",
    "CHARACTER_LENGTH",
    "COALESCE",
    "CONCAT",
    "CONTAINS_STRING",
    "COS",
    "COT",
    "COUNT",
    "CUME_DIST",
    "CURRENT_DATE",
    "CURRENT_TIMESTAMP",
    "DATE_TRUNC",
    "DECODE_BASE64_COMPLEX",
    "DECODE_BASE64_UTF8",
    "DEGREES",
    "DENSE_RANK",
    "DIV",
    "DS_CDF",
    "DS_GET_QUANTILE",
    "DS_GET_QUANTILES",
    "DS_HISTOGRAM",
    "DS_HLL",
    "DS_QUANTILE_SUMMARY",
    "DS_QUANTILES_SKETCH",
    "DS_RANK",
    "DS_THETA",
    "DS_TUPLE_DOUBLES",
    "DS_TUPLE_DOUBLES_INTERSECT",
    "DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE",
    "DS_TUPLE_DOUBLES_NOT",
    "DS_TUPLE_DOUBLES_UNION",
    "EARLIEST",
    "EARLIEST_BY",
    "EXP",
    "EXTRACT",
    "FIRST_VALUE",
    "FLOOR",
    "GREATEST",
    "GROUPING",
    "HLL_SKETCH_ESTIMATE",
    "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS",
    "HLL_SKETCH_TO_STRING",
    "HLL_SKETCH_UNION",
    "HUMAN_READABLE_BINARY_BYTE_FORMAT",
    "HUMAN_READABLE_DECIMAL_BYTE_FORMAT",
    "HUMAN_READABLE_DECIMAL_FORMAT",
    "ICONTAINS_STRING",
    "IPV4_MATCH",
    "IPV4_PARSE",
    "IPV4_STRINGIFY",
    "IPV6_MATCH",
    "JSON_KEYS",
    "JSON_MERGE",
    "JSON_OBJECT",
    "JSON_PATHS",
    "JSON_QUERY",
    "JSON_QUERY_ARRAY",
    "JSON_VALUE",
    "LAG",
    "LAST_VALUE",
    "LATEST",
    "LATEST_BY",
    "LEAD",
    "LEAST",
    "LEFT",
    "LENGTH",
    "LISTAGG",
    "LN",
    "LOG10",
    "LOOKUP",
    "LOWER",
    "LPAD",
    "LTRIM",
    "MAX",
    "MILLIS_TO_TIMESTAMP",
    "MIN",
    "MOD",
    "MV_APPEND",
    "MV_CONCAT",
    "MV_CONTAINS",
    "MV_FILTER_NONE",
    "MV_FILTER_ONLY",
    "MV_LENGTH",
    "MV_OFFSET",
    "MV_OFFSET_OF",
    "MV_ORDINAL",
    "MV_ORDINAL_OF",
    "MV_OVERLAP",
    "MV_PREPEND",
    "MV_SLICE",
    "MV_TO_ARRAY",
    "MV_TO_STRING",
    "NTILE",
    "NULLIF",
    "NVL",
    "PARSE_JSON",
    "PARSE_LONG",
    "PERCENT_RANK",
    "POSITION",
    "POWER",
    "RADIANS",
    "RANK",
    "REGEXP_EXTRACT",
    "REGEXP_LIKE",
    "REGEXP_REPLACE",
    "REPEAT",
    "REPLACE",
    "REVERSE",
    "RIGHT",
    "ROUND",
    "ROW_NUMBER",
    "RPAD",
    "RTRIM",
    "SAFE_DIVIDE",
    "SIN",
    "SQRT",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "STRING_AGG",
    "STRING_FORMAT",
    "STRING_TO_ARRAY",
    "STRING_TO_MV",
    "STRLEN",
    "STRPOS",
    "SUBSTR",
    "SUBSTRING",
    "SUM",
    "TAN",
    "TDIGEST_GENERATE_SKETCH",
    "TDIGEST_QUANTILE",
    "TEXTCAT",
    "THETA_SKETCH_ESTIMATE",
    "THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS",
    "THETA_SKETCH_INTERSECT",
    "THETA_SKETCH_NOT",
    "THETA_SKETCH_UNION",
    "TIME_CEIL",
    "TIME_EXTRACT",
    "TIME_FLOOR",
    "TIME_FORMAT",
    "TIME_IN_INTERVAL",
    "TIME_PARSE",
    "TIME_SHIFT",
    "TIMESTAMP_TO_MILLIS",
    "TIMESTAMPADD",
    "TIMESTAMPDIFF",
    "TO_JSON_STRING",
    "TRIM",
    "TRUNC",
    "TRUNCATE",
    "TRY_PARSE_JSON",
    "UPPER",
    "VAR_POP",
    "VAR_SAMP",
    "VARIANCE",
    "PI",
    "MV_FILTER_REGEX",
    "MV_FILTER_PREFIX",
]

# what Strata refuses: extensions outside its scope, and features it does not have
OUT_OF_SCOPE = {
    "APPROX_QUANTILE",  # druid-histogram
    "BLOOM_FILTER",  # druid-bloom-filter
    "BLOOM_FILTER_TEST",  # druid-bloom-filter
    "TDIGEST_GENERATE_SKETCH",  # druid-tdigestsketch
    "TDIGEST_QUANTILE",  # druid-tdigestsketch
}


def test_registry_is_druids_reference() -> None:
    assert sorted(set(DRUID_REFERENCE) - set(REGISTRY)) == []
    assert sorted(set(REGISTRY) - set(DRUID_REFERENCE)) == []


def test_only_out_of_scope_functions_are_refused() -> None:
    refused = {name for name, spec in REGISTRY.items() if spec.unsupported is not None}
    assert refused == OUT_OF_SCOPE
    assert all(REGISTRY[name].unsupported for name in refused)  # each says why


def test_docs_page_is_the_registry_table() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), "run: python -m strata.sql.functions"


def test_every_name_reads_back_as_itself() -> None:
    """Each name parses to a node the rewrite finds under that name (or an alias of it)."""
    aliases = {
        "CHAR_LENGTH": "LENGTH",
        "CHARACTER_LENGTH": "LENGTH",
        "LTRIM": "TRIM",
        "RTRIM": "TRIM",
        "SUBSTR": "SUBSTRING",
        "TRUNC": "TRUNCATE",
        "VARIANCE": "VAR_SAMP",
        "NVL": "COALESCE",
        "POSITION": "STRPOS",
    }
    syntax = {"CASE", "CAST", "EXTRACT", "ARRAY", "PI", "CURRENT_DATE", "CURRENT_TIMESTAMP", "POSITION"}
    for name in sorted(set(REGISTRY) - syntax):
        node = _parse_call(name)
        if isinstance(node, exp.Window):
            node = node.this
        assert druid_name(node) in (name, aliases.get(name)), name


def _parse_call(name: str) -> exp.Expr:
    """The call with the first argument count sqlglot accepts for it."""
    for args in ("a, b", "a", "a, b, c", ""):
        try:
            return sqlglot.parse_one(f"SELECT {name}({args})", dialect=DIALECT).expressions[0]
        except sqlglot.errors.ParseError:
            continue
    raise AssertionError(f"{name} does not parse")


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("SELECT APPROX_QUANTILE(a, 0.5)", "APPROX_QUANTILE"),
        ("SELECT COUNT(*) FROM t WHERE BLOOM_FILTER_TEST(a, 'x')", "BLOOM_FILTER_TEST"),
        ("SELECT TDIGEST_QUANTILE(a, 0.5)", "TDIGEST_QUANTILE"),
        ("SELECT NO_SUCH_FUNCTION(a)", "NO_SUCH_FUNCTION"),
    ],
)
def test_refused_by_name_with_501(sql: str, name: str) -> None:
    tree = sqlglot.parse_one(sql, dialect=DIALECT)
    with pytest.raises(QueryUnsupported, match=rf"\[{name}\]") as caught:
        check_supported(tree)
    assert caught.value.status == 501
    with pytest.raises(QueryUnsupported):
        to_duckdb(tree, None)


def test_supported_statement_passes() -> None:
    sql = (
        "SELECT TIME_FLOOR(__time, 'PT1H'), COUNT(*), RANK() OVER (ORDER BY COUNT(*) DESC) FROM t GROUP BY 1"
    )
    check_supported(sqlglot.parse_one(sql, dialect=DIALECT))


# statements whose syntax is not NAME(args)
_SYNTAX_SAMPLES = {
    "CASE": "SELECT CASE WHEN a = 1 THEN 'x' END",
    "CAST": "SELECT CAST(a AS BIGINT)",
    "DATE_TRUNC": "SELECT DATE_TRUNC('DAY', __time)",
    "EXTRACT": "SELECT EXTRACT(HOUR FROM __time)",
    "CURRENT_TIMESTAMP": "SELECT CURRENT_TIMESTAMP",
    "CURRENT_DATE": "SELECT CURRENT_DATE",
    "POSITION": "SELECT POSITION('a' IN b)",
    "ARRAY": "SELECT ARRAY[1, 2]",
    "PI": "SELECT PI",
    "TRIM": "SELECT TRIM(BOTH 'x' FROM a)",
}
_ARGUMENTS = ("a", "a, 'PT1H'", "a, 2", "a, 'b', 'c'", "a, 2, 3", "", "__time, 'PT1H'")


def _native_writer_handles(name: str) -> bool:
    """Whether the native planner's expression writer writes some call of `name` (a bad argument
    is still a call it knows)."""
    statements = (
        [_SYNTAX_SAMPLES[name]] if name in _SYNTAX_SAMPLES else [f"SELECT {name}({a})" for a in _ARGUMENTS]
    )
    for sql in statements:
        try:
            node = sqlglot.parse_one(sql, dialect=DIALECT).expressions[0]
        except sqlglot.errors.ParseError:
            continue
        try:
            ExpressionWriter(0).write(node)
        except QueryUnsupported:
            continue
        except QueryError:
            return True
        return True
    return False


def test_native_flags_match_the_native_writer() -> None:
    """A scalar function is marked native exactly when strata.sql.expressions writes it."""
    wrong = [
        name
        for name, spec in REGISTRY.items()
        if spec.kind == "scalar" and spec.native != _native_writer_handles(name)
    ]
    assert wrong == []


def test_every_supported_function_has_a_test() -> None:
    """Each supported function is called by some test of this folder (besides this file)."""
    folder = Path(__file__).parent
    text = "".join(
        p.read_text(encoding="utf-8") for p in folder.glob("test_*.py") if p.name != Path(__file__).name
    )
    untested = [n for n, s in REGISTRY.items() if s.unsupported is None and not re.search(rf"\b{n}\b", text)]
    assert untested == []


@pytest.mark.parametrize(
    "sql",
    [  # Druid's quidem simpleJoinHint.iq and unnest.iq, and SQL's operators sqlglot reads as calls
        "select /*+ use_merge_join(w1, w2) */ w1.cityName from wikipedia w1",
        "SELECT x FROM wikipedia w1 CROSS JOIN UNNEST(MV_TO_ARRAY(w1.d)) AS u(x)",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u) AND (a = 1 OR NOT b = 2) AND a IN (SELECT b FROM u)",
        "SELECT a FROM t WHERE a IS DISTINCT FROM b AND a IS TRUE AND a LIKE 'x%' AND a BETWEEN 1 AND 2",
    ],
)
def test_syntax_is_not_a_function_call(sql: str) -> None:
    check_supported(sqlglot.parse_one(sql, dialect=DIALECT))


def test_function_kind() -> None:
    tree = sqlglot.parse_one(
        "SELECT EARLIEST(a), DS_HLL(b), UPPER(c), RANK() OVER (ORDER BY a), x", dialect=DIALECT
    )
    calls = [node.this if isinstance(node, exp.Window) else node for node in tree.expressions]
    assert [function_kind(node) for node in calls] == ["aggregate", "aggregate", "scalar", "window", None]
