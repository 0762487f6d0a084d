"""Which historicals serve which segment: rendezvous (highest-random-weight) hashing.

Each (server, segment) pair gets a weight from a keyed hash; a segment goes to the R servers with
the highest weights. Every node computes the same answer from the same inputs with no
coordination, and when a server leaves only the segments it held move (each to the next server in
its own ranking); when one joins it takes only the segments it now ranks top-R for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable


def weight(server: str, segment_id: str) -> int:
    digest = hashlib.blake2b(f"{server}\x00{segment_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owners(segment_id: str, servers: Iterable[str], replicas: int) -> list[str]:
    """The servers that should serve the segment, best first; R is capped by the number of servers."""
    if replicas < 1:
        raise ValueError("replicas must be at least 1")
    ranked = sorted(set(servers), key=lambda s: (weight(s, segment_id), s), reverse=True)
    return ranked[:replicas]


def assign(segment_ids: Iterable[str], servers: Collection[str], replicas: int) -> dict[str, list[str]]:
    """Segment id -> its owners."""
    live = sorted(set(servers))
    return {sid: owners(sid, live, replicas) for sid in segment_ids}


def assigned_to(server: str, segment_ids: Iterable[str], servers: Collection[str], replicas: int) -> set[str]:
    """The segments `server` should serve; it counts itself live even if absent from `servers`."""
    live = set(servers) | {server}
    return {sid for sid in segment_ids if server in owners(sid, live, replicas)}


class Assignment:
    """`assigned_to` for one server, remembering each segment's answer while the live servers stay
    the same: a node polling 10,000 segments every few seconds hashes each one once, not per poll."""

    def __init__(self, server: str, replicas: int):
        self.server = server
        self.replicas = replicas
        self._live: frozenset[str] = frozenset()
        self._mine: dict[str, bool] = {}

    def of(self, segment_ids: Collection[str], servers: Collection[str]) -> set[str]:
        live = frozenset(servers) | {self.server}
        if live != self._live:
            self._live, self._mine = live, {}
        mine = self._mine
        out = set()
        for sid in segment_ids:
            yes = mine.get(sid)
            if yes is None:
                yes = mine[sid] = self.server in owners(sid, live, self.replicas)
            if yes:
                out.add(sid)
        if len(mine) > 2 * len(segment_ids) + 1024:  # many segments gone from the store: forget them
            self._mine = {sid: mine[sid] for sid in segment_ids}
        return out
