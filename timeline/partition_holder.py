"""The partitions of one (interval, version): which chunks exist and whether the set is complete."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from timeline.shard_spec import PartitionChunk

T = TypeVar("T")


class PartitionHolder(Generic[T]):
    """Chunks kept sorted by chunk number in a tuple (what every lookup returns, so none is made
    per lookup; rebuilt on a change, rare and over few chunks); completeness cached until then.
    A lone chunk is held as itself: nearly every interval of a broker's million segments has one,
    and its tuple weighed 48 B (a lookup makes that tuple instead, 24 for a day's query)."""

    __slots__ = ("_chunks", "_complete")

    def __init__(self) -> None:
        self._chunks: tuple[PartitionChunk[T], ...] | PartitionChunk[T] = ()
        self._complete: bool | None = None

    def _set(self, chunks: tuple[PartitionChunk[T], ...]) -> None:
        self._chunks = chunks[0] if len(chunks) == 1 else chunks
        self._complete = None

    def add(self, chunk: PartitionChunk[T]) -> bool:
        """False (and nothing added) when a chunk with that number is already there."""
        chunks = self.chunks()
        numbers = [c.chunk_number for c in chunks]
        i = bisect.bisect_left(numbers, chunk.chunk_number)
        if i < len(numbers) and numbers[i] == chunk.chunk_number:
            return False
        self._set((*chunks[:i], chunk, *chunks[i:]))
        return True

    def remove(self, chunk: PartitionChunk[T]) -> PartitionChunk[T] | None:
        chunks = self.chunks()
        for i, existing in enumerate(chunks):
            if existing.chunk_number == chunk.chunk_number and existing.object == chunk.object:
                self._set((*chunks[:i], *chunks[i + 1 :]))
                return existing
        return None

    def get(self, chunk_number: int) -> PartitionChunk[T] | None:
        for c in self.chunks():
            if c.chunk_number == chunk_number:
                return c
        return None

    def is_complete(self) -> bool:
        if self._complete is None:
            self._complete = _complete(self.chunks())
        return self._complete

    def is_empty(self) -> bool:
        chunks = self._chunks
        return isinstance(chunks, tuple) and not chunks

    def chunks(self) -> tuple[PartitionChunk[T], ...]:
        chunks = self._chunks
        return chunks if isinstance(chunks, tuple) else (chunks,)

    def __iter__(self) -> Iterator[PartitionChunk[T]]:
        return iter(self.chunks())

    def __len__(self) -> int:
        chunks = self._chunks
        return len(chunks) if isinstance(chunks, tuple) else 1


def _complete(chunks: tuple[PartitionChunk[Any], ...]) -> bool:
    if not chunks or not chunks[0].is_start():
        return False
    prev = chunks[0]
    if prev.is_end():
        return True
    for chunk in chunks[1:]:
        if not prev.abuts(chunk):
            return False
        if chunk.is_end():
            return True
        prev = chunk
    return False
