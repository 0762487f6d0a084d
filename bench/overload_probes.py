"""What bench.overload watches while a scenario runs, to tell where a cheap query's time goes: each
server's event-loop lag seen from outside (the latency of its trivial `/status/health`, answered by
the loop alone) and the broker's own (its `strata_broker_event_loop_lag_seconds` histogram: how late
a timer ran), the broker's `/status` (queries admitted, SQL engine slots busy, the low lane), the
CPU seconds of each process and of each kind of thread in it beside its nice value
(bench.thread_cpu), the load average, and optionally py-spy's collapsed stacks of the
broker per thread.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from bench.measure import cpu_seconds, percentile
from bench.profile_stacks import py_spy, top_frames
from bench.thread_cpu import ThreadCpu

HEALTH_PERIOD_S = 0.05
STATUS_PERIOD_S = 0.25
LAG_METRIC = "strata_broker_event_loop_lag_seconds"
_BUCKET = re.compile(LAG_METRIC + r'_bucket\{le="([^"]+)"\} (\S+)')
_SUM = re.compile(LAG_METRIC + r"_sum (\S+)")


def latency_summary(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"n": 0, "p50_ms": float("nan"), "p90_ms": float("nan"), "p99_ms": float("nan")}
    return {
        "n": len(latencies),
        **{f"p{q}_ms": round(percentile(latencies, q / 100) * 1000, 1) for q in (50, 90, 99)},
    }


class Probes:
    """Health latency per server and the broker's status, sampled in threads, and the CPU seconds of
    `pids` (name -> pid) between enter and exit. Use as a context manager."""

    def __init__(self, health_urls: Mapping[str, str], broker_url: str, pids: Mapping[str, int]) -> None:
        self.health_urls = dict(health_urls)
        self.broker_url = broker_url
        self.pids = {**pids, "bench": os.getpid()}  # the heavy clients' process is added when it starts
        self.health: dict[str, list[float]] = {name: [] for name in health_urls}
        self.status: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._cpu: dict[str, float] = {}
        self._wall = 0.0
        self._load: tuple[float, ...] = ()
        self._lag: LagReading = ({}, 0.0)
        self.loop_lag: dict[str, float] = {}
        self.threads: ThreadCpu | None = None

    def __enter__(self) -> Probes:
        self.threads = ThreadCpu(self.pids).__enter__()
        self._lag = self._lag_now()
        self._cpu = self._cpu_now()
        self._wall = time.monotonic()
        self._load = os.getloadavg()
        for name, url in self.health_urls.items():
            self._threads.append(threading.Thread(target=self._health, args=(name, url), daemon=True))
        self._threads.append(threading.Thread(target=self._status, daemon=True))
        for t in self._threads:
            t.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        wall = time.monotonic() - self._wall
        now = self._cpu_now()
        self.cpu = {name: round(now[name] - self._cpu[name], 1) for name in now if name in self._cpu}
        self.cpu["wall"] = round(wall, 1)
        self.load = [round(x, 2) for x in (*self._load, *os.getloadavg())]
        self.loop_lag = lag_summary(self._lag, self._lag_now())
        if self.threads is not None:
            self.threads.__exit__(kind, exc, tb)

    def summary(self) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if self.status:
            for key in ("running", "queued", "engine_busy", "low_running"):
                values = [s[key] for s in self.status]
                status[key] = {"mean": round(sum(values) / len(values), 2), "max": max(values)}
        return {
            "health_ms": {name: latency_summary(v) for name, v in self.health.items()},
            "broker_status": status,
            "broker_loop_lag_ms": self.loop_lag,
            "cpu_s": self.cpu,
            "thread_cpu_s": {} if self.threads is None else self.threads.summary(),
            "loadavg_start_end": self.load,
        }

    def _lag_now(self) -> LagReading:
        try:
            text = httpx.get(self.broker_url + "/metrics", timeout=30).text
        except httpx.HTTPError:
            return {}, 0.0
        buckets = {float(le): float(n) for le, n in _BUCKET.findall(text)}
        total = _SUM.search(text)
        return buckets, float(total.group(1)) if total else 0.0

    def _cpu_now(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            try:
                out[name] = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
        return out

    def _health(self, name: str, url: str) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._stop.wait(HEALTH_PERIOD_S):
                started = time.perf_counter()
                try:
                    ok = client.get(url + "/status/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    self.health[name].append(time.perf_counter() - started)

    def _status(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._stop.wait(STATUS_PERIOD_S):
                try:
                    body = client.get(self.broker_url + "/status").json()
                except (httpx.HTTPError, ValueError):
                    continue
                self.status.append(
                    {
                        "running": body["runningQueries"],
                        "queued": body["queuedQueries"],
                        "engine_busy": body["sqlEngine"]["busy"],
                        "low_running": body.get("lanes", {}).get("low", {}).get("running", 0),
                    }
                )


LagReading = tuple[dict[float, float], float]  # cumulative count per bucket bound, sum of seconds


def lag_summary(before: LagReading, after: LagReading) -> dict[str, float]:
    """The loop-lag samples taken between two reads of the histogram: how many, their mean, and the
    bucket bound under which 50/90/99% of them fell (ms)."""
    counts = {le: n - before[0].get(le, 0.0) for le, n in after[0].items()}
    n = counts.get(float("inf"), 0.0)
    if n <= 0:
        return {}
    out = {"n": n, "mean_ms": round((after[1] - before[1]) / n * 1000, 2)}
    for q in (50, 90, 99):
        bound = min(le for le, c in counts.items() if c >= n * q / 100)
        out[f"p{q}_le_ms"] = bound * 1000
    return out


def record(pid: int, seconds: float, out: Path, *, gil: bool = False) -> subprocess.Popen[bytes]:
    """py-spy recording `pid`'s threads (collapsed stacks, each rooted at its thread) into `out`;
    `gil`: only the thread holding the interpreter lock at each sample."""
    argv = [py_spy(), "record", "-p", str(pid), "-d", f"{seconds:.0f}", "-r", "100", "-f", "raw", "--threads",
            "--nonblocking", "-o", str(out), *(["--gil"] if gil else [])]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


_THREAD = re.compile(r"^thread \(\d+\): ([^;]*);?")
_NUMBERED = re.compile(r"[_-]\d+$")


def by_thread(text: str, seconds: float, rate: int = 100) -> dict[str, Any]:
    """Busy share of a core per thread kind (`sql-engine_3` -> `sql-engine`) from a `--threads`
    recording (of a `--gil` one: the share of the time each held the interpreter lock), and the
    main thread's (the event loop's) top frames."""
    busy: Counter[str] = Counter()
    main: list[str] = []
    for line in text.splitlines():
        found = _THREAD.match(line)
        count = line.rpartition(" ")[2]
        if found is None or not count.isdigit():
            continue
        kind = _NUMBERED.sub("", found.group(1))
        busy[kind] += int(count)
        if kind == "MainThread":
            main.append(line[found.end() :])
    samples = max(1.0, seconds * rate)
    return {
        "busy_cores": {k: round(n / samples, 2) for k, n in busy.most_common()},
        "main_thread_top": top_frames("\n".join(main), 12, scaffolding=1.0),
    }
