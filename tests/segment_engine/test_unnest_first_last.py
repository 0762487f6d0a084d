"""EARLIEST / LATEST over unnested rows, checked against Druid's aggregators' rule applied to the
raw rows in plain Python: the first aggregators keep the value of the first row read at the least
time (`time < firstTime`), the last ones that of the last row read at the greatest (`time >=
lastTime`), a null value too. The rows unnested from one row share its time and are read in the
order of its elements, so `latest` of them is the row's last element and `earliest` its first.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from strata.engine import SegmentInput, run_to_json
from strata.ingestion.api import ingest
from strata.query import parse_query
from tests.ingestion.conftest import inline_spec

ROWS: list[dict[str, Any]] = [
    {"ts": "2022-01-01T00:00:00Z", "label": "a", "tags": ["", None, "1", "2", "3"], "arr": [5, None, 7]},
    {"ts": "2022-01-01T00:00:00Z", "label": "b", "tags": ["4", "5", None], "arr": [8, None]},
    {"ts": "2022-01-01T00:00:00Z", "label": "c", "tags": ["6"], "arr": [9]},
    {"ts": "2022-01-02T00:00:00Z", "label": "c", "tags": ["7", "8"], "arr": [1, 2]},
]
BASE = {"queryType": "groupBy", "intervals": ["2022/2023"], "granularity": "all", "dimensions": ["label"]}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    root = tmp_path_factory.mktemp("unnest-first-last")
    dims = ["label", {"name": "tags", "type": "string", "multiValueHandling": "ARRAY"},
            {"name": "arr", "type": "auto"}]  # fmt: skip
    spec = inline_spec(
        "\n".join(json.dumps(r) for r in ROWS),
        dataSource="u",
        dimensionsSpec={"dimensions": dims},
        granularitySpec={"segmentGranularity": "year", "rollup": False},
    )
    summary = ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db", engine="local")
    return [
        SegmentInput(w.segment.id, w.segment.descriptor, w.segment.load_spec["path"], w.segment.interval)
        for w in summary.segments
    ]


def unnest(expression: str) -> dict[str, Any]:
    return {"type": "unnest", "base": {"type": "table", "name": "u"},
            "virtualColumn": {"type": "expression", "name": "e", "expression": expression}}  # fmt: skip


def answer(inputs: list[SegmentInput], source: dict[str, Any], aggregator: dict[str, Any]) -> dict[str, Any]:
    query = parse_query({**BASE, "dataSource": source, "aggregations": [{**aggregator, "name": "v"}]})
    return {r["event"]["label"]: r["event"]["v"] for r in run_to_json(query, inputs)}


def druid_pick(column: str, last: bool) -> dict[str, Any]:
    """Per label, the element Druid's first / last aggregator keeps over the unnested rows."""
    out: dict[str, Any] = {}
    for label in sorted({r["label"] for r in ROWS}):
        rows = sorted((r for r in ROWS if r["label"] == label), key=lambda r: r["ts"])  # read in time order
        elements = [(r["ts"], v) for r in rows for v in r[column]]
        extreme = max(t for t, _ in elements) if last else min(t for t, _ in elements)
        at_extreme = [v for t, v in elements if t == extreme]
        out[label] = at_extreme[-1] if last else at_extreme[0]
    return out


@pytest.mark.parametrize("last", [False, True])
def test_string_first_last_of_a_multi_value_strings_elements(inputs: list[SegmentInput], last: bool) -> None:
    kind = "stringLast" if last else "stringFirst"
    got = answer(inputs, unnest('mv_to_array("tags")'), {"type": kind, "fieldName": "e"})
    assert got == druid_pick("tags", last)


@pytest.mark.parametrize("last", [False, True])
def test_long_first_last_of_an_arrays_elements(inputs: list[SegmentInput], last: bool) -> None:
    kind = "longLast" if last else "longFirst"
    assert answer(inputs, unnest('"arr"'), {"type": kind, "fieldName": "e"}) == druid_pick("arr", last)


def test_long_last_of_a_cast_of_the_elements(inputs: list[SegmentInput]) -> None:
    query = parse_query({
        **BASE, "dataSource": unnest('mv_to_array("tags")'),
        "virtualColumns": [{"type": "expression", "name": "n", "expression": "CAST(\"e\", 'LONG')",
                            "outputType": "LONG"}],
        "aggregations": [{"type": "longLast", "name": "v", "fieldName": "n"}],
    })  # fmt: skip
    got = {r["event"]["label"]: r["event"]["v"] for r in run_to_json(query, inputs)}
    expected = {k: None if v in (None, "") else int(v) for k, v in druid_pick("tags", True).items()}
    assert got == expected


def test_nested_unnests_read_the_inner_elements_of_each_outer_one(inputs: list[SegmentInput]) -> None:
    inner = unnest('mv_to_array("tags")')
    outer = {"type": "unnest", "base": inner,
             "virtualColumn": {"type": "expression", "name": "x", "expression": '"arr"'}}  # fmt: skip
    got = answer(inputs, outer, {"type": "stringLast", "fieldName": "e"})
    # for each tag (outer loop of the reading order) every element of arr: the last row read is the
    # last tag's, at the greatest time
    assert got == druid_pick("tags", True)
    got = answer(inputs, outer, {"type": "longLast", "fieldName": "x"})
    assert got == druid_pick("arr", True)


def test_the_position_column_is_not_an_output(inputs: list[SegmentInput]) -> None:
    query = parse_query({"queryType": "scan", "dataSource": unnest('"arr"'), "intervals": ["2022/2023"],
                         "resultFormat": "compactedList"})  # fmt: skip
    columns = {c for batch in run_to_json(query, inputs) for c in batch["columns"]}
    assert columns == {"__time", "label", "tags", "arr", "e"}


def test_only_a_last_aggregator_makes_an_unnest_carry_positions() -> None:
    """The position costs a list a row: an unnest gives it only when a `*Last` aggregator (plain
    or filtered) breaks ties by it."""
    from strata.engine.wrapped_source import wrap
    from strata.query.columns import ELEMENT_POSITION
    from strata.query.groupby import GroupByQuery

    query = parse_query({
        **BASE, "dataSource": {"type": "unnest", "base": {"type": "table", "name": "u"},
                               "virtualColumn": {"type": "expression", "name": "t", "expression": "tags"}},
        "aggregations": [
            {"type": "count", "name": "n"},
            {"type": "filtered", "filter": {"type": "selector", "dimension": "label", "value": "a"},
             "aggregator": {"type": "stringLast", "name": "last", "fieldName": "t"}},
            {"type": "stringFirst", "name": "first", "fieldName": "t"},
        ],
    })  # fmt: skip
    assert isinstance(query, GroupByQuery) and query.source is not None
    assert [a.reads_element_positions() for a in query.aggregations] == [False, True, False]
    types = {"__time": "BIGINT", "label": "VARCHAR", "tags": "VARCHAR[]"}
    plain, plain_types = wrap("SELECT * FROM rows", types, query.source)
    with_positions, position_types = wrap("SELECT * FROM rows", types, query.source, positions=True)
    assert ELEMENT_POSITION not in plain and ELEMENT_POSITION not in plain_types
    assert ELEMENT_POSITION in with_positions and position_types[ELEMENT_POSITION] == "BIGINT[]"
