"""`strata quickstart` as an operator treats it: SIGTERM, kill -9, a second one started by mistake.

The children (ZooKeeper, two historicals, a broker) are found as the quickstart's child processes
in /proc before anything is stopped; every test ends them by pid if they outlive it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.processes import sigint_ignored_by_children
from strata.cli.local_servers import ZooKeeperServer, free_port
from tests.lifecycle.test_servers import port_free

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


@contextmanager
def quickstart(
    work: Path, *extra: str, ignore_sigint: bool = False
) -> Iterator[tuple[subprocess.Popen[str], list[int], list[int]]]:
    """A running quickstart (past its table), its child pids and its ports; all ended on exit."""
    ports = [free_port(), free_port(), free_port(), free_port(), free_port()]
    argv = [sys.executable, "-P", "-m", "strata.cli.main", "quickstart", "--dir", str(work), "--port", str(ports[0]),
            "--historical-ports", f"{ports[1]},{ports[2]}", "--realtime-port", str(ports[3]),
            "--coordinator-port", str(ports[4]), "--drain-seconds", "5", *extra]  # fmt: skip
    # the historicals read the metadata store every second (not 5): what a test publishes or hands
    # off is served within a second
    env = {**os.environ, "STRATA_POLL_PERIOD": "1"}
    with sigint_ignored_by_children(ignore_sigint):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        seen = ""
        while "Ctrl-C to stop" not in seen:
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, seen
            seen += line
        pids.extend(children_of(proc.pid))
        yield proc, pids, ports
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in wait_gone(pids, 15):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("sig", "ignored"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)],
    ids=["SIGTERM", "SIGINT", "SIGINT-inherited-ignored"],
)
def test_signal_stops_every_child_and_frees_the_ports(
    tmp_path: Path, sig: signal.Signals, ignored: bool
) -> None:
    with quickstart(tmp_path, ignore_sigint=ignored) as (proc, pids, ports):
        # ZooKeeper, 2 historicals, the real-time node, the coordinator, the broker
        expected = 6 if ZooKeeperServer.available() else 5
        assert len(pids) == expected, pids
        proc.send_signal(sig)
        assert proc.wait(60) == 0
        assert proc.stdout is not None and "shutting down" in proc.stdout.read()
        assert wait_gone(pids, 5) == []
        assert all(port_free(p) for p in ports)


def test_kill_9_of_the_quickstart_ends_its_children(tmp_path: Path) -> None:
    with quickstart(tmp_path) as (proc, pids, ports):
        assert pids
        proc.kill()
        proc.wait(10)
        assert wait_gone(pids, 30) == [], "children outlived their parent"
        assert all(port_free(p) for p in ports)


def test_a_second_quickstart_says_so_and_exits_1(tmp_path: Path) -> None:
    with quickstart(tmp_path) as (proc, _pids, ports):
        same_dir = subprocess.run(
            [sys.executable, "-P", "-m", "strata.cli.main", "quickstart", "--dir", str(tmp_path), "--port",
             str(free_port()), "--historical-ports", f"{free_port()},{free_port()}", "--realtime-port",
             str(free_port()), "--coordinator-port", str(free_port())],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert same_dir.returncode == 1
        assert same_dir.stderr.strip().count("\n") == 0 and "another quickstart" in same_dir.stderr
        assert f"pid {proc.pid}" in same_dir.stderr
        same_port = subprocess.run(
            [sys.executable, "-P", "-m", "strata.cli.main", "quickstart", "--dir", str(tmp_path / "other"),
             "--port", str(ports[0])],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert same_port.returncode == 1
        assert same_port.stderr.strip().count("\n") == 0 and f"port {ports[0]} is in use" in same_port.stderr
        assert "Traceback" not in same_dir.stderr + same_port.stderr
        assert proc.poll() is None  # the first one is untouched
