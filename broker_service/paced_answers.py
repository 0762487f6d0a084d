"""A low-priority query's large answer sent in pieces, each once the cheap lane lets it.

A whole answer goes to the socket in one `transport.write` on the event loop: the first `send` of
a 10 MB groupBy answer copies what the socket takes (megabytes, on loopback the receiver's share of
the work too) at the loop's priority, while a cheap query's request or answer waits behind it. So
an answer of a negative-priority query (Druid's low lane) past `PIECE_BYTES` is sent in pieces of
that size, and before each piece after the first it waits, at most `YIELD_S`, for a moment no query
of priority 0 or up runs (`Admission.cheap_lane_quiet`). Its admission slot is already given back:
only its bytes wait, never a slot another query could use. Its status and length are sent first,
as for any whole answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.responses import Response, StreamingResponse

PIECE_BYTES = 256 * 1024
YIELD_S = 0.05  # the longest a piece waits for the cheap lane: a low answer is slowed, never stalled


def paced_answer(
    body: bytes,
    priority: int,
    quiet: Callable[[float], Awaitable[None]],
    *,
    headers: dict[str, str],
    media_type: str,
    piece_bytes: int = PIECE_BYTES,
) -> Response:
    """`body` as a whole Response, or, for a low-priority query's answer past `piece_bytes`, one
    sent in pieces, each after `quiet(YIELD_S)`."""
    if priority >= 0 or len(body) <= piece_bytes:
        return Response(body, headers=headers, media_type=media_type)

    async def pieces() -> AsyncIterator[bytes]:
        view = memoryview(body)
        for start in range(0, len(body), piece_bytes):
            if start:
                await quiet(YIELD_S)
            yield bytes(view[start : start + piece_bytes])

    sized = {**headers, "content-length": str(len(body))}
    return StreamingResponse(pieces(), headers=sized, media_type=media_type)
