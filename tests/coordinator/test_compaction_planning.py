"""Auto-compaction's choices and the compact task's pure parts, on segments built by hand: which chunks
are due, compacted, skipped or running (Druid's CompactSegments and its AutoCompactionSnapshot),
configs Druid refuses, a segment appended meanwhile upgraded into the compacted chunk, and the
input a compaction reads (the timeline's visible parts only)."""

from __future__ import annotations

from typing import Any

import pytest

from strata.coordinator.auto_compaction import chunks_of, plan, task_body
from strata.coordinator.compact_task import upgraded
from strata.coordinator.compaction_config import (
    ConfigError,
    history,
    parse_datasource_config,
    task_capacity,
    with_datasource,
    with_slots,
    without_datasource,
)
from strata.coordinator.compaction_input import visible_inputs
from strata.coordinator.compaction_spec import parse_compaction
from strata.coordinator.task_context import TaskFailed
from strata.coordinator.task_types import InvalidTask
from timeline import DataSegment, Granularity, Interval, ShardSpec

HOUR = 3_600_000
DAY = 24 * HOUR
D0 = Interval.parse("2020-01-01/2020-01-02").start


def seg(
    start: int, end: int, version: str = "v1", part: int = 0, size: int = 100, **extra: Any
) -> DataSegment:
    shard = ShardSpec.none() if part == 0 else ShardSpec.numbered(part, 1)
    return DataSegment("w", Interval(start, end), version, {"type": "local", "path": f"/x/{start}/{version}/{part}"},
                       ("k",), (), shard, size=size, extra=extra)  # fmt: skip


def hours(day: int, version: str = "v1") -> list[DataSegment]:
    return [seg(D0 + day * DAY + h * HOUR, D0 + day * DAY + (h + 1) * HOUR, version) for h in range(24)]


def config(**extra: Any) -> dict[str, Any]:
    return parse_datasource_config(
        {"dataSource": "w", "granularitySpec": {"segmentGranularity": "day"}, **extra}
    )


