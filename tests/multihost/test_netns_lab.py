"""The namespace harness itself: hosts reach each other and the client over the bridge, a cut
host is unreachable until reconnected, and everything is gone afterwards, also after a failure."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.netns import Host, NetnsLab, lab_names, unavailable

WHY = unavailable()
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90),
              pytest.mark.skipif(WHY is not None, reason=f"no network namespaces here: {WHY}")]  # fmt: skip

SERVE = "import socket,sys; s=socket.create_server((sys.argv[1], 9000)); c,_=s.accept(); c.sendall(b'hi'); c.close()"
ASK = ("import socket,sys; c=socket.create_connection((sys.argv[1], 9000), timeout=2); "
       "print(c.recv(2).decode())")  # fmt: skip


def _serve_once(host: Host) -> None:
    subprocess.Popen([*host.prefix, sys.executable, "-c", SERVE, host.address], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while "9000" not in host.run(["ss", "-ltn"]).stdout and time.monotonic() < deadline:
        time.sleep(0.05)


def test_hosts_reach_each_other_and_the_client_and_a_cut_host_is_unreachable(tmp_path: Path) -> None:
    with NetnsLab(tmp_path, ["a", "b"]) as lab:
        a, b = lab["a"], lab["b"]
        assert a.address != b.address and lab.client_address.endswith(".1")
        assert a.root != b.root and a.root.is_dir()
        # loopback is up inside, and 127.0.0.1 there is the host's own, not the machine's
        assert "inet 127.0.0.1/8" in a.run(["ip", "addr", "show", "lo"]).stdout
        _serve_once(a)
        got = b.run([sys.executable, "-c", ASK, a.address])
        assert got.stdout.strip() == "hi", got.stderr
        _serve_once(b)
        with socket.create_connection((b.address, 9000), timeout=5) as c:  # from the client host
            assert c.recv(2) == b"hi"
        _serve_once(a)
        a.cut()
        refused = b.run([sys.executable, "-c", ASK, a.address])
        assert refused.returncode != 0 and ("timed out" in refused.stderr or "unreachable" in refused.stderr)
        a.reconnect()
        deadline = time.monotonic() + 10
        while (got := b.run([sys.executable, "-c", ASK, a.address])).returncode != 0:
            assert time.monotonic() < deadline, got.stderr
        assert got.stdout.strip() == "hi"
        # nothing routes off the subnet: no default route inside
        assert "default" not in a.run(["ip", "route"]).stdout
    assert not [n for n in lab_names() if lab.run_id in n]


def test_everything_is_torn_down_after_a_failure(tmp_path: Path) -> None:
    lab = NetnsLab(tmp_path, ["x"])
    with pytest.raises(RuntimeError, match="boom"), lab:
        host = lab["x"]
        sleeper = subprocess.Popen([*host.prefix, "sleep", "300"], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10  # running inside (ip netns exec has entered the namespace)
        while str(sleeper.pid) not in subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True,
                                                     text=True, timeout=10).stdout.split():  # fmt: skip
            assert time.monotonic() < deadline
            time.sleep(0.02)
        raise RuntimeError("boom")
    assert sleeper.wait(10) == -9  # killed by the teardown: nothing outlives the lab
    assert not [n for n in lab_names() if lab.run_id in n]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert lab.bridge not in links and f"sv{lab.run_id}" not in links
