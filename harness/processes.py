"""Start and stop real `strata` server processes in tests.

Each process gets a free loopback port, logs to a file (shown when it fails to start), is
awaited on `/status/health`, and is stopped by its pid: SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from strata.cli.local_servers import free_port


class ProcessStartError(RuntimeError):
    pass


# A broker over less data than its merge worker's threshold (--merge-process-rows, 50,000 partial
# rows; a query's partials never hold more rows than the data) never sends a merge there: the worker
# would only be spawned, importing the engine (0.8 s of CPU), and stopped. Merges in the worker are
# tested where a test's data reaches the threshold (tests/cluster/test_overload.py).
NO_MERGE_WORKER = ["--merge-processes", "0"]


@contextmanager
def sigint_ignored_by_children(enabled: bool = True) -> Iterator[None]:
    """Children started inside inherit SIGINT as ignored, as from a non-interactive shell's `&`.

    The parent ignores SIGINT for the moment of the fork (the disposition survives exec) rather
    than using `preexec_fn`, which is unsafe in a process with threads (seen: children killed by
    SIGSEGV when the test process had DuckDB and server threads running).
    """
    if not enabled:
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class StrataProcess:
    subcommand: str
    args: list[str]
    log_path: Path
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    ignore_sigint: bool = False  # start it as a non-interactive shell starts a background job
    host: str = "127.0.0.1"  # the address it binds and is reached at
    command_prefix: list[str] = field(default_factory=list)  # e.g. `ip netns exec NS`: run it elsewhere

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def argv(self) -> list[str]:
        return [*self.command_prefix, sys.executable, "-m", "strata.cli.main", self.subcommand,
                "--bind", self.host, "--port", str(self.port), *self.args]  # fmt: skip

    def start(self, *, wait: str | None = "/status/health", timeout: float = 30.0) -> StrataProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # a test's own hosts (network namespaces) bind non-loopback addresses with security off,
        # which a node refuses unless told (docs/security.md); a test may set it back to "0"
        env = {"STRATA_INSECURE": "1", **os.environ, **self.env}
        with self.log_path.open("ab") as log, sigint_ignored_by_children(self.ignore_sigint):
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL)  # fmt: skip
        if wait is not None:
            self.wait_http(wait, timeout=timeout)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_http(self, path: str, *, timeout: float = 30.0, status: int = 200) -> httpx.Response:
        deadline = time.monotonic() + timeout
        last: str = "no answer"
        while time.monotonic() < deadline:
            if not self.alive():
                raise ProcessStartError(f"strata {self.subcommand} exited:\n{self.log_text()[-4000:]}")
            try:
                response = httpx.get(self.url + path, timeout=2.0)
                if response.status_code == status:
                    return response
                last = f"HTTP {response.status_code}"
            except httpx.HTTPError as e:
                last = type(e).__name__
            time.sleep(0.1)
        raise ProcessStartError(f"{self.url}{path} not {status} within {timeout}s ({last}):\n"
                                f"{self.log_text()[-4000:]}")  # fmt: skip

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def start_all(processes: Sequence[StrataProcess], timeout: float = 30.0) -> None:
    """Start them together, then await each one's health check: their start-ups (imports, opening
    stores) overlap instead of running one after another. Nodes that need each other retry until
    the other answers (a broker follows its historicals by polling or through ZooKeeper). They
    share the time one after another would have had (`timeout` each): on a loaded machine
    start-ups side by side each take longer."""
    deadline = time.monotonic() + timeout * len(processes)
    for p in processes:
        p.start(wait=None)
    for p in processes:
        p.wait_http("/status/health", timeout=max(deadline - time.monotonic(), 1.0))


def stop_all(processes: Sequence[StrataProcess], grace: float = 15.0) -> None:
    """Stop them together: SIGTERM to each, then each awaited (SIGKILL past `grace` seconds), so
    their drains and shutdowns overlap instead of running one after another."""
    for p in processes:
        if p.alive():
            assert p.proc is not None
            with contextlib.suppress(ProcessLookupError):
                p.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in processes:
        if p.proc is None:
            continue
        try:
            p.proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()


@contextmanager
def running(processes: Sequence[StrataProcess]) -> Iterator[Sequence[StrataProcess]]:
    """Stop every process on exit, whatever happened."""
    try:
        yield processes
    finally:
        stop_all(processes)
