"""The component benchmarks of `python -m bench` and the arguments each runs with: one list that the
runner (`bench.__main__`) and the page (`bench.report`, the command beside each table) both read."""

from __future__ import annotations


def benchmarks(rows: int, segments: int) -> dict[str, list[str]]:
    """Name -> arguments of each component benchmark at the requested size."""
    size = ["--rows", str(rows), "--segments", str(segments)]
    return {
        "timeline": [],
        "ingest": ["--repeat", "3"],
        "historical": [],
        "broker": [*size, "--repeat", "5", "--seconds", "5"],
        "cache": [*size, "--repeat", "5", "--seconds", "5"],
        "cache_down": ["--rows", str(min(rows, 1_000_000)), "--segments", "50", "--repeat", "9"],
        "sql": ["--repeat", "500", *size, "--e2e-repeat", "5"],
        "scaling": [],
        "many_segments": ["--repeat", "3"],  # 100,000 one-hour segments: about 15 minutes
        "spark_ingest": ["--rows", str(min(rows, 2_000_000))],
        "compaction": ["--rows", str(min(rows, 3_000_000))],
        "spark_read": [],
        "realtime": [],
        "throughput": ["--rows", str(min(rows, 1_000_000)), "--segments", "100", "--repeat", "3"],
    }
