"""Finished whole answers remembered by the raw request body and the timeline's version.

The result-level cache (broker_service.result_cache) still parses the body, plans the segments,
hashes them and builds a key per request: about two thirds of what a cached answer cost the
broker. A dashboard sends the very same bytes again and again, and while the server view's
`version` stands still (no segment or server added, removed or moved) the same body plans the
same segments, so the answer the result-level cache gave is the answer again. An entry holds the
encoded response (body and header lines, the query id aside: each request gets its own unless the
body names one) and the version it was planned under; any change of the view makes every entry
stale at once, and the next request takes the full path and records the answer anew. Only
answers the result-level cache may give are offered (historical segments only, not partial,
`useResultLevelCache` on), so what the memo serves is what that cache would have served.
"""

from __future__ import annotations

from dataclasses import dataclass

from cachetools import LRUCache

MEMO_BYTES = 64 * 1024 * 1024
MAX_ENTRY_BYTES = 1_000_000  # as the result-level cache's own bound
MAX_BODY_BYTES = 16 * 1024  # longer request bodies (long interval or id lists) are not remembered
_ENTRY_OVERHEAD = 256


@dataclass(frozen=True, slots=True)
class MemoAnswer:
    """One answer as sent: body bytes and the header lines before and after the query id."""

    version: int  # the server view's version the answer was planned under
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...]  # everything but the query id, in the normal order
    query_id: bytes | None  # the id the body names; None: a fresh one per request
    data_source: str
    query_type: str
    request_bytes: int = 0  # the key's length, counted against the bound too

    @property
    def size(self) -> int:
        headers = sum(len(k) + len(v) for k, v in self.headers)
        return self.request_bytes + len(self.body) + headers + _ENTRY_OVERHEAD


class AnswerMemo:
    """A byte-bounded LRU of `MemoAnswer` keyed by the raw request body."""

    def __init__(self, max_bytes: int = MEMO_BYTES):
        self._lru: LRUCache[bytes, MemoAnswer] = LRUCache(max_bytes, getsizeof=lambda a: a.size)
        self.hits = 0

    def get(self, body: bytes, version: int) -> MemoAnswer | None:
        """The answer recorded for `body` while the view was at `version`, else None."""
        answer = self._lru.get(body)
        if answer is None:
            return None
        if answer.version != version:
            del self._lru[body]  # stale for good: versions only grow
            return None
        self.hits += 1
        return answer

    def put(self, body: bytes, answer: MemoAnswer) -> None:
        if len(body) > MAX_BODY_BYTES or len(answer.body) > MAX_ENTRY_BYTES:
            return
        try:
            self._lru[body] = answer
        except ValueError:  # larger than the whole memo
            return

    def __len__(self) -> int:
        return len(self._lru)
