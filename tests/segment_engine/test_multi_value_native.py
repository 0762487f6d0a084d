"""Native queries over multi-value strings and arrays, checked against Druid's documented rules
applied to the raw rows in plain Python (`multi-value-dimensions.md`, `arrays.md`):

- a value filter matches a multi-value row when any value matches; a row with no value is one
  null value; `not` keeps three-valued logic (a row holding a null value that matches nothing is
  unknown, so `not` drops it);
- groupBy and topN count a multi-value row once under each of its values (null for none), and
  filtered dimension specs keep only some values;
- an array is one value: grouped whole, matched whole by `equals`, by element with
  `arrayContainsElement`, and refused by the string filters.

Segments are read both from Parquet and from the historical's Arrow copies.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from historical_service.arrow_copy import mapped_copy
from strata.engine import SegmentInput, mapped_source, run_to_json
from strata.ingestion.api import ingest
from strata.query import QueryError, parse_query
from tests.ingestion.data_model_oracle import mv_row

ROWS: list[dict[str, Any]] = [
    {"ts": "2011-01-12T00:00:00Z", "label": "row1", "tags": ["t1", "t2", "t3"], "arr": [1, 2]},
    {"ts": "2011-01-13T00:00:00Z", "label": "row2", "tags": ["t3", "t4", "t5"], "arr": [2, None]},
    {"ts": "2011-01-14T00:00:00Z", "label": "row3", "tags": ["t5", "t6", "t7"], "arr": []},
    {"ts": "2011-01-14T00:00:00Z", "label": "row4", "tags": [], "arr": None},
    {"ts": "2011-01-15T00:00:00Z", "label": "row5", "tags": ["t1", None], "arr": [1, 2]},
    {"ts": "2011-02-01T00:00:00Z", "label": "row6", "tags": "t9", "arr": [3]},  # a segment of one-value rows
    {"ts": "2011-02-02T00:00:00Z", "label": "row7", "tags": None, "arr": [2]},
]
BASE = {"dataSource": "mv", "intervals": ["2011/2012"], "granularity": "all"}
COUNT = [{"type": "count", "name": "c"}]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    root = tmp_path_factory.mktemp("multi-value")
    dims = ["label", {"name": "tags", "type": "string"}, {"name": "arr", "type": "auto"}]
    spec = {
        "dataSchema": {
            "dataSource": "mv",
            "timestampSpec": {"column": "ts"},
            "dimensionsSpec": {"dimensions": dims},
            "granularitySpec": {"segmentGranularity": "month", "rollup": False},
        },
        "ioConfig": {
            "inputSource": {"type": "inline", "data": "\n".join(json.dumps(r) for r in ROWS)},
            "inputFormat": {"type": "json"},
        },
    }
    summary = ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db", engine="local")
    segments = sorted((w.segment for w in summary.segments), key=lambda s: s.interval.start)
    assert len(segments) == 2
    return [SegmentInput(s.id, s.descriptor, s.load_spec["path"], s.interval) for s in segments]


@pytest.fixture(params=["parquet", "arrow"])
def served(request: pytest.FixtureRequest, inputs: list[SegmentInput]) -> Iterator[list[SegmentInput]]:
    if request.param == "arrow":
        for inp in inputs:
            assert mapped_source.register(inp.path, mapped_copy(Path(inp.path)))
    try:
        yield inputs
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)


def run(inputs: list[SegmentInput], query: dict[str, Any]) -> list[Any]:
    return run_to_json(parse_query({**BASE, **query}), inputs)


# -- the oracle: Druid's rules over the raw rows ------------------------------------------------------
def values(row: dict[str, Any]) -> list[str | None]:
    """A multi-value row's values as Druid holds them; no value is one null value."""
    return mv_row(row["tags"], "SORTED_ARRAY") or [None]


def any_value(row: dict[str, Any], test: Callable[[str], bool]) -> bool | None:
    """True when a value passes, None (unknown) when none does but one is null, else False."""
    found = [None if v is None else test(v) for v in values(row)]
    return True if True in found else (None if None in found else False)


def labels(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r["label"] for r in rows)


def matched(inputs: list[SegmentInput], flt: dict[str, Any]) -> Counter[str]:
    answer = run(
        inputs, {"queryType": "groupBy", "dimensions": ["label"], "aggregations": COUNT, "filter": flt}
    )
    return Counter({r["event"]["label"]: r["event"]["c"] for r in answer})


