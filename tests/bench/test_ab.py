"""bench.ab's reading of the benchmarks' figures: which figures are compared, and how."""

from __future__ import annotations

import json
from pathlib import Path

from bench.ab import compare, flatten

FIGURES = {
    "rows": 1000,
    "end_to_end": [{"query": "count", "broker_ms": "0.8 [0.7-7.0]", "same_answer": True,
                    "cpu_ms_per_query": {"broker": 2.0, "historical0": 9.0}}],
    "results": [{"scenario": "cold", "qps": 28, "cpu_us_per_query": 2879, "qps_rounds": "16 36 28"}],
}  # fmt: skip


def test_figures_are_named_by_query_and_scenario_and_read_as_their_median() -> None:
    assert dict(flatten(FIGURES)) == {
        "/end_to_end/count/broker_ms": 0.8,
        "/end_to_end/count/cpu_ms_per_query/broker": 2.0,
        "/results/cold/qps": 28.0,
        "/results/cold/cpu_us_per_query": 2879.0,
    }


def test_each_side_is_the_median_of_its_rounds(tmp_path: Path) -> None:
    for round_, (before, after) in enumerate([(10, 11), (30, 12), (20, 13)], start=1):
        for side, qps in (("before", before), ("after", after)):
            figures = {"results": [{"scenario": "cold", "qps": qps}]}
            (tmp_path / f"{round_}-{side}-throughput.json").write_text(json.dumps(figures))
    (row,) = compare(tmp_path, ["throughput"])
    assert (row["figure"], row["before"], row["after"], row["ratio"], row["kind"]) == (
        "/results/cold/qps", 20, 12, 0.6, "higher")  # fmt: skip
