"""Measuring the benchmarks' clusters: posting and timing queries, load tests, CPU seconds of a
process, and the summaries (percentiles, spreads) their reports print.

The load clients are minimal HTTP/1.1 exchanges on raw sockets, in the spirit of wrk, so a
benchmark on a 2-core machine times the server rather than its own client.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- timing -----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def spread(samples: Sequence[float]) -> str:
    """`median [min-max]` in ms."""
    return f"{statistics.median(samples) * 1e3:.1f} [{min(samples) * 1e3:.1f}-{max(samples) * 1e3:.1f}]"


def post_query(client: httpx.Client, url: str, body: dict[str, Any]) -> Any:
    resp = client.post(url + "/druid/v2/", json=body, timeout=300)
    if resp.status_code != 200:
        raise RuntimeError(f"query failed ({resp.status_code}): {resp.text[:500]}")
    return resp.json()


def chunked_body(buffer: bytearray, fill: Callable[[], object]) -> bytes:
    """A chunked body from the front of `buffer` (taken out of it), `fill` appending what the
    socket has next until the last (empty) chunk is in; Strata's broker sends no trailers."""
    body = bytearray()
    while True:
        while (end := buffer.find(b"\r\n")) < 0:
            fill()
        size = int(bytes(buffer[:end]).split(b";")[0], 16)
        while len(buffer) < end + 2 + size + 2:
            fill()
        body += buffer[end + 2 : end + 2 + size]
        del buffer[: end + 2 + size + 2]
        if size == 0:
            return bytes(body)


class QueryConnection:
    """One keep-alive connection posting native queries, for timing a few-ms answer.

    A bare HTTP/1.1 exchange on a socket (the request encoded once per body, the response framed
    by Content-Length), in the spirit of wrk: httpx costs about 0.8 ms of CPU per request and the
    standard library's client about 0.15 ms, which beside a 1 ms answer is the client's time, not
    the server's.
    """

    def __init__(self, url: str, timeout: float = 300):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self._host = f"{host}:{port}"
        self._address, self._timeout = (host, int(port)), timeout
        self._sock = self._connect()
        self._requests: dict[bytes, bytes] = {}
        self._buffer = bytearray()  # grown in place: `bytes +=` copies the whole body per chunk

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self._address, timeout=self._timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def post(self, body: dict[str, Any], path: str = "/druid/v2/") -> Any:
        """The parsed answer of posting `body` to `path` (a native query; `/druid/v2/sql` for SQL)."""
        payload = orjson.dumps(body)
        request = self._requests.get(path.encode() + payload)
        if request is None:
            line = (f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n")  # fmt: skip
            request = self._requests[path.encode() + payload] = line.encode() + payload
        try:
            return self._exchange(request)
        except ConnectionError:
            if self._buffer:
                raise
            # the server closed the connection while it idled (its keep-alive, 75 s, can pass while
            # a slow baseline runs on a loaded machine): once more on a new one
            self._sock.close()
            self._sock = self._connect()
            return self._exchange(request)

    def _exchange(self, request: bytes) -> Any:
        self._sock.sendall(request)
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            self._read()
        lines = bytes(self._buffer[:end]).split(b"\r\n")
        del self._buffer[: end + 4]
        headers = {n.strip().lower(): v.strip() for n, _, v in (h.partition(b":") for h in lines[1:])}
        if headers.get(b"transfer-encoding") == b"chunked":  # a streamed answer (SQL's)
            data = chunked_body(self._buffer, self._read)
        else:
            length = int(headers[b"content-length"])
            while len(self._buffer) < length:
                self._read()
            data = bytes(self._buffer[:length])
            del self._buffer[:length]
        if not lines[0].startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"query failed ({lines[0]!r}): {data[:500]!r}")
        return orjson.loads(data)

    def _read(self) -> None:
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self._buffer += chunk

    def close(self) -> None:
        self._sock.close()


def time_calls(fn: Any, repeat: int, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return samples


@dataclass
class LoadResult:
    queries: int
    errors: int
    seconds: float
    latencies: list[float]
    client_cpu: float = 0.0  # the load generator's CPU seconds per wall second (1.0: one core busy)

    @property
    def qps(self) -> float:
        return self.queries / self.seconds

    def summary(self) -> dict[str, float]:
        return {"qps": round(self.qps), "p50_ms": round(percentile(self.latencies, 0.5) * 1e3, 1),
                "p99_ms": round(percentile(self.latencies, 0.99) * 1e3, 1),
                "errors": self.errors, "client_cpu": round(self.client_cpu, 2)}  # fmt: skip

    def row(self) -> str:
        s = self.summary()
        return (f"{s['qps']:7.0f} qps  p50 {s['p50_ms']:6.1f} ms  p99 {s['p99_ms']:6.1f} ms  "
                f"errors {s['errors']:.0f}  client CPU {s['client_cpu']:.2f} cores")  # fmt: skip


def load_test(
    url: str | Sequence[str], body: dict[str, Any], concurrency: int = 16, seconds: float = 8.0
) -> LoadResult:
    """`concurrency` keep-alive connections sending `body` back to back for `seconds`.

    A minimal HTTP/1.1 client on asyncio streams (a pre-encoded request, responses framed by
    Content-Length), in the spirit of wrk: httpx costs ~1.8 ms of CPU per request, more than the
    broker's own ~0.5 ms, so on a 2-core machine it measured the client instead of the server.
    Several urls (brokers behind a load balancer) share the connections round robin.
    """
    urls = [url] if isinstance(url, str) else list(url)
    payload = orjson.dumps(body)
    targets = []
    for u in urls:
        host, port = u.removeprefix("http://").rsplit(":", 1)
        request = (
            f"POST /druid/v2/ HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: keep-alive\r\n\r\n"
        ).encode() + payload
        targets.append((host, int(port), request))

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        return head.startswith(b"HTTP/1.1 200")

    async def run() -> LoadResult:
        latencies: list[float] = []
        errors = 0
        connections = []
        for i in range(concurrency):
            host, port, request = targets[i % len(targets)]
            connections.append((*await asyncio.open_connection(host, port), request))
        for reader, writer, request in connections:  # warm each connection before the clock starts
            await exchange(reader, writer, request)
        stop_at = time.perf_counter() + seconds

        async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
            nonlocal errors
            while time.perf_counter() < stop_at:
                t = time.perf_counter()
                if await exchange(reader, writer, request):
                    latencies.append(time.perf_counter() - t)
                else:
                    errors += 1
            writer.close()

        began, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(r, w, q) for r, w, q in connections))
        wall = time.perf_counter() - began
        return LoadResult(len(latencies), errors, wall, latencies, (time.process_time() - cpu) / wall)

    return asyncio.run(run())


def log(*parts: object) -> None:
    print(*parts, flush=True, file=sys.stderr)
