"""Every input error is a 4xx (issue 36, item 4), against a real broker and historicals: the
statements that were 500s (huge LIMITs, impossible timestamps, broken regular expressions, a scan of
the column ""), answered or refused as Druid does; ARRAY_AGG and STRING_AGG in subqueries answered
as DuckDB answers over the raw rows; and a bounded share of the error sweep (bench.hostile.sweep):
SQL functions, native types and expression functions with hostile arguments, never a 5xx."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.hostile import native_templates as templates
from bench.hostile.run import judge, run_requests
from bench.hostile.sweep import sweep_cases
from strata.query import query_types
from strata.query.aggregators.base import _PARSERS as AGGREGATOR_TYPES
from strata.query.extraction_fns import _KINDS as EXTRACTION_TYPES
from strata.query.filters.base import _PARSERS as FILTER_TYPES
from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.historical_query.wiki_http import RawRows

pytestmark = pytest.mark.integration

SWEEP_SAMPLE = 400  # of the sweep's ~12,000 cases per CI run (python -m bench.hostile runs them all)


def shipped(registry: Mapping[str, Any]) -> set[str]:
    """A registry's types, without those other tests registered in this process."""
    return {name for name, made in registry.items() if made.__module__.startswith("strata.")}


def sql(broker: Any, statement: str) -> httpx.Response:
    return httpx.post(broker.url + "/druid/v2/sql", json={"query": statement}, timeout=60)


def native(broker: Any, query: dict[str, Any]) -> httpx.Response:
    return httpx.post(broker.url + "/druid/v2/", json=query, timeout=60)


def refused(resp: httpx.Response, status: int = 400) -> str:
    assert resp.status_code == status, resp.text[:500]
    body = resp.json()
    assert {"error", "errorCode", "persona", "category", "errorMessage", "context"} <= set(body), body
    assert body["error"] != "Unknown exception", body
    message: str = body["errorMessage"]
    return message


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("SELECT page FROM wikipedia LIMIT 18446744073709551616", "LIMIT must be an integer"),
        ("SELECT page FROM wikipedia LIMIT 1e+308", "LIMIT must be an integer"),
        ("SELECT page FROM wikipedia LIMIT 3 OFFSET 18446744073709551616", "OFFSET must be an integer"),
        ("SELECT channel, COUNT(*) FROM wikipedia GROUP BY 1 LIMIT -1", "LIMIT must be an integer"),
        ("SELECT 1e400 FROM wikipedia", "Numeric literal '1e400' out of range"),
        ("SELECT TIMESTAMP '2015-13-45 00:00:00'", "Illegal TIMESTAMP literal '2015-13-45 00:00:00'"),
        (
            "SELECT COUNT(*) FROM wikipedia WHERE __time > TIMESTAMP '2015-13-45 00:00:00'",
            "Illegal TIMESTAMP",
        ),
        ("SELECT COUNT(*) FROM wikipedia WHERE __time < DATE '2015-02-30'", "Illegal DATE literal"),
        ("SELECT REGEXP_EXTRACT(page, '(((((') FROM wikipedia LIMIT 1", "Invalid regular expression [(((((]"),
        ("SELECT COUNT(*) FROM wikipedia WHERE REGEXP_LIKE(page, '[a-')", "Invalid regular expression [[a-]"),
        ("SELECT REGEXP_EXTRACT(p, '(((((') FROM (SELECT page AS p FROM wikipedia LIMIT 5)", "(((((]"),
        ("SELECT MV_ORDINAL_OF() FROM wikipedia", "Invalid arguments to function [MV_ORDINAL_OF]"),
        ("SELECT BIT_XOR() FROM wikipedia", "Invalid arguments to function [BIT_XOR]"),
    ],
)
def test_sql_input_errors_are_400s_naming_the_input(
    cluster: dict[str, Any],  # noqa: F811
    statement: str,
    says: str,
) -> None:
    message = refused(sql(cluster["broker"], statement))
    assert says in message, message


def test_a_number_past_64_bits_answers_as_a_double(cluster: dict[str, Any]) -> None:  # noqa: F811
    """Druid holds 9223372036854775808 as a DECIMAL and computes with it as a DOUBLE."""
    resp = sql(cluster["broker"], "SELECT 9223372036854775808 * 9223372036854775808 AS p")
    assert resp.status_code == 200 and resp.json() == [{"p": float(2**126)}], resp.text


