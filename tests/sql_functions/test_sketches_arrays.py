"""DataSketches and array functions through `to_duckdb`.

Sketch oracles: below their capacity (an HLL sketch's list mode, a Theta sketch under k entries, a
Quantiles sketch under k items) DataSketches sketches are exact, so small tables have exact
answers computed here in Python. Array answers are the ones Druid's documentation publishes
(docs/querying/sql-functions.md of apache/druid, the `array-example` and `mvd-example` tables).
"""

from __future__ import annotations

import math

import pytest

from tests.sql_functions.kit import one, run

VALUES = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0]
NAMES = ["a", "b", "c", "a", "d", "e", "b", "f", None, "g"]
T = {
    "t": "SELECT * FROM (VALUES "
    + ", ".join(
        f"({v}, {'NULL' if n is None else repr(n)}, {i % 2})"
        for i, (v, n) in enumerate(zip(VALUES, NAMES, strict=True))
    )
    + ") t(v, name, side)"
}
DISTINCT = len({n for n in NAMES if n is not None})


def test_distinct_count_sketches() -> None:  # sql-aggregations.md: APPROX_COUNT_DISTINCT*, DS_*
    sql = (
        'SELECT APPROX_COUNT_DISTINCT("name"), APPROX_COUNT_DISTINCT_DS_HLL("name"), '
        'APPROX_COUNT_DISTINCT_DS_THETA("name"), APPROX_COUNT_DISTINCT_BUILTIN("name"),'
        ' HLL_SKETCH_ESTIMATE(DS_HLL("name"), true), THETA_SKETCH_ESTIMATE(DS_THETA("name")), COUNT(DISTINCT "name")'
        ' FROM "t"'
    )
    assert run(sql, T) == [(DISTINCT, DISTINCT, DISTINCT, DISTINCT, DISTINCT, DISTINCT, DISTINCT)]


def test_empty_group_counts_zero() -> None:  # sql-aggregations.md: the functions' default is 0
    assert one('SELECT APPROX_COUNT_DISTINCT_DS_HLL("name") FROM "t" WHERE "v" > 100', T) == 0


def test_sketch_set_operations() -> None:  # sql-scalar.md: HLL_SKETCH_UNION, THETA_SKETCH_*
    left = {n for i, n in enumerate(NAMES) if n is not None and i % 2 == 0}
    right = {n for i, n in enumerate(NAMES) if n is not None and i % 2 == 1}
    sql = (
        'SELECT HLL_SKETCH_ESTIMATE(HLL_SKETCH_UNION(DS_HLL("name") FILTER(WHERE "side" = 0),'
        ' DS_HLL("name") FILTER(WHERE "side" = 1)), true),'
        ' THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(DS_THETA("name") FILTER(WHERE "side" = 0),'
        ' DS_THETA("name") FILTER(WHERE "side" = 1))),'
        ' THETA_SKETCH_ESTIMATE(THETA_SKETCH_NOT(DS_THETA("name"), DS_THETA("name") FILTER(WHERE "side" = 1))),'
        ' THETA_SKETCH_ESTIMATE(THETA_SKETCH_UNION(1024, DS_THETA("name") FILTER(WHERE "side" = 0),'
        ' DS_THETA("name") FILTER(WHERE "side" = 1))) FROM "t"'
    )
    assert run(sql, T) == [(len(left | right), len(left & right), len(left - right), len(left | right))]


def test_error_bounds_and_summaries() -> None:  # sql-functions.md: *_WITH_ERROR_BOUNDS, *_TO_STRING
    sql = (
        'SELECT HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL("name"), 1),'
        ' THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_THETA("name", 4096), 1),'
        ' HLL_SKETCH_TO_STRING(DS_HLL("name")), DS_QUANTILE_SUMMARY(DS_QUANTILES_SKETCH("v")) FROM "t"'
    )
    bounds, theta, hll_text, quantiles_text = run(sql, T)[0]
    assert bounds[0] <= bounds[2] and bounds[1] <= bounds[0] and round(bounds[0]) == DISTINCT
    assert (
        theta
        == f'{{"estimate":{float(DISTINCT)},"highBound":{float(DISTINCT)},"lowBound":{float(DISTINCT)},"numStdDev":1}}'
    )
    assert "HLL" in hll_text and "Quantiles" in quantiles_text


