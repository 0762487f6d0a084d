"""The shared stop sequence (strata.server.lifecycle.serve) on a real process: drain, cancel, parent watch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from strata.cli.local_servers import free_port
from tests.historical.segment_factory import wait_until
from tests.lifecycle.test_quickstart_lifecycle import alive, wait_gone
from tests.lifecycle.test_servers import port_free

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def start(tmp_path: Path, drain: float, **popen: object) -> tuple[subprocess.Popen[bytes], str, Path]:
    port, marker = free_port(), tmp_path / "stopped"
    argv = [sys.executable, "-m", "tests.lifecycle.slow_app", str(port), str(drain), str(marker)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)  # type: ignore[call-overload]
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _healthy(url), 20, "the app to start")
    return proc, url, marker


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/status/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def in_flight(url: str, seconds: float) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(httpx.get(url + "/slow", params={"s": seconds}, timeout=30).status_code)
        except httpx.HTTPError as e:
            outcome.append(e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    time.sleep(0.5)  # the request is being served
    return thread, outcome


def end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_in_flight_request_finishes_within_the_drain_time(tmp_path: Path) -> None:
    proc, url, marker = start(tmp_path, drain=10)
    try:
        thread, outcome = in_flight(url, 2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        thread.join(10)
        assert outcome == [200]
        assert marker.read_text() == "stopping"  # the stop hook ran (where a node unannounces)
    finally:
        end(proc)


def test_request_past_the_drain_time_is_cancelled_and_the_process_exits_0(tmp_path: Path) -> None:
    proc, url, _ = start(tmp_path, drain=1)
    try:
        thread, outcome = in_flight(url, 40)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0  # about 1 s of drain, not 40
        thread.join(10)
        assert outcome and outcome[0] != 200
        assert port_free(int(url.rsplit(":", 1)[1]))
    finally:
        end(proc)


def test_new_connections_are_refused_while_draining(tmp_path: Path) -> None:
    proc, url, _ = start(tmp_path, drain=10)
    try:
        thread, _outcome = in_flight(url, 3)
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: not _healthy(url), 5, "new requests to be refused")
        assert proc.poll() is None  # still finishing the in-flight one
        assert proc.wait(20) == 0
        thread.join(10)
    finally:
        end(proc)


def test_parent_pid_watch_stops_an_orphan(tmp_path: Path) -> None:
    """The portable fallback alone (no PR_SET_PDEATHSIG): an intermediate parent exits at once."""
    port, marker = free_port(), tmp_path / "stopped"
    launcher = (
        "import os, subprocess, sys\n"
        "env = {**os.environ, 'STRATA_PARENT_PID': str(os.getpid())}\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'tests.lifecycle.slow_app', '{port}', '1', r'{marker}'],"
        " env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "import time, urllib.request\n"
        "for _ in range(200):\n"
        "    try:\n"
        f"        urllib.request.urlopen('http://127.0.0.1:{port}/status/health', timeout=1); break\n"
        "    except OSError: time.sleep(0.1)\n"
    )
    done = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=40,
                          env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})  # fmt: skip
    orphan = int(done.stdout.split()[0])
    try:
        assert wait_gone([orphan], 15) == [], "the orphan kept running"
        assert marker.read_text() == "stopping"  # it stopped the clean way
        assert port_free(port)
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)
