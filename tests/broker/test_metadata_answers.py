"""Which segments the broker counts from announced row counts, and that everything else falls back.

The oracle is plain Python over the announced facts each test sets up: the count is their sum and
the timestamp the first row time of the segments read whole. Every disqualifying condition of the
query or of a segment must leave that segment (or the whole query) to the data nodes.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker_service.metadata_answers import metadata_answerable, split_by_facts, split_metadata_partials
from broker_service.segment_plan import SegmentPlanner, plan_segments
from broker_service.server_view import BrokerServerView
from strata.discovery.server_metadata import ServerMetadata, ServerType
from strata.query import Query, parse_query
from tests.broker.helpers import segment
from timeline import DataSegment, RowFacts, format_instant, parse_instant, with_row_facts

DAY = 86_400_000
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
DAYS = ["2015-09-12/2015-09-13", "2015-09-13/2015-09-14", "2015-09-14/2015-09-15"]
# (rows, first, last) per day: rows in the middle of each day, one empty day
FACTS = [(100, "2015-09-12T01:00:00Z", "2015-09-12T22:00:00Z"), (0, None, None),
         (7, "2015-09-14T03:30:00.250Z", "2015-09-14T03:30:00.250Z")]  # fmt: skip


def _facts(rows: int, first: str | None, last: str | None) -> RowFacts:
    span = None if first is None or last is None else (parse_instant(first), parse_instant(last))
    return RowFacts(rows, span)


def _announced(interval: str, facts: RowFacts | None, ds: str = "wiki") -> DataSegment:
    return with_row_facts(segment(ds=ds, interval=interval), facts)


def _view(*, servers: dict[str, ServerType] | None = None, facts: list[RowFacts | None] | None = None,
          per_server: dict[str, list[RowFacts | None]] | None = None) -> BrokerServerView:  # fmt: skip
    """Three daily segments, each announced by every server (by default one historical)."""
    view = BrokerServerView()
    servers = servers or {"h1:8083": ServerType.HISTORICAL}
    default = facts if facts is not None else [_facts(*f) for f in FACTS]
    for name, kind in servers.items():
        view.add_server(ServerMetadata(name, name, kind))
        for interval, f in zip(DAYS, (per_server or {}).get(name, default), strict=True):
            view.add_segment(name, _announced(interval, f))
    return view


def _query(**fields: Any) -> Query:
    body: dict[str, Any] = {"queryType": "timeseries", "dataSource": "wiki", "intervals": [ETERNITY],
                            "granularity": "all", "aggregations": [{"type": "count", "name": "rows"}]}  # fmt: skip
    body.update(fields)
    return parse_query(body)


def _answer(view: BrokerServerView, query: Query) -> tuple[list[Any] | None, int, int]:
    """(finalized answer from metadata alone or None, segments answered, segments left)."""
    assert metadata_answerable(query)
    plan = plan_segments(view, query)
    table, rest, answered = split_metadata_partials(query, split_by_facts(plan.tasks))
    results = None if rest else query.finalize(query.merge([] if table is None else [table]))
    return results, answered, len(rest)


def test_an_unfiltered_count_over_whole_segments_is_the_sum_of_announced_rows() -> None:
    results, answered, left = _answer(_view(), _query())
    want = sum(rows for rows, _, _ in FACTS)
    first = min(parse_instant(f) for _, f, _ in FACTS if f is not None)
    assert (answered, left) == (3, 0)
    assert results == [{"timestamp": format_instant(first), "result": {"rows": want}}]


def test_first_and_last_row_times_are_the_announced_spans_extremes() -> None:
    aggs = [{"type": "longMin", "name": "lo", "fieldName": "__time"}, {"type": "count", "name": "rows"},
            {"type": "doubleMax", "name": "hi", "fieldName": "__time"}]  # fmt: skip
    results, answered, left = _answer(_view(), _query(aggregations=aggs))
    firsts = [parse_instant(f) for _, f, _ in FACTS if f is not None]
    lasts = [parse_instant(last) for _, _, last in FACTS if last is not None]
    assert (answered, left) == (3, 0)
    assert results == [{"timestamp": format_instant(min(firsts)),
                        "result": {"lo": min(firsts), "rows": 107, "hi": float(max(lasts))}}]  # fmt: skip


@pytest.mark.parametrize("body", [{"queryType": "timeBoundary"}, {"queryType": "timeBoundary", "bound": "maxTime"},
                                  {"queryType": "dataSourceMetadata"}])  # fmt: skip
def test_time_boundary_and_datasource_metadata_are_the_announced_extremes(body: dict[str, Any]) -> None:
    query = parse_query({"dataSource": "wiki", **body})
    results, answered, left = _answer(_view(), query)
    first = min(parse_instant(f) for _, f, _ in FACTS if f is not None)
    last = max(parse_instant(f) for _, _, f in FACTS if f is not None)
    assert (answered, left) == (3, 0)
    if body["queryType"] == "dataSourceMetadata":
        want = {"timestamp": format_instant(last), "result": {"maxIngestedEventTime": format_instant(last)}}
    elif body.get("bound") == "maxTime":
        want = {"timestamp": format_instant(last), "result": {"maxTime": format_instant(last)}}
    else:
        want = {"timestamp": format_instant(first),
                "result": {"minTime": format_instant(first), "maxTime": format_instant(last)}}  # fmt: skip
    assert results == [want]


def test_post_aggregators_over_the_count_and_replicas_that_agree_are_fine() -> None:
    post = [{"type": "arithmetic", "name": "twice", "fn": "+",
             "fields": [{"type": "fieldAccess", "fieldName": "rows"}, {"type": "fieldAccess", "fieldName": "rows"}]}]  # fmt: skip
    view = _view(servers={"h1:8083": ServerType.HISTORICAL, "h2:8083": ServerType.HISTORICAL})
    results, answered, left = _answer(view, _query(postAggregations=post))
    assert (answered, left) == (3, 0)
    assert results is not None and results[0]["result"] == {"rows": 107, "twice": 214}


def test_intervals_cutting_a_segments_rows_leave_it_to_its_data_node() -> None:
    # cuts day one inside its rows; covers day three's single row; misses day two entirely
    interval = "2015-09-12T12:00:00Z/2015-09-15"
    results, answered, left = _answer(_view(), _query(intervals=[interval]))
    assert results is None and left == 1 and answered == 2
    # cutting the segment but not its rows is still whole
    _, answered, left = _answer(_view(), _query(intervals=["2015-09-12T00:30:00Z/2015-09-12T23:00:00Z"]))
    assert (answered, left) == (1, 0)


def test_a_segment_read_under_two_intervals_falls_back() -> None:
    # day three's one row lies inside the second interval; the first reads none of it
    intervals = ["2015-09-14T00:00:00Z/2015-09-14T01:00:00Z", "2015-09-14T02:00:00Z/2015-09-15"]
    _, answered, left = _answer(_view(), _query(intervals=intervals))
    assert (answered, left) == (0, 2)


@pytest.mark.parametrize(
    "servers, per_server",
    [
        ({"rt:8100": ServerType.REALTIME}, None),  # rows still changing
        ({"h1:8083": ServerType.HISTORICAL, "rt:8100": ServerType.REALTIME}, None),  # being handed off
        ({"h1:8083": ServerType.HISTORICAL}, {"h1:8083": [None, None, None]}),  # announced no facts
        ({"h1:8083": ServerType.HISTORICAL, "h2:8083": ServerType.HISTORICAL},
         {"h1:8083": [_facts(*f) for f in FACTS], "h2:8083": [None, None, None]}),  # one replica without
        ({"h1:8083": ServerType.HISTORICAL, "h2:8083": ServerType.HISTORICAL},
         {"h1:8083": [_facts(*f) for f in FACTS],
          "h2:8083": [_facts(f[0] + 1, f[1], f[2]) if f[1] else None for f in FACTS]}),  # replicas disagree
    ],
)  # fmt: skip
def test_segments_without_agreed_historical_facts_fall_back(
    servers: dict[str, ServerType], per_server: dict[str, list[RowFacts | None]] | None
) -> None:
    _, answered, left = _answer(_view(servers=servers, per_server=per_server), _query())
    assert answered == 0 and left == 3


def test_a_segment_whose_last_server_vanished_is_not_counted() -> None:
    view = _view()
    view.remove_server("h1:8083")  # lost: kept in the timeline for its grace period
    _, answered, left = _answer(view, _query())
    assert (answered, left) == (0, 3)


def test_a_realtime_server_leaving_makes_the_segment_answerable() -> None:
    view = _view(servers={"h1:8083": ServerType.HISTORICAL, "rt:8100": ServerType.REALTIME})
    for interval in DAYS:
        view.remove_segment("rt:8100", segment(interval=interval).id)
    _, answered, left = _answer(view, _query())
    assert (answered, left) == (3, 0)


def test_a_plans_kept_split_is_redone_when_the_view_changes() -> None:
    """The runner keeps a plan's split while the view's version stands; a real-time node taking
    one segment must send it back to the data nodes, though the timeline (and plan) is the same."""
    view = _view()
    planner = SegmentPlanner(view)
    query = _query()

    def answered_and_left() -> tuple[int, int]:
        plan = planner.plan(query)
        split = plan.per_view_version(view.version, lambda: split_by_facts(plan.tasks))
        _, rest, answered = split_metadata_partials(query, split)  # type: ignore[arg-type]
        return answered, len(rest)

    first = planner.plan(query)
    assert answered_and_left() == (3, 0)
    view.add_server(ServerMetadata("rt:8100", "rt:8100", ServerType.REALTIME))
    view.add_segment("rt:8100", segment(interval=DAYS[0]))
    assert planner.plan(query) is first
    assert answered_and_left() == (2, 1)


@pytest.mark.parametrize(
    "fields",
    [
        {"filter": {"type": "selector", "dimension": "page", "value": "x"}},
        {"virtualColumns": [{"type": "expression", "name": "v", "expression": "1", "outputType": "LONG"}]},
        {"granularity": "day"},
        {"granularity": "none"},
        {"aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}]},
        {"aggregations": [{"type": "count", "name": "rows"}, {"type": "longMax", "name": "m", "fieldName": "added"}]},
        {"aggregations": [{"type": "floatMin", "name": "m", "fieldName": "__time"}]},
        {"aggregations": [{"type": "longSum", "name": "m", "fieldName": "__time"}]},
        {"aggregations": [{"type": "filtered", "filter": {"type": "selector", "dimension": "page", "value": "x"},
                           "aggregator": {"type": "count", "name": "rows"}}]},
        {"aggregations": []},
        {"context": {"bySegment": True}},
    ],
)  # fmt: skip
def test_other_timeseries_shapes_are_not_answered_from_metadata(fields: dict[str, Any]) -> None:
    assert not metadata_answerable(_query(**fields))


@pytest.mark.parametrize(
    "body",
    [
        {"queryType": "groupBy", "dimensions": [], "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]},
        {"queryType": "timeseries", "granularity": "all", "aggregations": [{"type": "count", "name": "c"}],
         "dataSource": {"type": "query", "query": {"queryType": "groupBy", "dataSource": "wiki", "granularity": "all",
                                                   "intervals": [ETERNITY], "dimensions": ["page"]}}},
        {"queryType": "timeBoundary", "filter": {"type": "selector", "dimension": "page", "value": "x"}},
        {"queryType": "timeBoundary", "context": {"bySegment": True}},
    ],
)  # fmt: skip
def test_other_query_types_and_query_datasources_are_not_answered(body: dict[str, Any]) -> None:
    assert not metadata_answerable(parse_query({"dataSource": "wiki", "intervals": [ETERNITY], **body}))


def test_empty_segments_are_answered_with_no_row() -> None:
    view = _view(facts=[RowFacts(0, None)] * 3)
    plan = plan_segments(view, _query())
    table, rest, answered = split_metadata_partials(_query(), split_by_facts(plan.tasks))  # type: ignore[arg-type]
    assert (table, rest, answered) == (None, [], 3)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"numRows": True, "minTime": 1, "maxTime": 2},
        {"numRows": -1},
        {"numRows": "5", "minTime": 1, "maxTime": 2},
        {"numRows": 5},
        {"numRows": 5, "minTime": 3, "maxTime": 2},
        {"numRows": 5, "minTime": 1.0, "maxTime": 2},
        {"numRows": 0, "minTime": 1, "maxTime": 2},
    ],
)
def test_missing_or_malformed_facts_are_unknown(extra: dict[str, Any]) -> None:
    obj = {**segment().to_json(), **extra}
    assert RowFacts.of(DataSegment.from_json(obj)) is None


def test_facts_round_trip_through_the_announced_json_and_replace_stale_ones() -> None:
    facts = RowFacts(42, (10, 20))
    stale = DataSegment.from_json({**segment().to_json(), "numRows": 1, "minTime": 0, "maxTime": 0, "x": 1})
    announced = with_row_facts(stale, facts)
    back = DataSegment.from_json(announced.to_json())
    assert back == segment() and back.id == segment().id
    assert RowFacts.of(back) == facts and back.extra["x"] == 1
    assert RowFacts.of(with_row_facts(announced, None)) is None
    assert RowFacts.of(
        DataSegment.from_json(with_row_facts(segment(), RowFacts(0, None)).to_json())
    ) == RowFacts(0, None)