def test_a_posted_config_gets_druids_defaults_and_bad_ones_are_refused() -> None:
    c = parse_datasource_config({"dataSource": "w"})
    assert c["taskPriority"] == 25 and c["inputSegmentSizeBytes"] == 100_000_000_000_000
    assert c["skipOffsetFromLatest"] == "P1D" and c["tuningConfig"] is None and c["maxRowsPerSegment"] is None
    for bad, message in [
        ({}, "'dataSource' is required"),
        ({"dataSource": "w", "skipOffsetFromLatest": "yesterday"}, "skipOffsetFromLatest"),
        ({"dataSource": "w", "granularitySpec": {"segmentGranularity": "fortnight"}}, "unknown granularity"),
        ({"dataSource": "w", "tuningConfig": {"partitionsSpec": {"type": "magic"}}}, "partitionsSpec type"),
        ({"dataSource": "w", "taskPriority": "high"}, "taskPriority"),
        ({"dataSource": "w", "metricsSpec": [{"type": "median", "name": "m"}]}, "not supported"),
        ({"dataSource": "w", "transformSpec": {"filter": {"type": "true"}}}, "transformSpec"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_datasource_config(bad)


def test_the_document_holds_one_config_per_data_source_and_the_slots() -> None:
    doc = with_datasource(None, config())
    doc = with_datasource(doc, config(taskPriority=40))
    assert [c["taskPriority"] for c in doc["compactionConfigs"]] == [40]
    assert doc["compactionTaskSlotRatio"] == 0.1 and doc["maxCompactionTaskSlots"] == 2_147_483_647
    with pytest.raises(KeyError):
        without_datasource(doc, "other")
    assert without_datasource(doc, "w")["compactionConfigs"] == []
    assert task_capacity(with_slots(doc, 0.5, None, None), 8) == 4
    assert task_capacity(with_slots(doc, 0.5, 3, None), 8) == 3
    assert task_capacity(doc, 2) == 1  # 10% of 2 slots: Druid keeps at least one
    with pytest.raises(ConfigError):
        with_slots(doc, 1.5, None, None)


def test_history_lists_the_changes_of_one_data_source() -> None:
    import orjson

    def entry(doc: dict[str, Any], when: str) -> dict[str, Any]:
        return {"payload": orjson.dumps(doc).decode(), "auditInfo": {"author": "a", "comment": "", "ip": ""},
                "auditTime": when}  # fmt: skip

    first = with_datasource(None, config())
    other = with_datasource(first, {**config(), "dataSource": "other"})
    second = with_datasource(other, config(taskPriority=40))
    got = history([entry(first, "t1"), entry(other, "t2"), entry(second, "t3")], "w")
    assert [(h["auditTime"], h["compactionConfig"]["taskPriority"]) for h in got] == [("t1", 25), ("t3", 40)]


def test_day_chunks_of_hourly_segments_are_due_newest_first_and_the_latest_day_is_skipped() -> None:
    used = hours(0) + hours(1) + hours(2)
    found = plan(config(), used, [], [])
    assert [c.interval for c in found.due] == [Interval(D0 + DAY, D0 + 2 * DAY), Interval(D0, D0 + DAY)]
    assert [c.interval for c in found.skipped] == [
        Interval(D0 + 2 * DAY, D0 + 3 * DAY)
    ]  # P1D from the latest end
    snap = found.snapshot("w")
    assert snap["intervalCountAwaitingCompaction"] == 2 and snap["segmentCountAwaitingCompaction"] == 48
    assert snap["bytesSkipped"] == 2400 and snap["scheduleStatus"] == "RUNNING"
    everything = plan(config(skipOffsetFromLatest="PT0S"), used, [], [])
    assert len(everything.due) == 3 and not everything.skipped


def test_compacted_running_pending_and_too_large_chunks() -> None:
    state = {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000, "maxTotalRows": None},
             "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE", "rollup": False}}  # fmt: skip
    compacted_day = seg(D0, D0 + DAY, "v2", lastCompactionState=state)
    big = seg(D0 + DAY, D0 + DAY + HOUR, "v3", size=10_000)
    used = [*hours(0), compacted_day, *hours(1), big, *hours(2), *hours(3), *hours(5)]
    found = plan(config(skipOffsetFromLatest="PT0S", inputSegmentSizeBytes=5000), used,
                 [Interval(D0 + 2 * DAY + 5 * HOUR, D0 + 2 * DAY + 6 * HOUR)], [Interval(D0 + 3 * DAY, D0 + 3 * DAY + HOUR)])  # fmt: skip
    assert [c.interval.start for c in found.compacted] == [D0]  # the v2 day overshadows its hours
    assert [c.interval.start for c in found.running] == [D0 + 2 * DAY]  # a task holds a lock there
    assert {c.interval.start for c in found.skipped} == {D0 + DAY, D0 + 3 * DAY}  # too large; pending
    assert [c.interval.start for c in found.due] == [D0 + 5 * DAY]
    # a state asking for other partitions is not compacted by this config
    other = plan(config(skipOffsetFromLatest="PT0S", tuningConfig={"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 10}}),
                 [compacted_day], [], [])  # fmt: skip
    assert len(other.due) == 1


def test_chunks_widen_to_hold_segments_coarser_than_the_granularity() -> None:
    used = [seg(D0, D0 + DAY), seg(D0 + DAY, D0 + DAY + HOUR)]
    chunks = chunks_of(used, Granularity.parse("hour"))
    assert [c.interval for c in chunks] == [Interval(D0, D0 + DAY), Interval(D0 + DAY, D0 + DAY + HOUR)]
    assert [c.interval for c in chunks_of(used, None)] == [s.interval for s in used]


def test_the_task_auto_compaction_submits_is_druids() -> None:
    body = task_body(config(taskContext={"useConcurrentLocks": True}), Interval(D0, D0 + DAY))
    assert body["ioConfig"] == {
        "type": "compact",
        "inputSpec": {"type": "interval", "interval": str(Interval(D0, D0 + DAY))},
    }
    assert body["context"] == {"useConcurrentLocks": True, "priority": 25}
    assert (
        body["granularitySpec"] == {"segmentGranularity": "day"}
        and body["tuningConfig"]["type"] == "index_parallel"
    )
    assert parse_compaction(body).segment_granularity == Granularity.parse("day")


def test_an_appended_segment_is_upgraded_after_the_compacted_partitions() -> None:
    compacted = [seg(D0, D0 + DAY, "v9", 0), seg(D0, D0 + DAY, "v9", 1)]
    compacted[1] = DataSegment("w", Interval(D0, D0 + DAY), "v9", {}, (), (), ShardSpec.numbered(1, 2))
    compacted[0] = DataSegment("w", Interval(D0, D0 + DAY), "v9", {}, (), (), ShardSpec.numbered(0, 2))
    appended = [seg(D0 + 3 * HOUR, D0 + 4 * HOUR, "v1", 1), seg(D0 + DAY, D0 + DAY + HOUR, "v1")]
    out = upgraded(appended, compacted)
    assert len(out) == 1  # the other day holds no compacted data: it stays as it is
    (u,) = out
    assert (u.interval, u.version, u.partition_num, u.shard_spec.partitions) == (
        Interval(D0, D0 + DAY),
        "v9",
        2,
        2,
    )
    assert u.load_spec == appended[0].load_spec and u.extra["upgradedFromSegmentId"] == appended[0].id
    with pytest.raises(TaskFailed, match="more than one compacted time chunk"):
        upgraded([seg(D0 - HOUR, D0 + HOUR, "v1")], compacted)


def test_a_compaction_reads_only_what_queries_see_inside_its_interval() -> None:
    day = seg(D0, D0 + DAY, "v1")
    newer_hour = seg(D0 + 5 * HOUR, D0 + 6 * HOUR, "v2")
    spec = parse_compaction({"type": "compact", "dataSource": "w",
                             "ioConfig": {"inputSpec": {"type": "interval", "interval": "2020-01-01/2020-01-02"}}})  # fmt: skip
    inputs = {i.segment.id: i.keep for i in visible_inputs([day, newer_hour], spec)}
    assert inputs[newer_hour.id] == (newer_hour.interval,)
    assert inputs[day.id] == (
        Interval(D0, D0 + 5 * HOUR),
        Interval(D0 + 6 * HOUR, D0 + DAY),
    )  # around the newer hour
    half = parse_compaction({"type": "compact", "dataSource": "w",
                             "ioConfig": {"inputSpec": {"type": "interval", "interval": "2020-01-01T00:00Z/2020-01-01T12:00Z"}}})  # fmt: skip
    with pytest.raises(TaskFailed, match="extends beyond"):
        visible_inputs([day], half)
    by_ids = parse_compaction({"type": "compact", "dataSource": "w",
                               "ioConfig": {"inputSpec": {"type": "segments", "segments": [day.id]}}})  # fmt: skip
    assert by_ids.interval == day.interval
    with pytest.raises(TaskFailed, match="different from the current used segments"):
        visible_inputs([day, newer_hour], by_ids)
    with pytest.raises(InvalidTask, match="not a segment of"):
        parse_compaction({"type": "compact", "dataSource": "w",
                          "ioConfig": {"inputSpec": {"type": "segments", "segments": ["other_2020"]}}})  # fmt: skip
