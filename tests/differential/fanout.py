"""Send each generated query to every target at once, the targets in chains.

A chain's targets are asked in order (the LRU broker cold, then warm, must see the same query in
turn); chains run side by side, each on its own thread with its own keep-alive client, so the
historical and the brokers work in parallel instead of each waiting for the one before.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

import httpx

from harness.processes import StrataProcess

Chain = Sequence[tuple[str, StrataProcess]]


class Fanout:
    def __init__(
        self,
        chains: Sequence[Chain],
        timeout_s: float = 120.0,
        contexts: dict[str, dict[str, Any]] | None = None,
    ):
        self.chains = list(chains)
        self.contexts = contexts or {}  # label -> context entries added to the query for that target
        self.clients = [httpx.Client(timeout=timeout_s) for _ in self.chains]
        self.pool = ThreadPoolExecutor(max(1, len(self.chains)), thread_name_prefix="differential")

    def post(self, path: str, body: Any) -> list[tuple[str, httpx.Response]]:
        """(label, response) for every target, in the chains' order."""

        def ask(i: int) -> list[tuple[str, httpx.Response]]:
            return [
                (label, self.clients[i].post(node.url + path, json=self._body(label, body)))
                for label, node in self.chains[i]
            ]

        return [answer for answers in self.pool.map(ask, range(len(self.chains))) for answer in answers]

    def _body(self, label: str, body: Any) -> Any:
        extra = self.contexts.get(label)
        if extra is None or not isinstance(body, dict):
            return body
        return {**body, "context": {**(body.get("context") or {}), **extra}}

    def __enter__(self) -> Fanout:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        for client in self.clients:
            client.close()
