"""The ZooKeeper thread's hand-over to the event loop: every post applied once, in order, with one
wake-up per run of posts; a failing change stops no other."""

from __future__ import annotations

import asyncio
import threading

from broker_service.inventory.zk_inventory import ZkInventory
from broker_service.server_view import BrokerServerView


def test_posts_from_another_thread_apply_in_order_with_few_wake_ups() -> None:
    async def scenario() -> tuple[list[int], int]:
        inventory = ZkInventory(BrokerServerView(), "unused")
        inventory._loop = loop = asyncio.get_running_loop()
        seen: list[int] = []
        wake_ups = 0
        wake = loop.call_soon_threadsafe

        def counting(*args: object) -> object:
            nonlocal wake_ups
            wake_ups += 1
            return wake(*args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]

        def fail() -> None:
            raise RuntimeError("a bad change")

        def post_all() -> None:
            for i in range(5000):
                inventory._post(seen.append, i)
                if i == 10:
                    inventory._post(fail)

        thread = threading.Thread(target=post_all)
        thread.start()
        thread.join(10)  # the loop blocked meanwhile, as when it is busy: every post queues
        done = loop.create_future()
        wake(done.set_result, None)
        await done
        loop.call_soon_threadsafe = wake  # type: ignore[method-assign]
        return seen, wake_ups

    seen, wake_ups = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert seen == list(range(5000))  # oracle: the posts in the order made, each once
    assert wake_ups == 1
