"""Plans are reused only while the datasource's timeline is unchanged; each equals a fresh plan."""

from __future__ import annotations

import struct

from broker_service.segment_plan import SegmentPlanner, SegmentTask, plan_segments
from broker_service.server_view import BrokerServerView
from strata.discovery.server_metadata import ServerMetadata, ServerType
from tests.broker.helpers import segment, sum_query

H1 = ServerMetadata("h1:8083", "h1:8083", ServerType.HISTORICAL, "_default_tier", 0)
DAYS = [f"2015-09-{d:02d}/2015-09-{d + 1:02d}" for d in range(10, 16)]


def ids(plan: object) -> list[str]:
    return [t.segment_id for t in plan.tasks]  # type: ignore[attr-defined]


def test_a_repeated_query_reuses_its_plan_until_the_timeline_changes() -> None:
    view = BrokerServerView()
    view.add_server(H1)
    for day in DAYS[:4]:
        view.add_segment(H1.name, segment(interval=day))
    planner = SegmentPlanner(view)
    query = sum_query("2015-09-10/2015-09-20")
    first = planner.plan(query)
    assert planner.plan(sum_query("2015-09-10/2015-09-20")) is first  # same intervals: the same plan
    assert len(first.tasks) == 4

    view.add_segment(H1.name, segment(interval=DAYS[4]))  # a new segment: planned again
    second = planner.plan(query)
    assert second is not first
    assert ids(second) == ids(plan_segments(view, query)) and len(second.tasks) == 5

    newer = segment(interval=DAYS[0], version="v2")  # overshadows day one
    view.add_segment(H1.name, newer)
    third = planner.plan(query)
    assert newer.id in ids(third) and segment(interval=DAYS[0]).id not in ids(third)

    view.remove_segment(H1.name, newer.id)  # gone again: the older version is visible again
    assert ids(planner.plan(query)) == ids(second)


def test_other_intervals_limits_and_datasources_are_planned_apart() -> None:
    view = BrokerServerView()
    view.add_server(H1)
    for day in DAYS:
        view.add_segment(H1.name, segment(interval=day))
    view.add_segment(H1.name, segment(ds="other", interval=DAYS[0]))
    planner = SegmentPlanner(view, size=2)
    narrow = planner.plan(sum_query("2015-09-11/2015-09-13"))
    assert len(narrow.tasks) == 2
    assert len(planner.plan(sum_query("2015-09-01/2015-09-30")).tasks) == 6
    assert len(planner.plan(sum_query("2015-09-01/2015-09-30", ds="other")).tasks) == 1
    gaps = planner.plan(sum_query("2015-09-01/2015-09-30", uncoveredIntervalsLimit=5))
    assert [str(i) for i in gaps.uncovered] == [
        "2015-09-01T00:00:00.000Z/2015-09-10T00:00:00.000Z",
        "2015-09-16T00:00:00.000Z/2015-09-30T00:00:00.000Z",
    ]
    assert planner.plan(sum_query("2015-09-11/2015-09-13")) is not narrow  # evicted (size 2), same tasks
    assert ids(planner.plan(sum_query("2015-09-11/2015-09-13"))) == ids(narrow)
    assert planner.plan(sum_query("2015-09-01/2015-09-30", ds="missing")).tasks == ()


def test_the_etag_names_the_segments_read_and_skips_real_time_ones() -> None:
    from broker_service.result_cache import segments_etag

    view = BrokerServerView()
    view.add_server(H1)
    rt = ServerMetadata("rt:8100", "rt:8100", ServerType.REALTIME, "_default_tier", 0)
    view.add_server(rt)
    for day in DAYS[:3]:
        view.add_segment(H1.name, segment(interval=day))
    planner = SegmentPlanner(view)
    query = sum_query("2015-09-10/2015-09-20")
    tag = segments_etag(planner.plan(query))
    assert tag is not None and tag == segments_etag(plan_segments(view, query))  # a fresh plan agrees
    assert segments_etag(planner.plan(sum_query("2015-09-10/2015-09-12"))) != tag  # clipped differently
    live = segment(interval=DAYS[3])
    view.add_segment(rt.name, live)
    assert segments_etag(planner.plan(query)) is None  # a real-time segment: never cached whole
    view.add_segment(H1.name, live)  # handed off: a historical serves it too, same timeline entry
    handed = segments_etag(planner.plan(query))
    assert handed is not None and handed != tag


def test_tasks_are_equal_by_selector_and_descriptor_and_key_their_cache_entries_by_the_descriptor() -> None:
    view = BrokerServerView()
    view.add_server(H1)
    for day in DAYS[:2]:
        view.add_segment(H1.name, segment(interval=day))
    query = sum_query("2015-09-10T06:00:00.000Z/2015-09-12")
    first, again = plan_segments(view, query).tasks, plan_segments(view, query).tasks
    assert first == again and [hash(t) for t in first] == [hash(t) for t in again]
    assert first[0] != first[1] and len({*first, *again}) == 2
    assert SegmentTask(first[0].selector, first[1].descriptor) != first[0]
    for task in first:  # oracle: Druid's key prefix, the clipped interval's bounds, version, partition
        d = task.descriptor
        expected = (
            struct.pack(">qq", d.interval.start, d.interval.end) + d.version.encode() + struct.pack(">i", 0)
        )
        assert task.cache_key_prefix == expected and task.cache_key_prefix is task.cache_key_prefix
    assert str(first[0].descriptor.interval) == "2015-09-10T06:00:00.000Z/2015-09-11T00:00:00.000Z"
