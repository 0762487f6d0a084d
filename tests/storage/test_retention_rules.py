"""Druid's retention rules as a pure rule, against cases worked out by hand from Druid's rule classes
(Rules.eligibleForLoad, PeriodDropRule, PeriodDropBeforeRule, IntervalDropRule) and its docs."""

from __future__ import annotations

from typing import Any

import pytest

from strata.storage.retention_rules import (
    DEFAULT_RULES,
    RuleError,
    parse_rule,
    parse_rules,
    placement,
    rules_in_force,
    time_dependent,
)
from timeline import Interval, parse_instant

NOW = parse_instant("2024-06-15T12:00:00Z")
DAY = 24 * 3600 * 1000


def iv(text: str) -> Interval:
    return Interval.parse(text)


def test_load_rules_fill_in_druids_default_tier_unless_told_not_to() -> None:
    assert parse_rule({"type": "loadForever"}).tiered_replicants == {"_default_tier": 2}
    empty = parse_rule({"type": "loadForever", "useDefaultTierForNull": False})
    assert empty.tiered_replicants == {}
    assert parse_rule(
        {"type": "loadForever", "tieredReplicants": {"hot": 1, "cold": 0}}
    ).tiered_replicants == {
        "hot": 1,
        "cold": 0,
    }
    # Druid's serialization: defaults written out, the interval normalized
    assert parse_rule({"type": "loadByInterval", "interval": "2012-01-01/2013-01-01"}).to_json() == {
        "type": "loadByInterval",
        "interval": "2012-01-01T00:00:00.000Z/2013-01-01T00:00:00.000Z",
        "tieredReplicants": {"_default_tier": 2},
        "useDefaultTierForNull": True,
    }
    assert parse_rule({"type": "dropByPeriod", "period": "P1M"}).to_json() == {
        "type": "dropByPeriod",
        "period": "P1M",
        "includeFuture": True,
    }
    assert parse_rule({"type": "dropBeforeByPeriod", "period": "P7D"}).to_json() == {
        "type": "dropBeforeByPeriod",
        "period": "P7D",
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "loadForever", "tieredReplicants": {"hot": -1}}, "less than 0"),
        ({"type": "loadForever", "tieredReplicants": {"hot": None}}, "cannot be empty"),
        ({"type": "loadForever", "tieredReplicants": {"hot": "2"}}, "must be an integer"),
        ({"type": "loadByInterval"}, "needs 'interval'"),
        ({"type": "loadByPeriod", "period": "one month"}, "not an ISO-8601 period"),
        ({"type": "keepForever"}, "Could not resolve type id 'keepForever'"),
        ({"type": "dropByPeriod", "period": "P1D", "includeFuture": "maybe"}, "true or false"),
    ],
)
def test_rules_druid_refuses_are_refused_naming_why(body: dict, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rule(body)


def test_a_rules_body_must_be_a_list() -> None:
    with pytest.raises(RuleError, match="JSON array"):
        parse_rules({"type": "loadForever"})


def test_interval_rules_load_what_they_overlap_and_drop_what_they_contain() -> None:
    load = parse_rule({"type": "loadByInterval", "interval": "2024-01-01/2024-02-01"})
    drop = parse_rule({"type": "dropByInterval", "interval": "2024-01-01/2024-02-01"})
    inside, across, outside = (
        iv("2024-01-10/2024-01-11"),
        iv("2024-01-31/2024-02-02"),
        iv("2024-02-01/2024-02-02"),
    )
    assert load.applies(inside, NOW) and load.applies(across, NOW) and not load.applies(outside, NOW)
    assert drop.applies(inside, NOW) and not drop.applies(across, NOW) and not drop.applies(outside, NOW)


def test_period_load_rules_reach_back_from_now_and_forward_unless_told_not_to() -> None:
    # P1M back from 2024-06-15T12:00 starts at 2024-05-15T12:00
    forward = parse_rule({"type": "loadByPeriod", "period": "P1M"})
    bounded = parse_rule({"type": "loadByPeriod", "period": "P1M", "includeFuture": False})
    ends_at_start = iv("2024-05-14T12:00/2024-05-15T12:00")  # ends exactly where the period starts
    straddles = iv("2024-05-15/2024-05-16")
    future = iv("2024-07-01/2024-07-02")
    assert not forward.applies(ends_at_start, NOW) and forward.applies(straddles, NOW)
    assert forward.applies(future, NOW) and not bounded.applies(future, NOW)
    assert bounded.applies(straddles, NOW)
    assert bounded.applies(iv("2024-06-15T11:00/2024-06-15T13:00"), NOW)  # overlaps now
    assert not bounded.applies(iv("2024-06-15T12:00/2024-06-15T13:00"), NOW)  # starts at now


def test_period_drop_rules_need_the_whole_segment_inside_the_period() -> None:
    forward = parse_rule({"type": "dropByPeriod", "period": "P1D"})
    bounded = parse_rule({"type": "dropByPeriod", "period": "P1D", "includeFuture": False})
    start = NOW - DAY
    assert forward.applies(Interval(start, start + 3600_000), NOW)  # starts at the period's start
    assert not forward.applies(Interval(start - 1, start + 3600_000), NOW)  # starts before it
    assert forward.applies(Interval(NOW + DAY, NOW + 2 * DAY), NOW)  # in the future
    assert not bounded.applies(Interval(NOW + DAY, NOW + 2 * DAY), NOW)
    assert bounded.applies(Interval(start, NOW), NOW) and not bounded.applies(Interval(start, NOW + 1), NOW)


def test_drop_before_period_takes_what_ended_by_then() -> None:
    rule = parse_rule({"type": "dropBeforeByPeriod", "period": "P7D"})
    cut = NOW - 7 * DAY
    assert rule.applies(Interval(cut - DAY, cut), NOW)
    assert not rule.applies(Interval(cut - DAY, cut + 1), NOW)


def test_the_first_applicable_rule_decides_and_the_default_rules_come_last() -> None:
    current: dict[str, list[dict[str, Any]]] = {
        "wiki": [
            {"type": "loadByPeriod", "period": "P7D", "tieredReplicants": {"hot": 2}},
            {"type": "loadByInterval", "interval": "2024-01-01/2024-06-01", "tieredReplicants": {"cold": 1}},
            {"type": "broadcastByInterval", "interval": "2023-12-01/2024-01-01"},
        ],
        "_default": [{"type": "dropForever"}],
    }
    rules = rules_in_force(current, "wiki")
    assert placement(rules, iv("2024-06-14/2024-06-15"), NOW).tiers == {"hot": 2}
    assert placement(rules, iv("2024-03-01/2024-03-02"), NOW).tiers == {"cold": 1}
    assert placement(rules, iv("2023-12-24/2023-12-25"), NOW).broadcast
    assert placement(rules, iv("2022-01-01/2022-01-02"), NOW).dropped  # the cluster's default rule
    assert time_dependent(rules)
    # another data source has only the default rules; without stored defaults, Druid's own
    assert placement(rules_in_force(current, "other"), iv("2024-06-14/2024-06-15"), NOW).dropped
    assert [r.to_json() for r in rules_in_force({}, "other")] == list(DEFAULT_RULES)
    assert not time_dependent(rules_in_force({}, "other"))


def test_a_stored_rule_strata_cannot_read_is_skipped_not_fatal() -> None:
    current: dict[str, list[dict[str, Any]]] = {
        "wiki": [{"type": "mystery"}, {"type": "loadForever", "tieredReplicants": {"hot": 1}}]
    }
    assert placement(rules_in_force(current, "wiki"), iv("2024-01-01/2024-01-02"), NOW).tiers == {"hot": 1}