FILTERS: list[tuple[dict[str, Any], Callable[[dict[str, Any]], bool | None]]] = [
    ({"type": "selector", "dimension": "tags", "value": "t3"}, lambda r: any_value(r, lambda v: v == "t3")),
    ({"type": "equals", "column": "tags", "matchValueType": "STRING", "matchValue": "t1"},
     lambda r: any_value(r, lambda v: v == "t1")),
    ({"type": "in", "dimension": "tags", "values": ["t4", "t9"]}, lambda r: any_value(r, lambda v: v in ("t4", "t9"))),
    ({"type": "like", "dimension": "tags", "pattern": "%5"}, lambda r: any_value(r, lambda v: v.endswith("5"))),
    ({"type": "regex", "dimension": "tags", "pattern": "[67]"}, lambda r: any_value(r, lambda v: "6" in v or "7" in v)),
    ({"type": "bound", "dimension": "tags", "lower": "t6", "lowerStrict": True},
     lambda r: any_value(r, lambda v: v > "t6")),
    ({"type": "search", "dimension": "tags", "query": {"type": "contains", "value": "T2"}},
     lambda r: any_value(r, lambda v: "t2" in v)),
    ({"type": "null", "column": "tags"}, lambda r: None in values(r)),
    ({"type": "selector", "dimension": "tags", "value": None}, lambda r: None in values(r)),
]  # fmt: skip


@pytest.mark.parametrize("flt,oracle", FILTERS, ids=[f[0]["type"] + str(i) for i, f in enumerate(FILTERS)])
def test_a_value_filter_matches_a_row_when_any_value_matches(
    served: list[SegmentInput], flt: dict[str, Any], oracle: Callable[[dict[str, Any]], bool | None]
) -> None:
    assert matched(served, flt) == labels([r for r in ROWS if oracle(r) is True])
    # `not` matches only where the filter is false: unknown rows (a null value) stay out
    assert matched(served, {"type": "not", "field": flt}) == labels([r for r in ROWS if oracle(r) is False])


def test_and_of_two_values_matches_rows_holding_both(served: list[SegmentInput]) -> None:
    both = {
        "type": "and",
        "fields": [{"type": "selector", "dimension": "tags", "value": v} for v in ("t1", "t3")],
    }
    assert matched(served, both) == Counter({"row1": 1})


def exploded(rows: list[dict[str, Any]]) -> Counter[str | None]:
    return Counter(v for r in rows for v in values(r))


def test_group_by_counts_each_value(served: list[SegmentInput]) -> None:
    flt = {"type": "selector", "dimension": "tags", "value": "t3"}
    answer = run(
        served, {"queryType": "groupBy", "dimensions": ["tags"], "aggregations": COUNT, "filter": flt}
    )
    expected = exploded([r for r in ROWS if any_value(r, lambda v: v == "t3")])
    assert Counter({r["event"]["tags"]: r["event"]["c"] for r in answer}) == expected
    # Druid orders groups by value, null first
    assert [r["event"]["tags"] for r in answer] == sorted(expected, key=lambda v: (v is not None, v or ""))


def test_two_multi_value_dimensions_pair_every_value(served: list[SegmentInput]) -> None:
    dims = ["tags", {"type": "default", "dimension": "tags", "outputName": "again"}]
    answer = run(served, {"queryType": "groupBy", "dimensions": dims, "aggregations": COUNT})
    got = Counter({(r["event"]["tags"], r["event"]["again"]): r["event"]["c"] for r in answer})
    assert got == Counter((a, b) for r in ROWS for a in values(r) for b in values(r))


def test_top_n_counts_each_value(served: list[SegmentInput]) -> None:
    answer = run(served, {"queryType": "topN", "dimension": "tags", "metric": "c", "threshold": 100,
                          "aggregations": COUNT})  # fmt: skip
    assert Counter({r["tags"]: r["c"] for r in answer[0]["result"]}) == exploded(ROWS)


