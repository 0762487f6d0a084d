"""One send per HTTP response: uvicorn's httptools protocol with writes gathered per loop turn.

uvicorn writes a response's status line and headers when the app sends `http.response.start`
and the body when it sends `http.response.body`: two `transport.write` calls, two `send` system
calls (and two wake-ups of the client) for every small answer. Under load that was about a
sixth of the broker's time on a cached answer. Here the connection's transport holds what is
written until the end of the current turn of the event loop (or until 64 KiB are held) and then
writes it as one piece; a response whose body comes later (streamed, or none: HEAD, 304) still
leaves at the end of the turn its head was written in. Everything else the protocol asks of the
transport goes straight through.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FLUSH_AT_BYTES = 64 * 1024  # larger pieces are not worth a copy to join


class CoalescingTransport:
    """A transport's writes within one loop turn, sent together."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if len(data) >= FLUSH_AT_BYTES:  # large: after what is held, as it is (the transport
            self.flush()  # copies what the socket does not take at once, so nothing is held here)
            self._transport.write(data)
            return
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))  # a bytes object is not copied; a mutable buffer must be
        self._held_bytes += len(data)
        if self._held_bytes >= FLUSH_AT_BYTES:
            self.flush()

    def writelines(self, pieces: Any) -> None:
        for piece in pieces:
            self.write(piece)

    def flush(self) -> None:
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._held_bytes

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
        self._held_bytes = 0
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # get_extra_info, pause_reading, is_closing, ...
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `CoalescingTransport` (pass as `uvicorn.Config(http=)`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
