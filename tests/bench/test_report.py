"""`python -m bench`'s report: tables from any figures, the three plots from the ones they draw."""

from __future__ import annotations

from pathlib import Path

from bench.report import median_of, write_report


def test_report_renders_tables_and_plots(tmp_path: Path) -> None:
    results = {
        "cache": {"seconds": 12.0, "printed": "...", "figures": {"cold_warm": [
            {"cache": "lru", "query": "timeseries", "cold_ms": "120.0 [110-130]", "warm_ms": "3.1 [3-4]",
             "whole_answer_ms": "1.2 [1-2]", "duckdb_ms": "80.5 [80-81]", "same_answer": True}]}},
        "scaling": {"seconds": 30.0, "printed": "...", "figures": {
            "segments": [{"segments": n, "cold_ms": f"{n / 10} [1-2]", "warm_ms": "2 [1-3]", "duckdb_ms": "3 [2-4]"}
                         for n in (10, 100, 1000)],
            "concurrency": [{"clients": c, "qps": 100 * c} for c in (1, 4, 16)]}},
        "realtime": {"error": "exit 1", "tail": "boom"},
    }  # fmt: skip
    write_report(results, tmp_path, {"rows": 1000, "segments": 10})
    text = (tmp_path / "results.md").read_text()
    assert "| cache | query | cold_ms |" in text and "| 100 | " in text
    assert "Not run: exit 1" in text
    for png in ("latency_by_query.png", "latency_by_segments.png", "qps_by_clients.png"):
        assert (tmp_path / png).stat().st_size > 1000 and f"]({png})" in text


def test_median_of_reads_spread_figures() -> None:
    assert median_of("12.5 [11.0-15.2]") == 12.5
    assert median_of(7) == 7.0
    assert median_of("n/a") is None