@pytest.mark.parametrize(
    "spec,keep",
    [
        ({"type": "listFiltered", "delegate": "tags", "values": ["t3", "t5"]}, lambda v: v in ("t3", "t5")),
        # a value not listed is kept by a blacklist, the null value too
        ({"type": "listFiltered", "delegate": "tags", "values": ["t3"], "isWhitelist": False}, lambda v: v != "t3"),
        ({"type": "prefixFiltered", "delegate": "tags", "prefix": "t1"}, lambda v: v is not None and v.startswith("t1")),
        ({"type": "regexFiltered", "delegate": "tags", "pattern": "^t[2-4]$"}, lambda v: v in ("t2", "t3", "t4")),
    ],
)  # fmt: skip
def test_filtered_dimension_specs_keep_some_values(
    served: list[SegmentInput], spec: dict[str, Any], keep: Callable[[str | None], bool]
) -> None:
    answer = run(served, {"queryType": "groupBy", "dimensions": [spec], "aggregations": COUNT})
    expected: Counter[str | None] = Counter()
    for r in ROWS:
        kept = [v for v in values(r) if keep(v)]
        expected.update(kept or [None])  # a row with every value dropped groups under null
    assert Counter({r["event"]["tags"]: r["event"]["c"] for r in answer}) == expected


def test_unnesting_off_refuses_a_multi_value_dimension(served: list[SegmentInput]) -> None:
    query = {"queryType": "groupBy", "dimensions": ["tags"], "aggregations": COUNT,
             "context": {"groupByEnableMultiValueUnnesting": False}}  # fmt: skip
    with pytest.raises(QueryError, match="Encountered multi-value dimension \\[tags\\]"):
        run(served, query)


def test_timeseries_counts_rows_not_values(served: list[SegmentInput]) -> None:
    flt = {"type": "like", "dimension": "tags", "pattern": "t%"}
    answer = run(served, {"queryType": "timeseries", "aggregations": COUNT, "filter": flt})
    assert answer[0]["result"]["c"] == sum(1 for r in ROWS if any_value(r, lambda v: v.startswith("t")))


def test_scan_prints_multi_value_rows_as_druid(served: list[SegmentInput]) -> None:
    answer = run(served, {"queryType": "scan", "columns": ["label", "tags"], "order": "none"})
    got = {e["label"]: e["tags"] for part in answer for e in part["events"]}
    for r in ROWS:
        stored = mv_row(r["tags"], "SORTED_ARRAY")
        assert got[r["label"]] == (stored if stored is None or len(stored) > 1 else stored[0])
    assert {s["name"]: s["type"] for s in answer[0]["rowSignature"]}["tags"] == "STRING"


# -- arrays ---------------------------------------------------------------------------------------------
def test_group_by_an_array_groups_whole_arrays(served: list[SegmentInput]) -> None:
    dim = {"type": "default", "dimension": "arr", "outputType": "ARRAY<LONG>"}
    answer = run(served, {"queryType": "groupBy", "dimensions": [dim], "aggregations": COUNT})
    got = Counter({json.dumps(r["event"]["arr"]): r["event"]["c"] for r in answer})
    assert got == Counter(json.dumps(r["arr"]) for r in ROWS)
    assert answer[0]["event"]["arr"] is None  # a null array orders first


ARRAY_FILTERS: list[tuple[dict[str, Any], Callable[[Any], bool]]] = [
    ({"type": "equals", "column": "arr", "matchValueType": "ARRAY<LONG>", "matchValue": [1, 2]},
     lambda a: a == [1, 2]),
    ({"type": "arrayContainsElement", "column": "arr", "elementMatchValueType": "LONG", "elementMatchValue": 2},
     lambda a: a is not None and 2 in a),
    ({"type": "null", "column": "arr"}, lambda a: a is None),
    ({"type": "equals", "column": "arr", "matchValueType": "LONG", "matchValue": 3}, lambda a: False),
]  # fmt: skip


@pytest.mark.parametrize(
    "flt,oracle", ARRAY_FILTERS, ids=[f[0]["type"] + str(i) for i, f in enumerate(ARRAY_FILTERS)]
)
def test_arrays_are_matched_whole(
    served: list[SegmentInput], flt: dict[str, Any], oracle: Callable[[Any], bool]
) -> None:
    assert matched(served, flt) == labels([r for r in ROWS if oracle(r["arr"])])


def test_string_filters_refuse_an_array(served: list[SegmentInput]) -> None:
    with pytest.raises(QueryError, match="cannot match ARRAY column \\[arr\\]"):
        matched(served, {"type": "like", "dimension": "arr", "pattern": "1%"})