def test_quantiles_sketch_exact_below_k() -> None:  # sql-functions.md: APPROX_QUANTILE_DS, DS_*
    ordered = sorted(VALUES)
    n = len(ordered)
    sql = (
        'SELECT APPROX_QUANTILE_DS("v", 0.5, 128), DS_GET_QUANTILE(DS_QUANTILES_SKETCH("v"), 0.5),'
        ' DS_GET_QUANTILES(DS_QUANTILES_SKETCH("v"), 0.1, 0.9), DS_RANK(DS_QUANTILES_SKETCH("v"), 4),'
        ' DS_CDF(DS_QUANTILES_SKETCH("v"), 2, 5), DS_HISTOGRAM(DS_QUANTILES_SKETCH("v"), 2, 5) FROM "t"'
    )
    median, median2, deciles, rank, cdf, histogram = run(sql, T)[0]

    # the inclusive rule: the smallest item whose rank (items <= it) reaches q * n
    def quantile(q: float) -> float:
        return next(x for x in ordered if sum(y <= x for y in ordered) >= math.ceil(q * n))

    assert median == median2 == quantile(0.5)
    assert deciles == [quantile(0.1), quantile(0.9)]
    assert math.isclose(rank, sum(x <= 4 for x in ordered) / n)
    below2, below5 = sum(x <= 2 for x in ordered), sum(x <= 5 for x in ordered)
    assert [round(c * n) for c in cdf] == [below2, below5, n]
    assert [round(h) for h in histogram] == [below2, below5 - below2, n - below5]


ARRAYS = {
    "array-example": "SELECT * FROM (VALUES "
    "('row1', ['a', 'b'], [1, NULL, 3], [1.1, 2.2, NULL]),"
    "('row2', [NULL, 'b'], NULL, [999, NULL, 5.5]),"
    "('row3', []::VARCHAR[], [1, 2, 3], [NULL, 2.2, 1.1]),"
    "('row4', ['a', 'b'], [1, 2, 3], []::DOUBLE[]),"
    "('row5', NULL, []::BIGINT[], NULL)) t(label, arrayString, arrayLong, arrayDouble)"
}


def _column(sql: str) -> list[object]:
    return [r[0] for r in run(sql + ' FROM "array-example" ORDER BY "label"', ARRAYS)]


def test_array_functions() -> None:  # sql-functions.md: ARRAY_* over array-example
    assert _column("SELECT ARRAY_APPEND(\"arrayString\",'c')") == [
        ["a", "b", "c"],
        [None, "b", "c"],
        ["c"],
        ["a", "b", "c"],
        None,
    ]
    assert _column("SELECT ARRAY_PREPEND('c', \"arrayString\")") == [
        ["c", "a", "b"],
        ["c", None, "b"],
        ["c"],
        ["c", "a", "b"],
        None,
    ]
    assert _column('SELECT ARRAY_CONCAT("arrayLong", "arrayDouble")') == [
        [1, None, 3, 1.1, 2.2, None],
        None,
        [1, 2, 3, None, 2.2, 1.1],
        [1, 2, 3],
        None,
    ]
    assert _column('SELECT ARRAY_CONTAINS("arrayLong", 2)') == [False, None, True, True, False]
    assert _column('SELECT ARRAY_CONTAINS("arrayLong", ARRAY[1,2,3])') == [False, None, True, True, False]
    assert _column('SELECT ARRAY_LENGTH("arrayDouble")') == [3, 3, 3, 0, None]
    assert _column('SELECT ARRAY_OFFSET("arrayLong", 2)') == [3, None, 3, 3, None]
    assert _column('SELECT ARRAY_OFFSET_OF("arrayLong", 3)') == [2, None, 2, 2, None]
    assert _column('SELECT ARRAY_ORDINAL("arrayLong", 2)') == [None, None, 2, 2, None]
    assert _column('SELECT ARRAY_ORDINAL_OF("arrayLong", 3)') == [3, None, 3, 3, None]
    assert _column('SELECT ARRAY_SLICE("arrayDouble", 0, 2)') == [
        [1.1, 2.2],
        [999, None],
        [None, 2.2],
        [None, None],
        None,
    ]
    assert _column('SELECT ARRAY_TO_MV("arrayDouble")') == [
        ["1.1", "2.2", None],
        ["999.0", None, "5.5"],
        [None, "2.2", "1.1"],
        [],
        None,
    ]
    assert _column("SELECT ARRAY_TO_STRING(\"arrayDouble\", '')") == [
        "1.12.2null",
        "999.0null5.5",
        "null2.21.1",
        "",
        None,
    ]
    assert _column("SELECT ARRAY_OVERLAP(\"arrayString\", ARRAY['b'])") == [True, True, False, True, None]
    assert one("SELECT SCALAR_IN_ARRAY(36, ARRAY[1, 36])") is True


