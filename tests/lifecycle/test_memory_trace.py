"""The operator's memory trace (strata.server.memory_trace): off unless asked, and a report names the
line whose allocations grew."""

from __future__ import annotations

import tracemalloc
from typing import Any

import duckdb
import pytest

from strata.query.duck_allocator import allocator_stats, purge
from strata.server.memory_trace import ENV, MemoryTrace, allocator_bytes, resident_bytes, trace_from_env


def test_off_without_the_variable_or_with_a_bad_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert trace_from_env() is None
    monkeypatch.setenv(ENV, "soon")
    assert trace_from_env() is None
    monkeypatch.setenv(ENV, "0")
    assert trace_from_env() is None


def test_a_report_names_the_growing_line_and_the_gauges() -> None:
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        trace = MemoryTrace(3600, {"engine": lambda: 3 << 20, "broken": _broken}, top=50)
        first = trace.report()
        kept: list[Any] = []
        kept.append([bytes(1000) for _ in range(4000)])  # about 4 MB from this very line
        lines = trace.report()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    assert "engine=3.0MiB" in first[0] and "broken" not in first[0] and "rss=" in first[0]
    grown = [line for line in lines[1:] if line.endswith(f"{__file__}:{_line_of('kept.append')}")]
    assert grown, lines
    assert float(grown[0].split("MiB")[0]) > 3.5


def test_process_figures() -> None:
    assert resident_bytes() > 1 << 20
    held = allocator_bytes()
    if held:  # glibc
        assert held["heap"] >= held["used"] > 0 and held["free"] >= 0


def _broken() -> int:
    raise RuntimeError("closed meanwhile")


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if line.strip().startswith(text))


def test_duckdbs_allocator_is_read_and_purged() -> None:
    """The pages a finished statement freed stay resident until purged (jemalloc without its
    background threads), and a purge gives them back."""
    with duckdb.connect(config={"threads": 1}) as conn:
        conn.execute("SELECT count(DISTINCT range::VARCHAR) FROM range(300000)").fetchall()
        held = allocator_stats()
        assert held["resident"] - held["allocated"] > 4 << 20, held
        assert purge()
        after = allocator_stats()
    assert after["resident"] < held["resident"] - (4 << 20), (held, after)
