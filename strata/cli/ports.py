"""Free loopback ports for servers started by the quickstart, the tests and the benchmarks.

A port found free by binding port 0 is free only until that socket closes: the next bind to port
0 (another server's choice in a process beside this one) or an outgoing connection may get the
same port before the server it was meant for binds it, and a health check then reaches whatever
holds it. So ports are taken below the kernel's ephemeral range, where it never assigns one by
itself, each process walking its own sequence from a random start and each pytest-xdist worker in
its own slice; a candidate is kept only if it can be bound now.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000  # below: ports of well-known services
SMALLEST_SLICE = 500


def _own_slice() -> range:
    """This process's share of the ports below the ephemeral range (empty: use the kernel's)."""
    try:
        first_ephemeral = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    try:
        worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
        workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), worker + 1)
    except ValueError:
        worker, workers = 0, 1
    size = (first_ephemeral - LOWEST) // workers
    if size < SMALLEST_SLICE:
        return range(0)
    return range(LOWEST + worker * size, LOWEST + (worker + 1) * size)


def _sequence() -> Iterator[int]:
    ports = _own_slice()
    if not ports:
        return iter(())
    start = random.SystemRandom().randrange(len(ports))  # not the seeded global generator
    return itertools.cycle([*ports[start:], *ports[:start]])


_lock = threading.Lock()
_candidates: Iterator[int] | None = None
_owner_pid = 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _kernel_chosen() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port(*, excluding: Collection[int] = ()) -> int:
    """A loopback port nothing holds now and the kernel will not hand to a connection meanwhile.
    `excluding`: ports promised to servers not started yet (a process's walk is its own; a port
    its parent chose for a node and passed on is not bound until that node starts)."""
    global _candidates, _owner_pid
    with _lock:
        if _candidates is None or _owner_pid != os.getpid():  # a forked child starts its own walk
            _candidates, _owner_pid = _sequence(), os.getpid()
        for port in itertools.islice(_candidates, 2_000):
            if port not in excluding and _bindable(port):
                return port
    while (port := _kernel_chosen()) in excluding:
        pass
    return port
