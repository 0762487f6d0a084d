"""Which historicals serve which segment: rendezvous (highest-random-weight) hashing.

Each (server, segment) pair gets a weight from a keyed hash; a segment goes to the R servers with
the highest weights. Every node computes the same answer from the same inputs with no
coordination, and when a server leaves only the segments it held move (each to the next server in
its own ranking); when one joins it takes only the segments it now ranks top-R for. With
retention rules, R is per tier and the ranking is over the live servers of that tier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping


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
    """This server's share of the segments its tier keeps, remembering each segment's answer while
    the tier's live servers stay the same: a node polling 10,000 segments every few seconds hashes
    each one once, not per poll."""

    def __init__(self, server: str):
        self.server = server
        self._live: frozenset[str] = frozenset()
        self._mine: dict[str, tuple[int, bool]] = {}

    def of(self, wanted: Mapping[str, int], servers: Collection[str]) -> set[str]:
        """`wanted`: segment id -> the replicas this server's tier keeps of it (retention rules);
        `servers`: the tier's live servers (this one counts itself live)."""
        live = frozenset(servers) | {self.server}
        if live != self._live:
            self._live, self._mine = live, {}
        mine = self._mine
        out = set()
        for sid, replicas in wanted.items():
            known = mine.get(sid)
            if known is None or known[0] != replicas:
                known = mine[sid] = (replicas, replicas > 0 and self.server in owners(sid, live, replicas))
            if known[1]:
                out.add(sid)
        if len(mine) > 2 * len(wanted) + 1024:  # many segments gone from the store: forget them
            self._mine = {sid: mine[sid] for sid in wanted if sid in mine}
        return out