# the `kttm_nested` values the JSON examples of sql-functions.md show, as JSON text
KTTM = {
    "kttm_nested": "SELECT * FROM (VALUES "
    '(\'{"type":"PercentClear","percentage":55}\', '
    '\'{"continent":"Asia","country":"Taiwan","region":"Taipei City","city":"Taipei"}\'),'
    '(\'{"type":"PercentClear","percentage":80}\', '
    '\'{"continent":"Asia","country":"Thailand","region":"Bangkok","city":"Bangkok"}\')) t(event, geo_ip)'
}


def test_timestamps_in_an_array_are_epoch_milliseconds() -> None:
    # Druid's runtime type of a TIMESTAMP is LONG: ARRAY_AGG(__time) and ARRAY[TIMESTAMP ...] are
    # both LONG arrays (qaAggFuncs array_agg_timestamp_test001: the ARRAY_CONTAINS below is true)
    times = {
        "t": "SELECT * FROM (VALUES (TIMESTAMP '2020-01-01 01:01:01'), (TIMESTAMP '2020-02-01 01:01:01')) v(__time)"
    }
    both = "ARRAY[TIMESTAMP '2020-01-01 01:01:01.000', TIMESTAMP '2020-02-01 01:01:01.000']"
    sql = f"SELECT ARRAY_CONTAINS(ARRAY_AGG(__time), {both}), ARRAY_CONTAINS(ARRAY_AGG(__time), ARRAY[TIMESTAMP '1970-01-01 01:01:01']) FROM t"
    assert run(sql, times) == [(True, False)]
    assert one("SELECT ARRAY[TIMESTAMP '1970-01-01 00:00:01', 2]") == [1000, 2]
    # array_agg_timestamp_test001.std.iq 13-16: a TIMESTAMP is found among them by its milliseconds
    sought = "ARRAY_AGG(__time), TIMESTAMP '2020-02-01 01:01:01'"
    missing = "ARRAY_AGG(__time), TIMESTAMP '2020-03-01 01:01:01'"
    sql = f"SELECT ARRAY_OFFSET_OF({sought}), ARRAY_ORDINAL_OF({sought}), ARRAY_OFFSET_OF({missing}) FROM t"
    assert run(sql, times) == [(1, 2, None)]


def test_json_functions() -> None:  # sql-functions.md: JSON_* over kttm_nested
    sql = (
        "SELECT JSON_VALUE(PARSE_JSON(geo_ip), '$.city' RETURNING VARCHAR),"
        " JSON_QUERY(PARSE_JSON(event), '$.percentage'), JSON_QUERY_ARRAY(PARSE_JSON(event), '$.percentage'),"
        " JSON_KEYS(PARSE_JSON(event), '$.') FROM kttm_nested"
        " WHERE JSON_VALUE(PARSE_JSON(geo_ip), '$.continent') = 'Asia'"
    )
    assert run(sql, KTTM) == [
        ("Taipei", "55", ["55"], ["type", "percentage"]),
        ("Bangkok", "80", ["80"], ["type", "percentage"]),
    ]
    sql = "SELECT JSON_MERGE(PARSE_JSON(event), '{\"example_string\": 123}') FROM kttm_nested LIMIT 1"
    assert one(sql, KTTM) == '{"type":"PercentClear","percentage":55,"example_string":123}'
    paths = "SELECT ARRAY_CONCAT_AGG(DISTINCT JSON_PATHS(PARSE_JSON(geo_ip))) FROM kttm_nested"
    assert one(paths, KTTM) == ["$.city", "$.continent", "$.country", "$.region"]
    # one object's paths in the order of Druid's HashSet of them (StructuredDataProcessor)
    one_row = "SELECT JSON_PATHS(PARSE_JSON(geo_ip)) FROM kttm_nested LIMIT 1"
    assert one(one_row, KTTM) == ["$.country", "$.continent", "$.city", "$.region"]
    gus = '{"name":"Gus","email":"gus_cat@example.com","type":"Pet"}'
    assert one(f"SELECT PARSE_JSON('{gus}')") == gus
    assert one(f"SELECT TRY_PARSE_JSON('{gus[:-1]},x:x}}')") is None
    assert one("SELECT TO_JSON_STRING(ARRAY['error', 'layer'])") == '["error","layer"]'


