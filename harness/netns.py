"""Hosts on one machine: Linux network namespaces on a private bridge, for tests of several hosts.

A `NetnsLab` makes one namespace per host, each with its loopback up and one address on a
private /24 (10.231.X.0/24, X picked per run among subnets no route uses), its end of a veth pair
plugged into a bridge in the root namespace. The bridge holds the subnet's `.1`, so the test
process itself is one more host (the client). Namespaces have no default route: nothing leaves
the subnet. Each host has its own private directory; nothing is shared but the network.

Every name carries this run's id (namespaces `strata-<pid>-<id>-<host>`, links `sb<id>` and
`sv<id><n>`), so runs side by side never meet, and a later run sweeps what a killed run left (its
pid is gone). `close()` kills whatever still runs inside the namespaces (only ours), then deletes
namespaces and links; it runs on exit, on failure, and at interpreter exit.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`; `unavailable()` says why not.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

PREFIX = "strata"
_NS_RE = re.compile(rf"^{PREFIX}-(\d+)-([0-9a-f]+)-")
_ALIAS = f"{PREFIX}-lab"


class NetnsError(RuntimeError):
    """A namespace, link or address could not be made."""


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no `ip`, a sandbox refusing them), or None."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (scripts/install-system-packages.sh test installs it)"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN); running as uid " + str(
            os.geteuid()
        )
    probe = f"{PREFIX}-{os.getpid()}-probe{secrets.token_hex(2)}-p"
    try:
        _ip("netns", "add", probe)
    except (NetnsError, OSError) as e:
        return f"cannot make a network namespace: {e}"
    with contextlib.suppress(NetnsError):
        _ip("netns", "del", probe)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Remove namespaces and bridges left by runs whose process is gone; returns their names."""
    removed: list[str] = []
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        found = _NS_RE.match(name)
        if found and not _pid_alive(int(found.group(1))):
            _kill_inside(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", "type", "bridge", check=False).splitlines():
        alias = re.search(rf"alias {_ALIAS}-(\d+)", line)
        link = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
        if alias and link and not _pid_alive(int(alias.group(1))):
            _ip("link", "del", link, check=False)
            removed.append(link)
    return removed


def _kill_inside(netns: str) -> None:
    """SIGKILL every process still running in one of our namespaces (a safety net after stops)."""
    for pid in _ip("netns", "pids", netns, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _free_subnet() -> ipaddress.IPv4Network:
    used = [
        ipaddress.ip_network(word, strict=False)
        for line in _ip("-4", "route", "show", "table", "all", check=False).splitlines()
        for word in line.split()[:1]
        if "/" in word or re.fullmatch(r"[\d.]+", word)
    ]
    for _ in range(64):
        net = ipaddress.IPv4Network(f"10.231.{secrets.randbelow(256)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise NetnsError("no free 10.231.X.0/24 subnet on this machine")


@dataclass
class Host:
    """One namespace standing in for a machine."""

    name: str
    netns: str
    address: str
    link: str  # the veth end in the root namespace (plugged into the bridge)
    root: Path  # this host's private directory

    @property
    def prefix(self) -> list[str]:
        """Put before a command to run it on this host."""
        return ["ip", "netns", "exec", self.netns]

    def dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *argv], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)  # fmt: skip

    def cut(self) -> None:
        """Unplug this host from the network (its link goes down; its processes keep running)."""
        _ip("link", "set", self.link, "down")

    def reconnect(self) -> None:
        _ip("link", "set", self.link, "up")


@dataclass
class NetnsLab:
    """Namespaces for `names`, a bridge joining them, and the client address on the bridge."""

    base_dir: Path
    names: Sequence[str]
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    hosts: dict[str, Host] = field(default_factory=dict, init=False)
    subnet: ipaddress.IPv4Network | None = field(default=None, init=False)
    bridge: str = field(default="", init=False)
    _closed: bool = field(default=False, init=False)

    @property
    def client_address(self) -> str:
        """The test process's own address on the subnet (the bridge's)."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> NetnsLab:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> NetnsLab:
        if len(self.names) > 250 or len(set(self.names)) != len(self.names):
            raise NetnsError("host names must be distinct, at most 250")
        sweep_stale()
        atexit.register(self.close)
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def _make(self) -> None:
        self.subnet = _free_subnet()
        self.bridge = f"sb{self.run_id}"
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "alias", f"{_ALIAS}-{os.getpid()}")
        _ip("addr", "add", f"{self.client_address}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for n, name in enumerate(self.names, start=1):
            netns = f"{PREFIX}-{os.getpid()}-{self.run_id}-{name}"
            address = str(self.subnet.network_address + 1 + n)
            outer, inner = f"sv{self.run_id}{n}", f"sp{self.run_id}{n}"
            root = self.base_dir / name
            root.mkdir(parents=True, exist_ok=True)
            _ip("netns", "add", netns)
            self.hosts[name] = Host(name, netns, address, outer, root)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", netns)
            _ip("link", "set", outer, "master", self.bridge, "up")
            inside = ["netns", "exec", netns, "ip"]
            _ip(*inside, "link", "set", "lo", "up")
            _ip(*inside, "link", "set", inner, "name", "eth0")
            _ip(*inside, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
            _ip(*inside, "link", "set", "eth0", "up")
        self._wait_links_up()

    def _wait_links_up(self, timeout: float = 10.0) -> None:
        """A bridge port forwards once it leaves the listening state; wait for every one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = _ip("-o", "link", "show", "master", self.bridge)
            if state.count("state UP") >= len(self.hosts):
                return
            time.sleep(0.05)
        raise NetnsError(f"bridge {self.bridge} ports not up after {timeout}s:\n{state}")

    def close(self) -> None:
        """Kill what still runs in our namespaces, delete them and the bridge (idempotent)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for _ in range(2):  # again, for a child that was entering a namespace the first time
            for host in self.hosts.values():
                _kill_inside(host.netns)
            time.sleep(0.05)
        for host in self.hosts.values():
            _ip("netns", "del", host.netns, check=False)
            _ip("link", "del", host.link, check=False)  # gone with its peer; in case it is not
        if self.bridge:
            _ip("link", "del", self.bridge, check=False)


def lab_names(run_pid: int | None = None) -> list[str]:
    """Namespaces of ours still present (all runs, or those of `run_pid`): for tests of teardown."""
    names = [line.split()[0] for line in _ip("netns", "list", check=False).splitlines() if line.strip()]
    ours = [n for n in names if _NS_RE.match(n)]
    return [n for n in ours if run_pid is None or n.startswith(f"{PREFIX}-{run_pid}-")]