def test_a_java_only_pattern_is_a_501(cluster: dict[str, Any]) -> None:  # noqa: F811
    message = refused(sql(cluster["broker"], "SELECT REGEXP_LIKE(page, '(?<=a)b') FROM wikipedia"), 501)
    assert "RE2" in message


@pytest.mark.parametrize(
    ("flt", "says"),
    [
        ({"type": "regex", "dimension": "page", "pattern": "((("}, "in regex filter"),
        ({"type": "selector", "dimension": "page", "value": "x", "extractionFn": {"type": "regex", "expr": "((("}},
         "in extractionFn [regex]"),
        ({"type": "expression", "expression": "regexp_like(page, '(((')"}, "in function [regexp_like]"),
        ({"type": "search", "dimension": "page", "query": {"type": "regex", "pattern": "((("}}, "((("),
    ],
)  # fmt: skip
def test_native_patterns_are_checked_on_the_broker(
    cluster: dict[str, Any],  # noqa: F811
    flt: dict[str, Any],
    says: str,
) -> None:
    resp = native(cluster["broker"], templates.with_filter(flt))
    message = refused(resp)
    assert "Invalid regular expression" in message and says in message
    assert resp.json()["host"] == cluster["broker"].address  # refused at planning, before any data node


def test_a_scan_of_the_column_named_empty_answers_null(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Path,
) -> None:
    """Druid reads a column no segment has as null; "" is such a column (DuckDB cannot spell it)."""
    query = {"queryType": "scan", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
             "columns": ["", "page"], "filter": {"type": "selector", "dimension": "channel",
                                                 "value": "#ca.wikipedia"}}  # fmt: skip
    for result_format in ("list", "compactedList"):
        resp = native(cluster["broker"], {**query, "resultFormat": result_format})
        assert resp.status_code == 200, resp.text
        events = [e for batch in resp.json() for e in batch["events"]]
        pages = [e["page"] if isinstance(e, dict) else e[1] for e in events]
        blanks = [e[""] if isinstance(e, dict) else e[0] for e in events]
        want = RawRows(wikipedia_sample).rows("SELECT page FROM raw WHERE channel = '#ca.wikipedia'")
        assert sorted(pages) == sorted(p for (p,) in want) and set(blanks) == {None}


def test_array_agg_of_constants_in_subqueries_answers(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Path,
) -> None:
    """Once an ArrowTypeError (Druid's QA statements hit it): arrays typed as strings between stages.
    Sizes past the 1,024 bytes ARRAY_AGG keeps by default where the rows need them, as Druid needs."""
    raw = RawRows(wikipedia_sample)
    broker = cluster["broker"]
    cases = [
        ("SELECT * FROM (SELECT ARRAY_AGG(1, 1000000) AS a FROM wikipedia WHERE channel = '#ca.wikipedia')",
         "SELECT list(1) AS a FROM raw WHERE channel = '#ca.wikipedia'"),
        ("SELECT c FROM (SELECT ARRAY_AGG(DISTINCT 'x') AS c FROM wikipedia)", "SELECT ['x'] AS c"),
        ("SELECT ARRAY_LENGTH(a) AS n FROM (SELECT ARRAY_AGG(1, 1000000) AS a FROM wikipedia)",
         "SELECT count(*) AS n FROM raw"),
        ("SELECT ch, a FROM (SELECT channel AS ch, ARRAY_AGG(DISTINCT 1) AS a FROM wikipedia GROUP BY channel) "
         "ORDER BY ch LIMIT 3", "SELECT DISTINCT channel AS ch, [1] AS a FROM raw ORDER BY ch LIMIT 3"),
        ("SELECT ARRAY_AGG(x) AS a FROM (SELECT ARRAY[1] AS x FROM wikipedia LIMIT 2)", "SELECT [[1], [1]] AS a"),
    ]  # fmt: skip
    for statement, oracle in cases:
        # arrays as JSON arrays, not Druid's default of their text (sqlStringifyArrays)
        resp = httpx.post(broker.url + "/druid/v2/sql", json={"query": statement, "header": True, "typesHeader": True,
                          "context": {"sqlStringifyArrays": False}}, timeout=60)  # fmt: skip
        assert resp.status_code == 200, (statement, resp.text[:600])
        header, *rows = resp.json()
        cur = raw.conn.execute(oracle)
        names = [d[0] for d in cur.description]
        assert rows == [dict(zip(names, r, strict=True)) for r in cur.fetchall()], statement
    header = httpx.post(broker.url + "/druid/v2/sql", json={"query": cases[0][0], "header": True,
                        "typesHeader": True, "sqlTypesHeader": True}, timeout=60).json()[0]  # fmt: skip
    assert header == {"a": {"type": "ARRAY<LONG>", "sqlType": "ARRAY"}}


