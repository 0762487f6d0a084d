"""What the per-segment and whole-answer cache keys cover: what changes a result, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from broker_service.result_cache import result_key
from strata.query import parse_query

BASE: dict[str, Any] = {
    "queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
    "granularity": "hour", "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    "filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"},
}  # fmt: skip
POST = [{"type": "arithmetic", "name": "twice", "fn": "*",
         "fields": [{"type": "fieldAccess", "fieldName": "added"}, {"type": "constant", "value": 2}]}]  # fmt: skip


def key(**changes: Any) -> bytes:
    return parse_query({**BASE, **changes}).cache_key()


@pytest.mark.parametrize(
    "changes",
    [
        {"context": {"queryId": "another"}},
        {"context": {"timeout": 5000, "priority": 10, "useCache": True, "populateCache": False}},
        {"postAggregations": POST},
        {"limit": 3},
    ],
    ids=["query id", "context", "post-aggregators", "limit"],
)
def test_segment_entries_are_shared_across(changes: dict[str, Any]) -> None:
    assert key(**changes) == key()


@pytest.mark.parametrize(
    "changes",
    [
        {"filter": {"type": "selector", "dimension": "channel", "value": "#de.wikipedia"}},
        {"filter": None},
        {"aggregations": [{"type": "doubleSum", "name": "added", "fieldName": "added"}]},
        {"aggregations": [{"type": "longSum", "name": "added", "fieldName": "deleted"}]},
        {"granularity": "day"},
        {"granularity": {"type": "period", "period": "PT1H", "timeZone": "America/Los_Angeles"}},
    ],
    ids=["filter value", "no filter", "aggregator type", "aggregator field", "granularity", "time zone"],
)
def test_segment_entries_differ_for(changes: dict[str, Any]) -> None:
    assert key(**changes) != key()


def test_topn_keys_cover_dimension_metric_and_threshold() -> None:
    topn = {**BASE, "queryType": "topN", "granularity": "all", "dimension": "page", "metric": "added",
            "threshold": 10}  # fmt: skip
    same = parse_query(topn).cache_key()
    assert parse_query({**topn, "context": {"queryId": "x"}}).cache_key() == same
    for changes in ({"dimension": "user"}, {"metric": {"type": "inverted", "metric": "added"}}):
        assert parse_query({**topn, **changes}).cache_key() != same


def test_topn_keys_cover_the_per_segment_cut() -> None:
    """A partial keeps max(threshold, minTopNThreshold) rows: another cut is another entry."""
    topn = {**BASE, "queryType": "topN", "granularity": "all", "dimension": "page", "metric": "added",
            "threshold": 10}  # fmt: skip

    def cut(n: int | None) -> bytes:
        return parse_query({**topn, "context": {} if n is None else {"minTopNThreshold": n}}).cache_key()

    assert cut(3) == cut(10)  # both keep the threshold's 10 rows
    assert len({cut(10), cut(50), cut(1000)}) == 3
    assert cut(None) == cut(1000)  # Druid's default


def test_whole_answer_keys_include_post_aggregators_and_limits_but_not_run_settings() -> None:
    whole = result_key(parse_query(BASE))
    assert (
        result_key(parse_query({**BASE, "context": {"queryId": "q", "timeout": 1, "priority": 5}})) == whole
    )
    assert result_key(parse_query({**BASE, "postAggregations": POST})) != whole
    assert result_key(parse_query({**BASE, "limit": 3})) != whole
    assert result_key(parse_query({**BASE, "context": {"skipEmptyBuckets": True}})) != whole
