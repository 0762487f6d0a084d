"""Concurrent reads of the same keys share round trips, and none is answered from before it began.

A hot dashboard sends the same query from many clients at once; each read of its partials from
memcached is a round trip whose system calls cost the broker more than the rest of the answer.
A read that arrives while another of the same keys is on the wire does not join that one (it left
before this read began, and may answer from before a write this read must see): it waits for the
next, which leaves as soon as the one on the wire is back and answers every read that arrived
meanwhile. So each read is answered by a round trip that left after it arrived, and under load
one round trip answers many.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

Read = Callable[[float], Awaitable[T]]  # the read itself, given its deadline (the loop's clock)
_Waiting = tuple[asyncio.Future[T], Read[T], float]  # a caller's future, its read, its deadline


class _Line(Generic[T]):
    """One key's reads: the one on the wire (implied by the line's existence), those boarding it
    (arrived before it left: `boarding` is None once it has) and those waiting for the next."""

    __slots__ = ("boarding", "waiting")

    def __init__(self) -> None:
        self.boarding: list[_Waiting[T]] | None = []
        self.waiting: list[_Waiting[T]] = []


class SharedReads(Generic[T]):
    def __init__(self) -> None:
        self._lines: dict[Hashable, _Line[T]] = {}
        self._serving: set[asyncio.Task[None]] = set()  # the next reads' tasks, referenced

    async def read(self, key: Hashable, read: Read[T], deadline: float) -> tuple[T, bool]:
        """`read(deadline)`'s result, or that of a read of the same key that left after this call
        began; True when this call's own read ran (the caller then counts what it found once).

        A read leaves one turn of the loop after it is asked for: the other requests the loop
        took in with it (wrk's, a dashboard's panels) board it rather than wait for the next."""
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line()
            return await self._lead(key, line, read, deadline), True
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        (line.waiting if line.boarding is None else line.boarding).append((waiter, read, deadline))
        return await waiter, False

    async def _lead(self, key: Hashable, line: _Line[T], read: Read[T], deadline: float) -> T:
        boarded: list[_Waiting[T]] = []
        try:
            try:
                await asyncio.sleep(0)
            finally:
                boarded, line.boarding = line.boarding or [], None
            result = await read(deadline)
        except Exception as e:
            _settle(boarded, error=e)
            raise
        except BaseException:  # cancelled: those on board go with the next read
            line.boarding = None
            line.waiting[:0] = boarded
            raise
        else:
            _settle(boarded, result)
            return result
        finally:
            self._hand_over(key, line)

    def _hand_over(self, key: Hashable, line: _Line[T]) -> None:
        """The read on the wire is back: the next one leaves for those waiting, if any still are."""
        waiting = [w for w in line.waiting if not w[0].done()]  # a cancelled caller waits no more
        line.waiting = []
        if not waiting:
            del self._lines[key]
            return
        task = asyncio.get_running_loop().create_task(self._serve(key, line, waiting))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _serve(
        self, key: Hashable, line: _Line[T], waiting: list[tuple[asyncio.Future[T], Read[T], float]]
    ) -> None:
        try:
            result = await waiting[0][1](min(deadline for _, _, deadline in waiting))
        except asyncio.CancelledError:  # the loop is closing: nobody is served any more
            del self._lines[key]
            for waiter, _, _ in (*waiting, *line.waiting):
                waiter.cancel()
            raise
        except Exception as e:
            _settle(waiting, error=e)
        else:
            _settle(waiting, result)
        self._hand_over(key, line)


def _settle(waiting: list[_Waiting[T]], result: T | None = None, error: Exception | None = None) -> None:
    for waiter, _, _ in waiting:
        if waiter.done():  # its caller was cancelled
            continue
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(result)  # type: ignore[arg-type]  # T when no error
