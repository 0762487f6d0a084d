"""Run a local ZooKeeper or memcached server as a child process (tests and the quickstart).

Both come from Debian's packages (`zookeeper`, `memcached`). The servers bind 127.0.0.1 only,
are started in their own session so a terminal's Ctrl-C reaches us rather than them, and are
stopped by their process id: SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ClassVar

from strata.cli.ports import free_port as free_port
from strata.server.lifecycle import child_popen_kwargs

ZOOKEEPER_JARS = (Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/java/slf4j-simple.jar"))


class ServerStartError(RuntimeError):
    """The server process died or did not become ready in time."""


def _ask(port: int, command: bytes, timeout: float = 1.0, host: str = "127.0.0.1") -> bytes:
    """Send a one-line text command to a port (loopback by default); read the answer until close/timeout."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(command)
            chunks = []
            while True:
                try:
                    data = s.recv(4096)
                except TimeoutError:
                    break
                if not data:
                    break
                chunks.append(data)
                if command.startswith(b"version") and b"\r\n" in data:
                    break
            return b"".join(chunks)
    except OSError:
        return b""


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


@dataclass
class _ChildServer:
    port: int
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    tied: bool = field(default=False, kw_only=True)  # die with this process (strata.server.lifecycle)
    stop_signal: ClassVar[int] = signal.SIGTERM  # PostgreSQL's fast shutdown is SIGINT

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _spawn(self, argv: list[str], log: Path | None, setpriv: tuple[str, ...] = ()) -> None:
        """Start `argv`; `setpriv` are extra setpriv(1) options (e.g. a user to run as) applied in
        the same exec as the parent-death signal, which a later uid change would clear."""
        out: IO[bytes] | int = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
        extra = child_popen_kwargs() if self.tied else {"start_new_session": True}
        if not self.tied and shutil.which("setpriv"):
            # killed with us even if we die without stopping it (a test run killed mid-way):
            # util-linux's setpriv sets PR_SET_PDEATHSIG and execs, no Python runs after fork.
            # The signal follows the *thread* that forked: start (and restart) servers from a
            # thread that outlives them, never from a short-lived worker thread.
            argv = ["setpriv", *setpriv, "--pdeathsig", "KILL", "--", *argv]
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, **extra
            )
        finally:
            if not isinstance(out, int):
                out.close()

    def _wait_ready(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(self.proc):
                raise ServerStartError(f"{what} exited during start-up (code {self.proc.returncode})")
            if ready():
                return
            time.sleep(0.05)
        self.stop()
        raise ServerStartError(f"{what} not ready on port {self.port} after {timeout:.0f}s")

    def stop(self, grace: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or not _alive(proc):
            return
        proc.send_signal(self.stop_signal)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def kill(self) -> None:
        """SIGKILL, for tests of crashes."""
        proc, self.proc = self.proc, None
        if proc is not None and _alive(proc):
            proc.kill()
            proc.wait(5)


@dataclass
class ZooKeeperServer(_ChildServer):
    """A standalone ZooKeeper 3.8 on 127.0.0.1 with a short tick so test sessions expire fast.

    `host` and `command_prefix` (e.g. `ip netns exec NS`) run it on another (test) host."""

    data_dir: Path = Path("zk")
    heap: str = "256m"
    tick_ms: int = 500
    host: str = "127.0.0.1"
    command_prefix: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @staticmethod
    def available() -> bool:
        return all(p.exists() for p in ZOOKEEPER_JARS) and shutil.which("java") is not None

    def serving(self) -> bool:
        # `ruok` answers before the database is loaded; `srvr` prints Mode only once it serves.
        return b"Mode: " in _ask(self.port, b"srvr", host=self.host)

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        if not self.available():
            raise ServerStartError("ZooKeeper is not installed (apt-get install zookeeper)")
        self.data_dir = Path(self.data_dir).resolve()
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    "initLimit=10",
                    "syncLimit=5",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
                    "maxClientCnxns=0",
                    "forceSync=no",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "",
                ]
            )
        )
        argv = [
            *self.command_prefix,
            "java",
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            "-cp",
            ":".join(str(p) for p in ZOOKEEPER_JARS),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(cfg),
        ]
        self._spawn(argv, self.data_dir / "zookeeper.log")
        self._wait_ready(self.serving, timeout, "ZooKeeper")
        return self


@dataclass
class MemcachedServer(_ChildServer):
    memory_mb: int = 64
    max_item: str | None = None
    extra_args: tuple[str, ...] = ()  # more memcached options (tests: `-C`, no CAS)

    @staticmethod
    def available() -> bool:
        return shutil.which("memcached") is not None

    def serving(self) -> bool:
        return _ask(self.port, b"version\r\n").startswith(b"VERSION")

    def start(self, timeout: float = 20.0, log: Path | None = None) -> MemcachedServer:
        binary = shutil.which("memcached")
        if binary is None:
            raise ServerStartError("memcached is not installed (apt-get install memcached)")
        argv = [
            binary,
            "-l",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "0",
            "-m",
            str(self.memory_mb),
            "-t",
            "2",
        ]
        if self.max_item:
            argv += ["-I", self.max_item]
        argv += self.extra_args
        setpriv: tuple[str, ...] = ()
        if os.geteuid() == 0:  # memcached refuses to run as root
            if not self.tied and shutil.which("setpriv"):
                # dropped to nobody by setpriv itself: memcached's own -u would clear the
                # parent-death signal
                setpriv = ("--reuid", "nobody", "--regid", "nogroup", "--clear-groups")
            else:
                argv += ["-u", "nobody"]
        self._spawn(argv, log, setpriv)
        self._wait_ready(self.serving, timeout, "memcached")
        return self