def test_string_agg_distinct_of_a_long_column_answers(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Path,
) -> None:
    """Druid's STRING_AGG(DISTINCT) gathers the values as strings in a sorted set, then joins them."""
    raw = RawRows(wikipedia_sample)
    for where in ("channel = '#ca.wikipedia'", "countryName = 'Italy'"):
        resp = sql(
            cluster["broker"],
            f"SELECT STRING_AGG(DISTINCT added, '|', 100000) AS s FROM wikipedia WHERE {where}",
        )
        assert resp.status_code == 200, resp.text
        values = sorted(
            {str(v) for (v,) in raw.rows(f"SELECT added FROM raw WHERE {where}") if v is not None}
        )
        assert resp.json() == [{"s": "|".join(values)}]
    grouped = sql(cluster["broker"], "SELECT channel, STRING_AGG(DISTINCT delta, ',', 1000000) AS s FROM wikipedia "
                                     "GROUP BY channel ORDER BY channel LIMIT 2")  # fmt: skip
    assert grouped.status_code == 200, grouped.text


def test_every_native_type_has_a_template_that_answers(cluster: dict[str, Any]) -> None:  # noqa: F811
    """The sweep breaks every type a registry knows: a new type without a template fails here, and a
    template that no longer answers would sweep nothing but refusals."""
    assert set(templates.FILTERS) == shipped(FILTER_TYPES)
    assert set(templates.AGGREGATORS) == shipped(AGGREGATOR_TYPES)
    assert set(templates.EXTRACTION_FNS) == shipped(EXTRACTION_TYPES)
    assert set(templates.QUERIES) == shipped(query_types())
    broker = cluster["broker"]
    for family, found, wrap in templates.FAMILIES:
        for name, template in found.items():
            resp = native(broker, wrap(template))
            if name == "registeredLookup":  # this cluster has no lookups: Druid's refusal naming it
                assert resp.status_code == 400 and templates.UNREGISTERED_LOOKUP in resp.text, resp.text[:300]
                continue
            assert resp.status_code == 200, (family, name, resp.text[:300])


@pytest.mark.timeout(300)
def test_the_error_sweep_never_meets_a_server_error(cluster: dict[str, Any]) -> None:  # noqa: F811
    """A seeded share of every family of the sweep: answered (200) or refused (400/501) with Druid's
    body, never a 5xx, an engine's text, or Unknown exception; the broker well afterwards."""
    cases = sweep_cases()
    rnd = random.Random(36)
    by_family: dict[str, list[Any]] = {}
    for case in cases:
        by_family.setdefault(case.category, []).append(case)
    share = SWEEP_SAMPLE // len(by_family)
    sample = [c for family in by_family.values() for c in rnd.sample(family, min(share, len(family)))]
    outcomes = run_requests(cluster["broker"].url, sample, concurrency=3)
    problems = [str(o) for o in outcomes if o.problem]
    assert not problems, "\n".join(problems[:20])
    assert {o.category for o in outcomes} == set(by_family)
    assert sql(cluster["broker"], "SELECT COUNT(*) AS c FROM wikipedia").json() == [{"c": 39244}]


def test_the_judge_finds_what_it_is_for() -> None:
    """The sweep's verdicts can fail: a 500, an engine's banner, a late answer are each caught."""
    from bench.hostile.request import sql as hostile_sql

    case = hostile_sql("t", "SELECT 1", (200, 400))
    body = {"error": "druidException", "errorCode": "invalidInput", "persona": "USER",
            "category": "INVALID_INPUT", "errorMessage": "x", "context": {}}  # fmt: skip
    assert judge(case, httpx.Response(400, json=body), 0.1) is None
    assert "status 500" in str(judge(case, httpx.Response(500, json=body), 0.1))
    leaked = judge(case, httpx.Response(400, json={**body, "errorMessage": "Binder Error: x"}), 0.1)
    assert "leaks" in str(leaked)
    assert "deadline" in str(judge(case, httpx.Response(200, json=[]), 60.0))
    unknown = {**body, "error": "Unknown exception"}
    assert "Unknown exception" in str(judge(case, httpx.Response(400, json=unknown), 0.1))
