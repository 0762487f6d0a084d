"""The same data segmented many ways, and versions replacing each other, through a real broker.

One module-scoped cluster (ZooKeeper, two historicals polling one metadata store, one broker);
each test ingests its own data sources while it runs. Every answer is checked against DuckDB over
the rows that should be visible: segmentation must never change an answer, a newer version wins
only where it is complete, and appended partitions count.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.ingestion.api import ingest
from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import (
    SYNTHETIC,
    WIKIPEDIA,
    Nodes,
    assert_answers,
    assert_answers_eventually,
    cluster,
    synthetic_spec,
    wait_settled,
    write_rows,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WIKI_DAY = "2015-09-12/2015-09-13"
WIKI_LAYOUTS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "wiki_hour": ("hour", None),
    "wiki_day": ("day", None),
    "wiki_day_dynamic": ("day", {"type": "dynamic", "maxRowsPerSegment": 5000}),
    "wiki_hour_dynamic": ("hour", {"type": "dynamic", "maxRowsPerSegment": 1000}),
    "wiki_day_hashed": ("day", {"type": "hashed", "numShards": 3}),
    "wiki_hour_hashed_by_page": ("hour", {"type": "hashed", "numShards": 2, "partitionDimensions": ["page"]}),
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, wikipedia_sample: Path,
        wikipedia_index_spec: Path) -> Iterator[dict[str, Any]]:  # fmt: skip
    root = tmp_path_factory.mktemp("segmentation")
    stores: dict[str, Any] = {"deep_storage": root / "deep", "metadata": root / "meta.db"}
    tutorial = json.loads(wikipedia_index_spec.read_text())
    tutorial["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
    partitions: dict[str, list[tuple[str, int]]] = {}
    for name, (granularity, partitions_spec) in WIKI_LAYOUTS.items():
        spec = copy.deepcopy(tutorial)
        spec["spec"]["dataSchema"]["dataSource"] = name
        spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = granularity
        if partitions_spec:
            spec["spec"]["tuningConfig"]["partitionsSpec"] = partitions_spec
            spec["spec"]["tuningConfig"].pop("maxRowsPerSegment", None)
        summary = ingest(spec, **stores)
        partitions[name] = [(str(w.segment.interval), w.segment.partition_num) for w in summary.segments]
    with cluster(root, zk_hosts, f"/strata-seg-{uuid.uuid4().hex[:8]}") as nodes:
        wait_settled(nodes.broker, root / "meta.db", nodes.historicals)
        yield {"nodes": nodes, "root": root, "stores": stores, "partitions": partitions}


def chunks(partitions: list[tuple[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for interval, _ in partitions:
        out[interval] = out.get(interval, 0) + 1
    return out


def test_layouts_really_differ(env: dict[str, Any]) -> None:
    """The premise of the answer test: each layout cuts the day into a different set of segments."""
    p = env["partitions"]
    assert len(chunks(p["wiki_hour"])) == 24 and max(chunks(p["wiki_hour"]).values()) == 1
    assert chunks(p["wiki_day"]) == {"2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z": 1}
    assert max(chunks(p["wiki_day_dynamic"]).values()) == 8  # 39,244 rows / 5,000
    assert max(chunks(p["wiki_hour_dynamic"]).values()) >= 2
    assert len(p["wiki_day_hashed"]) == 3
    assert max(chunks(p["wiki_hour_hashed_by_page"]).values()) == 2


@pytest.mark.parametrize("data_source", list(WIKI_LAYOUTS))
def test_every_layout_gives_the_raw_answers(
    env: dict[str, Any], data_source: str, wikipedia_sample: Path
) -> None:
    assert_answers(env["nodes"].broker, data_source, WIKI_DAY, wikipedia_sample, WIKIPEDIA)


def test_a_sub_interval_cuts_through_segments_the_same_way(
    env: dict[str, Any], wikipedia_sample: Path
) -> None:
    """An interval ending mid-segment: day segments are clipped to it, as hour segments are selected."""
    for data_source in ("wiki_day_dynamic", "wiki_hour_hashed_by_page"):
        assert_answers(env["nodes"].broker, data_source, "2015-09-12T05:30:00Z/2015-09-12T17:00:00Z",
                       wikipedia_sample, WIKIPEDIA)  # fmt: skip


# -- versions ------------------------------------------------------------------------------------


def rows(days: list[int], hours: range, per_hour: int, tag: str) -> list[dict[str, Any]]:
    """Deterministic rows; `tag` makes a re-ingestion's keys and values differ from the original's."""
    out = []
    for d in days:
        for h in hours:
            for i in range(per_hour):
                out.append({"ts": f"2020-01-{d:02d}T{h:02d}:{7 * i % 60:02d}:00Z",
                            "k": f"{tag}{(h * 7 + i + d) % 5}", "n": (d * 100 + h * 10 + i) * (3 if tag == "new" else 1)})  # fmt: skip
    return out


def outside(rs: list[dict[str, Any]], lo: str, hi: str) -> list[dict[str, Any]]:
    return [r for r in rs if not lo <= r["ts"] < hi]


def visible_rows(env: dict[str, Any], name: str, rs: list[dict[str, Any]]) -> Path:
    return write_rows(env["root"] / "oracle" / f"{name}-{uuid.uuid4().hex[:6]}.json", rs)


def ingest_rows(env: dict[str, Any], data_source: str, rs: list[dict[str, Any]], granularity: str,
                **kw: Any) -> Any:  # fmt: skip
    path = write_rows(env["root"] / "input" / f"{data_source}-{uuid.uuid4().hex[:6]}.json", rs)
    return ingest(synthetic_spec(data_source, path, granularity, **kw), **env["stores"])


def settle(env: dict[str, Any]) -> None:
    nodes: Nodes = env["nodes"]
    wait_settled(nodes.broker, env["root"] / "meta.db", nodes.historicals)


def test_overwrite_of_part_of_the_interval_shows_new_data_there_and_old_elsewhere(
    env: dict[str, Any],
) -> None:
    broker = env["nodes"].broker
    old = rows([1, 2, 3], range(24), 3, "old")
    first = ingest_rows(env, "overwrite", old, "day")
    # hourly segments of a new version cover 06:00-12:00 of day 2 only: the old day-2 segment stays
    # used (it is only partly covered) and must be overshadowed for those six hours alone
    new = rows([2], range(6, 12), 4, "new")
    second = ingest_rows(env, "overwrite", new, "hour")
    assert second.version > first.version and len(second.segments) == 6
    settle(env)
    expected = visible_rows(env, "overwrite", outside(old, "2020-01-02T06", "2020-01-02T12") + new)
    assert_answers_eventually(broker, "overwrite", "2020-01-01/2020-01-04", expected, SYNTHETIC)
    assert_answers_eventually(
        broker, "overwrite", "2020-01-02T04:00:00Z/2020-01-02T14:00:00Z", expected, SYNTHETIC
    )

    # a whole-day overwrite of day 3 retires the old day-3 segment
    day3 = rows([3], range(0, 24, 2), 2, "new")
    ingest_rows(env, "overwrite", day3, "day")
    settle(env)
    combined = (
        outside(outside(old, "2020-01-02T06", "2020-01-02T12"), "2020-01-03", "2020-01-04") + new + day3
    )
    expected = visible_rows(env, "overwrite", combined)
    assert_answers_eventually(broker, "overwrite", "2020-01-01/2020-01-04", expected, SYNTHETIC)


def test_appended_partitions_are_counted(env: dict[str, Any]) -> None:
    original = rows([1, 2], range(24), 2, "old")
    first = ingest_rows(env, "append", original, "day")
    more = rows([2], range(3, 20), 3, "new")
    appended = ingest_rows(env, "append", more, "day", append=True)
    (segment,) = [w.segment for w in appended.segments]
    assert segment.version == first.version and segment.partition_num == 1  # a new partition, not a version
    settle(env)
    assert_answers_eventually(env["nodes"].broker, "append", "2020-01-01/2020-01-03",
                   visible_rows(env, "append", original + more), SYNTHETIC)  # fmt: skip


def test_an_incomplete_newer_version_does_not_overshadow_the_complete_older_one(env: dict[str, Any]) -> None:
    broker, meta = env["nodes"].broker, env["root"] / "meta.db"
    old = rows([1, 2], range(24), 2, "old")
    ingest_rows(env, "incomplete", old, "day")
    new = rows([1], range(24), 4, "new")
    second = ingest_rows(
        env, "incomplete", new, "day", partitions={"type": "dynamic", "maxRowsPerSegment": 50}
    )
    parts = sorted((w.segment for w in second.segments), key=lambda s: s.partition_num)
    assert len(parts) == 2 and all(p.shard_spec.to_json()["partitions"] == 2 for p in parts)
    store = open_metadata_store(meta)
    try:
        (old_day1,) = [r.segment for r in store.segments("incomplete", include_unused=True)
                       if not r.used and str(r.segment.interval).startswith("2020-01-01")]  # fmt: skip
        assert store.mark_used([old_day1.id]) == 1  # the complete old version is served again
    finally:
        store.close()
    drop = subprocess.run([sys.executable, "-m", "strata.cli.main", "segments", "drop", parts[1].id, "--metadata", str(meta)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert drop.returncode == 0, drop.stderr
    settle(env)  # old day 1, old day 2 and the lone partition 0 of the new version are all served
    assert_answers_eventually(
        broker, "incomplete", "2020-01-01/2020-01-03", visible_rows(env, "incomplete", old), SYNTHETIC
    )

    restore = subprocess.run([sys.executable, "-m", "strata.cli.main", "segments", "restore", parts[1].id, "--metadata",
                              str(meta)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert restore.returncode == 0, restore.stderr
    settle(env)  # now complete, the new version wins day 1
    combined = visible_rows(env, "incomplete", outside(old, "2020-01-01", "2020-01-02") + new)
    assert_answers_eventually(broker, "incomplete", "2020-01-01/2020-01-03", combined, SYNTHETIC)
