"""Legacy filters with extraction functions, the `extraction` filter and `columnComparison`, on the
historical's HTTP API, against plain Python (Java's string semantics) over the raw sample rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from tests.historical_query.wiki_http import RawRows, druid_json, ingest_hourly, post, query_app

Row = dict[str, Any]


@pytest.fixture(scope="module")
def app(
    tmp_path_factory: pytest.TempPathFactory, wikipedia_sample: Path, wikipedia_index_spec: Path
) -> Starlette:
    return query_app(
        ingest_hourly(tmp_path_factory.mktemp("extraction"), wikipedia_sample, wikipedia_index_spec)
    )


@pytest.fixture(scope="module")
def rows(wikipedia_sample: Path) -> list[Row]:
    raw = RawRows(wikipedia_sample)
    cur = raw.conn.execute("SELECT ms, page, channel, cityName, regionName, countryName, added FROM raw")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def count(app: Starlette, flt: dict[str, Any]) -> int:
    body = {"queryType": "timeseries", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
            "granularity": "all", "filter": flt, "aggregations": [{"type": "count", "name": "c"}]}  # fmt: skip
    return int(druid_json(app, body)[0]["result"]["c"])


def substring(index: int, length: int | None) -> Callable[[str | None], str | None]:
    def fn(v: str | None) -> str | None:
        if v is None or len(v) <= index:
            return None
        return v[index:] if length is None else v[index : index + length]

    return fn


def regex_group(expr: str, index: int) -> Callable[[str | None], str | None]:
    def fn(v: str | None) -> str | None:
        m = None if v is None else re.search(expr, v)
        return v if m is None else m.group(index)

    return fn


def known(value: str | None, wanted: str) -> bool | None:
    """SQL's three-valued equality: unknown (None) when the extracted value is null."""
    return None if value is None else value == wanted


CASES: list[tuple[str, dict[str, Any], Callable[[Row], bool | None]]] = [
    ("selector_substring", {"type": "selector", "dimension": "page", "value": "Jer",
                            "extractionFn": {"type": "substring", "index": 0, "length": 3}},
     lambda r: known(substring(0, 3)(r["page"]), "Jer")),
    ("extraction_filter", {"type": "extraction", "dimension": "page", "value": "ia",
                           "extractionFn": {"type": "substring", "index": 2, "length": 2}},
     lambda r: known(substring(2, 2)(r["page"]), "ia")),
    ("selector_null_after_substring", {"type": "selector", "dimension": "cityName", "value": None,
                                       "extractionFn": {"type": "substring", "index": 7}},
     lambda r: substring(7, None)(r["cityName"]) is None),
    ("in_hour_of_time", {"type": "in", "dimension": "__time", "values": ["01", "13"],
                         "extractionFn": {"type": "timeFormat", "format": "HH"}},
     lambda r: datetime.fromtimestamp(r["ms"] / 1000, UTC).strftime("%H") in ("01", "13")),
    ("bound_on_strlen", {"type": "bound", "dimension": "page", "upper": "5", "ordering": "numeric",
                         "extractionFn": {"type": "strlen"}},
     lambda r: r["page"] is None or len(r["page"]) <= 5),
    ("cascade_regex_upper", {"type": "selector", "dimension": "channel", "value": "EN",
                             "extractionFn": {"type": "cascade", "extractionFns": [
                                 {"type": "regex", "expr": "^#([a-z]+)\\.", "index": 1}, {"type": "upper"}]}},
     lambda r: known((regex_group(r"^#([a-z]+)\.", 1)(r["channel"]) or "").upper(), "EN")),
    ("like_lower", {"type": "like", "dimension": "countryName", "pattern": "united%",
                    "extractionFn": {"type": "lower"}},
     lambda r: None if r["countryName"] is None else r["countryName"].lower().startswith("united")),
    ("regex_partial", {"type": "selector", "dimension": "page", "value": None,
                       "extractionFn": {"type": "partial", "expr": "^Talk:"}},
     lambda r: r["page"] is None or re.search("^Talk:", r["page"]) is None),
    ("column_comparison", {"type": "columnComparison", "dimensions": ["cityName", "regionName"]},
     lambda r: r["cityName"] == r["regionName"]),
    ("column_comparison_number_as_text", {"type": "columnComparison", "dimensions": [
        "added", {"type": "default", "dimension": "countryName"}]},
     lambda r: str(r["added"]) == r["countryName"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "flt", "pred"), CASES, ids=[c[0] for c in CASES])
def test_extraction_and_comparison_filters(app: Starlette, rows: list[Row], name: str, flt: dict[str, Any],
                                           pred: Callable[[Row], bool | None]) -> None:  # fmt: skip
    verdicts = [pred(r) for r in rows]
    assert count(app, flt) == sum(1 for v in verdicts if v is True)
    # `not` keeps three-valued logic: a null extracted value is unknown either way
    assert count(app, {"type": "not", "field": flt}) == sum(1 for v in verdicts if v is False)


LANGS = {"#en.wikipedia": "EN", "#fr.wikipedia": "FR", "#de.wikipedia": "EN"}


@pytest.mark.parametrize(("fn", "value", "mapped"), [
    ({}, "EN", lambda v: LANGS.get(v)),
    ({"retainMissingValue": True}, "#ja.wikipedia", lambda v: LANGS.get(v, v)),
    ({"replaceMissingValueWith": "other"}, "other", lambda v: LANGS.get(v, "other")),
])  # fmt: skip
def test_lookup_extraction_filters(app: Starlette, rows: list[Row], fn: dict[str, Any], value: str,
                                   mapped: Callable[[str | None], str | None]) -> None:  # fmt: skip
    """An inline `lookup` map as a filter's extractionFn, against the map applied in Python."""
    lookup = {"type": "lookup", "lookup": {"type": "map", "map": LANGS}, **fn}
    flt = {"type": "selector", "dimension": "channel", "value": value, "extractionFn": lookup}
    assert count(app, flt) == sum(1 for r in rows if mapped(r["channel"]) == value)


@pytest.mark.parametrize("fn", [{"type": "searchQuery", "query": {"type": "contains", "value": "x"}},
                                {"type": "javascript", "function": "function(x){return x}"}])  # fmt: skip
def test_unsupported_extraction_is_501_naming_it(app: Starlette, fn: dict[str, Any]) -> None:
    body = {"queryType": "timeseries", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
            "granularity": "all", "aggregations": [{"type": "count", "name": "c"}],
            "filter": {"type": "selector", "dimension": "page", "value": "x", "extractionFn": fn}}  # fmt: skip
    resp = post(app, body)
    assert resp.status_code == 501 and fn["type"] in resp.json()["errorMessage"]
