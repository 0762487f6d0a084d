"""`strata broker --workers N`: N processes on one port, each following discovery itself; one
SIGTERM stops them all cleanly, and a worker that dies takes the service down (no silent shrink)."""

from __future__ import annotations

import os
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from tests.broker.fake_data_node import FakeNode, node_app
from tests.broker.feed_server import FeedState, feed_app
from tests.broker.helpers import segment, serve
from tests.broker.test_cli_process import start_broker, stop

pytestmark = pytest.mark.integration


def children(pid: int) -> list[int]:
    """Live child processes of `pid` (from /proc; Linux)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def feed_port():
    state = FeedState()
    state.load(segment(interval="2015-09-12/2015-09-13", dims=("page",)))
    app = Starlette(routes=[*feed_app(state).routes, *node_app(FakeNode()).routes])
    with serve(app) as port:
        yield port


@pytest.mark.timeout(120)
def test_workers_share_the_port_and_stop_together(feed_port: int) -> None:
    with ExitStack() as stack:
        proc, url = start_broker("--discovery", "http", "--nodes", f"127.0.0.1:{feed_port}", "--workers", "2")
        stack.callback(stop, proc)
        workers = children(proc.pid)
        assert len(workers) == 2
        deadline = time.monotonic() + 30
        seen = 0
        while seen < 20:  # fresh connections land on either worker: each must know the datasource
            assert time.monotonic() < deadline, "a worker never saw the announced segment"
            with httpx.Client(base_url=url, timeout=5) as http:  # a new connection each time
                seen = seen + 1 if http.get("/druid/v2/datasources").json() == ["wiki"] else 0
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0
        assert gone(workers, 10)


@pytest.mark.timeout(120)
def test_a_dead_worker_stops_the_service(feed_port: int) -> None:
    with ExitStack() as stack:
        proc, _ = start_broker("--discovery", "http", "--nodes", f"127.0.0.1:{feed_port}", "--workers", "2")
        stack.callback(stop, proc)
        first, second = children(proc.pid)
        os.kill(first, signal.SIGKILL)
        assert proc.wait(30) != 0
        assert gone([second], 10)


def test_worker_connections_skip_nagle() -> None:
    """Accepted connections get TCP_NODELAY from asyncio only when the listening socket says it is
    TCP; a 0 protocol cost every two-part response the client's 40 ms delayed ACK (seen: --workers 2
    at 344 queries/s where two plain brokers did 2,213)."""
    import asyncio
    import socket

    from strata.cli.local_servers import free_port
    from strata.server.lifecycle import _reuse_port_socket

    async def check() -> int:
        port = free_port()
        sock = _reuse_port_socket("127.0.0.1", port)
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            accepted.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, client = await asyncio.open_connection("127.0.0.1", port)
            value = await asyncio.wait_for(accepted, 10)
            client.close()
        return value

    assert asyncio.run(check()) != 0