# delays by airline and origin, shaped as the tuple-sketch examples of sql-functions.md: AA flies
# from both SFO and LAX, DH only from SFO, B6 from neither
DELAYS = {
    "flights": "SELECT * FROM (VALUES ('AA','SFO',10.0,1.0),('AA','LAX',5.0,2.0),('AA','SFO',7.0,3.0),"
    "('DH','SFO',93.0,4.0),('B6','JFK',8.0,5.0)) t(airline, Origin, ArrDelayMinutes, DepDelayMinutes)"
}


def test_tuple_sketches() -> None:  # sql-functions.md: DS_TUPLE_DOUBLES*
    sfo = 'DS_TUPLE_DOUBLES("airline", "ArrDelayMinutes") FILTER(WHERE "Origin" = \'SFO\')'
    lax = 'DS_TUPLE_DOUBLES("airline", "ArrDelayMinutes") FILTER(WHERE "Origin" = \'LAX\')'
    sql = (
        'SELECT "airline", DS_TUPLE_DOUBLES("airline", "ArrDelayMinutes", "DepDelayMinutes"),'
        ' DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES("airline", "ArrDelayMinutes", "DepDelayMinutes")),'
        f" DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_INTERSECT({sfo}, {lax})),"
        f" DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_UNION({sfo}, {lax})),"
        f" DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES_NOT({sfo}, {lax}))"
        ' FROM "flights" GROUP BY 1 ORDER BY 1'
    )
    assert run(sql, DELAYS) == [
        ("AA", 1.0, [22.0, 6.0], [22.0], [22.0], [0.0]),
        ("B6", 1.0, [8.0, 5.0], [0.0], [0.0], [0.0]),
        ("DH", 1.0, [93.0, 4.0], [0.0], [93.0], [93.0]),
    ]


MVD = {
    "mvd-example": "SELECT * FROM (VALUES ('row1', ['t1','t2','t3']), ('row2', ['t3','t4','t5']),"
    " ('row3', ['t5','t6','t7']), ('row4', NULL)) t(label, tags)"
}


def _mv(sql: str) -> list[object]:
    return [r[0] for r in run(sql + ' FROM "mvd-example" ORDER BY "label"', MVD)]


def test_multi_value_functions() -> None:  # sql-functions.md: MV_* over mvd-example (row4 has none)
    # a multi-value result prints as Druid prints it: one value as a string, several as JSON
    assert _mv('SELECT MV_APPEND("tags", "label")')[0] == '["t1","t2","t3","row1"]'
    assert _mv('SELECT MV_PREPEND("label", "tags")')[0] == '["row1","t1","t2","t3"]'
    assert _mv('SELECT MV_CONCAT("tags", "tags")')[0] == '["t1","t2","t3","t1","t2","t3"]'
    assert _mv('SELECT MV_LENGTH(MV_CONCAT("tags", "tags"))')[0] == 6  # inside a call it stays a list
    assert _mv("SELECT MV_CONTAINS(\"tags\", 't3')") == [True, True, False, False]
    assert _mv("SELECT MV_FILTER_NONE(\"tags\", ARRAY['t1', 't3'])")[:3] == [
        "t2",
        '["t4","t5"]',
        '["t5","t6","t7"]',
    ]
    assert _mv("SELECT MV_FILTER_ONLY(\"tags\", ARRAY['t1', 't3'])")[:3] == ['["t1","t3"]', "t3", None]
    assert _mv('SELECT MV_LENGTH("tags")')[0] == 3
    assert _mv('SELECT MV_OFFSET("tags", 2)') == ["t3", "t5", "t7", None]
    assert _mv("SELECT MV_OFFSET_OF(\"tags\", 't3')") == [2, 0, None, None]
    assert _mv('SELECT MV_ORDINAL("tags", 3)') == ["t3", "t5", "t7", None]
    assert _mv("SELECT MV_ORDINAL_OF(\"tags\", 't3')") == [3, 1, None, None]
    assert _mv("SELECT MV_OVERLAP(\"tags\", ARRAY['t1', 't3'])") == [True, True, False, False]
    assert _mv('SELECT MV_SLICE("tags", 1, 3)') == ['["t2","t3"]', '["t4","t5"]', '["t6","t7"]', None]
    assert _mv('SELECT MV_TO_ARRAY("tags")')[0] == ["t1", "t2", "t3"]
    assert _mv("SELECT MV_TO_STRING(\"tags\", ' ')")[0] == "t1 t2 t3"
    assert one("SELECT STRING_TO_MV('123 Rose Lane', '\\s+')") == '["123","Rose","Lane"]'
    assert one("SELECT STRING_TO_ARRAY('a,b', ',')") == ["a", "b"]


