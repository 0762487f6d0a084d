"""`python -m bench`'s report: tables from any figures, the plots from the ones they draw, and
the page that puts bench/notes.md's sections before their benchmark's tables."""

from __future__ import annotations

from pathlib import Path

from bench.report import PLOTS, median_of, render_page, split_notes, write_report

RESULTS = {
    "cache": {"seconds": 12.0, "printed": "...", "figures": {"cold_warm": [
        {"cache": "lru", "query": "timeseries", "cold_ms": "120.0 [110-130]", "warm_ms": "3.1 [3-4]",
         "whole_answer_ms": "1.2 [1-2]", "duckdb_ms": "80.5 [80-81]", "same_answer": True}]}},
    "scaling": {"seconds": 30.0, "printed": "...", "figures": {
        "segments": [{"segments": n, "cold_ms": f"{n / 10} [1-2]", "warm_ms": "2 [1-3]", "duckdb_ms": "3 [2-4]"}
                     for n in (10, 100, 1000)],
        "concurrency": [{"clients": c, "qps": 100 * c} for c in (1, 4, 16)]}},
    "realtime": {"error": "exit 1", "tail": "boom"},
    "throughput": {"seconds": 90.0, "printed": "...", "figures": {"sweep": [
        {"scenario": s, "connections": c, "qps": q * c, "p50_ms": 0.5 * c, "p99_ms": 2.0 * c}
        for s, q in (("floor", 5000), ("whole-answer hits", 4000)) for c in (1, 4, 16, 64)]}},
    "_run": {"rows": 1000, "segments": 10, "machine": "2 cores", "date": "2026-11-25 10:34 UTC"},
}  # fmt: skip
NOTES = "Intro.\n\n## Cache (`python -m bench.cache`)\n<!-- suite: cache -->\n\nWarm is fast.\n\n## Other\n\nText.\n"


def test_report_renders_tables_and_plots(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    write_report(RESULTS, tmp_path, page, notes)
    text = page.read_text()
    assert "| cache | query | cold_ms |" in text and "| 100 | " in text
    assert "Not run: exit 1" in text
    for png in PLOTS:
        assert (tmp_path / png).stat().st_size > 1000 and f"](../{png})" in text


def test_each_note_section_comes_before_its_suite_tables() -> None:
    text = render_page(RESULTS, NOTES, "../bench")
    assert (
        text.index("Warm is fast.") < text.index("python -m bench.cache --rows 1000") < text.index("## Other")
    )
    assert "<!-- suite:" not in text and "2 cores" in text
    # benchmarks no note claims still get a section of their own
    assert "## scaling" in text and "## realtime" in text and "## _run" not in text
    assert render_page(RESULTS, NOTES, "../bench") == text  # pure: the docs tests rely on it


def test_split_notes() -> None:
    intro, sections = split_notes(NOTES)
    assert intro == "Intro." and [s for s, _ in sections] == ["cache", ""]


def test_median_of_reads_spread_figures() -> None:
    assert median_of("12.5 [11.0-15.2]") == 12.5
    assert median_of(7) == 7.0
    assert median_of("n/a") is None
