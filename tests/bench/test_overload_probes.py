"""bench.overload_probes: py-spy's per-thread stacks read as each thread kind's share of a core, and
the broker's loop-lag histogram read as the samples taken between two scrapes."""

from __future__ import annotations

from bench.overload_probes import by_thread, lag_summary

RAW = """\
thread (101): MainThread;run (base_events.py:1);_run_once (base_events.py:2);loads (sql_execution.py:3) 50
thread (101): MainThread;run (base_events.py:1);select (selectors.py:4) 10
thread (102): sql-engine_0;_worker (thread.py:5);_encoded (sql_execution.py:6) 80
thread (103): sql-engine_1;_worker (thread.py:5);_encoded (sql_execution.py:6) 40
not a stack line
"""


def test_threads_of_a_pool_count_together_and_the_main_threads_frames_are_ranked() -> None:
    found = by_thread(RAW, seconds=2, rate=100)
    # 200 samples in 2 s at 100 Hz are one core
    assert found["busy_cores"] == {"sql-engine": 0.6, "MainThread": 0.3}
    top = found["main_thread_top"]
    assert top[0].split() == ["100.0%", "0.0%", "run", "(base_events.py)"]
    assert any(line.endswith("loads (sql_execution.py)") and "83.3%" in line for line in top)


def test_the_lag_between_two_scrapes_is_the_difference_of_their_buckets() -> None:
    inf = float("inf")
    before = ({0.001: 90.0, 0.01: 95.0, 0.1: 100.0, inf: 100.0}, 0.5)
    # 100 more samples: 50 under 1 ms, 40 more under 10 ms, 9 under 100 ms, 1 beyond
    after = ({0.001: 140.0, 0.01: 185.0, 0.1: 199.0, inf: 200.0}, 2.5)
    assert lag_summary(before, after) == {"n": 100.0, "mean_ms": 20.0, "p50_le_ms": 1.0, "p90_le_ms": 10.0,
                                          "p99_le_ms": 100.0}  # fmt: skip
    assert lag_summary(after, after) == {}