def test_multi_value_regex_and_prefix_filters() -> None:  # sql-multivalue-string-functions.md
    assert _mv("SELECT MV_FILTER_REGEX(\"tags\", '^t[13]$')")[:3] == ['["t1","t3"]', "t3", None]
    assert _mv("SELECT MV_FILTER_PREFIX(\"tags\", 't5')")[:3] == [None, "t5", "t5"]


# Druid's own tests of the multi-value filters (apache/druid
# sql/src/test/quidem/org.apache.druid.quidem.SqlQuidemTest/mv_filter.iq): a plain string is one value
MV_FILTER_CASES = [
    ("SELECT MV_FILTER_REGEX(STRING_TO_MV('abc,def,abd', ','), '^ab')", '["abc","abd"]'),
    ("SELECT MV_FILTER_PREFIX(STRING_TO_MV('apple,banana,apricot', ','), 'ap')", '["apple","apricot"]'),
    ("SELECT MV_FILTER_PREFIX(STRING_TO_MV('a,b,c', ','), 'a')", "a"),
    ("SELECT MV_FILTER_REGEX(STRING_TO_MV('foo,bar,baz', ','), '^x')", None),
    ("SELECT MV_FILTER_PREFIX(STRING_TO_MV('foo,bar,baz', ','), 'x')", None),
    ("SELECT MV_FILTER_PREFIX('apple', 'a')", "apple"),
    ("SELECT MV_FILTER_PREFIX('apple', 'b')", None),
    ("SELECT MV_FILTER_REGEX('apple', '^a.*')", "apple"),
    ("SELECT MV_FILTER_REGEX('apple', 'a$')", None),
    ("SELECT MV_FILTER_PREFIX(null, 'a')", None),
    ("SELECT MV_FILTER_REGEX(null, '^a.*')", None),
]


@pytest.mark.parametrize(("sql", "expected"), MV_FILTER_CASES)
def test_druid_mv_filter_quidem_cases(sql: str, expected: str | None) -> None:
    assert one(sql) == expected


def test_json_value_returning_an_array() -> None:  # sql-json-functions.md: RETURNING <type> ARRAY
    nested = {"t": "SELECT * FROM (VALUES ('[[true, false, null], [1, 2, null], [0.5, \"x\"], 7]')) t(j)"}
    sql = (
        "SELECT JSON_VALUE(PARSE_JSON(j), '$[1]' RETURNING BIGINT ARRAY),"
        " JSON_VALUE(PARSE_JSON(j), '$[0]' RETURNING BOOLEAN ARRAY),"
        " JSON_VALUE(PARSE_JSON(j), '$[2]' RETURNING VARCHAR ARRAY),"
        " JSON_VALUE(PARSE_JSON(j), '$[3]' RETURNING BIGINT ARRAY), JSON_VALUE(PARSE_JSON(j), '$[1]') FROM t"
    )
    assert run(sql, nested) == [([1, 2, None], [1, 0, None], ["0.5", "x"], None, None)]
    unnested = "SELECT u FROM t, UNNEST(JSON_VALUE(PARSE_JSON(j), '$[1]' RETURNING BIGINT ARRAY)) AS x(u)"
    assert sorted(run(unnested, nested), key=str) == [(1,), (2,), (None,)]


def test_json_object() -> None:  # sql-json-functions.md: JSON_OBJECT with KEY ... VALUE pairs
    sql = (
        "SELECT JSON_OBJECT(KEY 'continent' VALUE JSON_VALUE(PARSE_JSON(geo_ip), '$.continent'),"
        " KEY 'percentage' VALUE JSON_QUERY(PARSE_JSON(event), '$.percentage')) FROM kttm_nested LIMIT 1"
    )
    assert one(sql, KTTM) == '{"continent":"Asia","percentage":55}'


def test_decode_base64_complex_reads_a_sketch() -> None:  # sql-scalar.md: DECODE_BASE64_COMPLEX
    image = run('SELECT DS_HLL("name") FROM "t"', T)[0][0]
    sql = f"SELECT HLL_SKETCH_ESTIMATE(DECODE_BASE64_COMPLEX('HLLSketch', '{image}'), true)"
    assert one(sql) == DISTINCT
