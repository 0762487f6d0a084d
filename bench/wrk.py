"""`wrk` (Debian's package) driving one POST endpoint, with its own CPU time measured.

A Python client saturates a core before the broker does, so throughput is measured with wrk:
one thread, keep-alive connections, a Lua script holding the request body and printing the
figures as one JSON line when the run ends. The load generator's CPU (user + system seconds per
wall second, from the kernel's accounting of the reaped child) is reported beside each figure:
on a 2-core machine a generator near 1.0 is the limit, not the server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = {body}

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{{"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":%d,"non2xx":%d}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
"""


@dataclass(frozen=True)
class WrkResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int  # connect/read/write/timeout errors and non-2xx answers
    client_cpu: float  # wrk's CPU seconds per wall second (1.0: one core busy)

    @property
    def qps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, float]:
        return {"qps": round(self.qps), "p50_ms": round(self.p50_ms, 2), "p99_ms": round(self.p99_ms, 2),
                "errors": self.errors, "wrk_cpu": round(self.client_cpu, 2)}  # fmt: skip


def lua_long_string(text: str) -> str:
    """`text` as a Lua long-bracket literal whose closing bracket does not occur in it."""
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    eq = "=" * level
    return f"[{eq}[{text}]{eq}]"


def lua_script(body: bytes) -> str:
    return _SCRIPT.format(body=lua_long_string(body.decode()))


def parse_done_line(stdout: str) -> dict[str, int]:
    """The JSON line the script's `done` prints (the last line starting with `{`)."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"wrk printed no figures:\n{stdout[-2000:]}")
    figures: dict[str, int] = json.loads(lines[-1])
    return figures


def available() -> bool:
    return shutil.which("wrk") is not None


def run_wrk(
    url: str, body: bytes, *, connections: int = 16, seconds: float = 5.0, threads: int = 1
) -> WrkResult:
    """POST `body` to `url` over `connections` keep-alive connections for `seconds`."""
    exe = shutil.which("wrk")
    if exe is None:
        raise RuntimeError("wrk is not installed (scripts/install-system-packages.sh test installs it)")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua_script(body))
        script = f.name
    try:
        argv = [exe, "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s",
                "-s", script, url]  # fmt: skip
        began = time.monotonic()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                _, status, usage = os.wait4(proc.pid, 0)  # its rusage: reaped here, not by Popen
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - began
            out.seek(0)
            text = out.read().decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"wrk exited {proc.returncode}:\n{text[-2000:]}")
        figures = parse_done_line(text)
    finally:
        Path(script).unlink(missing_ok=True)
    return WrkResult(
        requests=figures["requests"],
        seconds=figures["duration_us"] / 1e6,
        p50_ms=figures["p50_us"] / 1e3,
        p99_ms=figures["p99_us"] / 1e3,
        errors=figures["errors"] + figures["non2xx"],
        client_cpu=(usage.ru_utime + usage.ru_stime) / wall,
    )
