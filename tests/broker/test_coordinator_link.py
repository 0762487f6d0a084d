"""The broker finds the coordinator-overlord in ZooKeeper even before its watch reports it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from broker_service.coordinator_link import CoordinatorLink, CoordinatorUnknown
from strata.coordinator.announce import NodeAnnouncer


def _no_watch(*args: Any, **kwargs: Any) -> None:
    """A watch whose notices have not arrived yet (they come on kazoo's thread, some time later)."""


def test_a_coordinator_announced_after_the_broker_started_is_found_by_the_next_request(
    zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kazoo.recipe.watchers.ChildrenWatch", _no_watch)
    base = f"/link-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[str | None, str]:
        link = CoordinatorLink(zk=zk_hosts, zk_base=base)
        await link.start()
        announcer = NodeAnnouncer(zk_hosts, base, "127.0.0.1", 1, "2026-11-29T00:00:00.000Z")
        try:
            with pytest.raises(CoordinatorUnknown):
                await link.post("/druid/indexer/v1/task", b"{}", {})  # nothing announced yet
            before = link.address
            await announcer.start()
            try:
                await link.post("/druid/indexer/v1/task", b"{}", {})
            except CoordinatorUnknown as e:  # found, but nothing listens on its port
                assert "127.0.0.1:1 is unreachable" in str(e), e
            return before, str(link.address)
        finally:
            await announcer.stop()
            await link.stop()

    before, after = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert before is None
    assert after == "127.0.0.1:1"
