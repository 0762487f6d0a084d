"""A TCP proxy that fails the first connections it accepts, then forwards: faults on demand in front
of a real server (tests of retries on throttling, 5xx answers and connection resets).

Each fault is spent on one new connection: `"slowdown"` answers S3's 503 SlowDown, `"500"` an
internal error, `"reset"` drops the connection with a TCP reset before any answer. Later
connections are piped to the upstream server unchanged. Threads are daemons; `stop()` closes the
listening socket, and open pipes end when either side closes.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterable
from types import TracebackType

_ANSWERS = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error."),
}


class FaultProxy:
    def __init__(self, upstream: tuple[str, int], faults: Iterable[str], host: str = "127.0.0.1"):
        self.upstream = upstream
        self.faults = deque(faults)
        unknown = [f for f in self.faults if f not in (*_ANSWERS, "reset")]
        if unknown:
            raise ValueError(f"unknown faults {unknown}")
        self.injected: list[str] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server((host, 0))
        self.host, self.port = host, int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True, name="fault-proxy")

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        # shutdown wakes the thread blocked in accept(); close alone leaves it there (Linux), and
        # the join below then waited its whole 5 s on every proxy
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed by stop()
                return
            with self._lock:
                fault = self.faults.popleft() if self.faults else None
                if fault:
                    self.injected.append(fault)
            threading.Thread(target=self._serve, args=(conn, fault), daemon=True).start()

    def _serve(self, conn: socket.socket, fault: str | None) -> None:
        if fault is None:
            self._pipe(conn)
            return
        conn.settimeout(5)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
            if fault == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                status, reason, code, message = _ANSWERS[fault]
                body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>" + (
                    f"<Message>{message}</Message></Error>"
                )
                conn.sendall(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode()
                )
        except OSError:
            pass
        finally:
            conn.close()

    def _pipe(self, conn: socket.socket) -> None:
        try:
            up = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            conn.close()
            return
        up.settimeout(None)

        def copy(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        back = threading.Thread(target=copy, args=(up, conn), daemon=True)
        back.start()
        copy(conn, up)
        back.join(60)
        conn.close()
        up.close()
