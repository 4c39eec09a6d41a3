"""KeyedLocks: mutual exclusion per key, and no entry left once nobody holds or waits."""

from __future__ import annotations

import asyncio

import pytest

from sidecar.memory.core.keyed_locks import KeyedLocks


async def test_one_holder_per_key_and_entries_pruned() -> None:
    locks = KeyedLocks()
    order: list[str] = []

    async def worker(key: str, name: str) -> None:
        async with locks.hold(key):
            order.append(f"{name}+")
            await asyncio.sleep(0.01)
            order.append(f"{name}-")

    await asyncio.gather(worker("a", "1"), worker("a", "2"), worker("b", "3"))
    a_events = [e for e in order if e[0] in "12"]
    assert a_events in (["1+", "1-", "2+", "2-"], ["2+", "2-", "1+", "1-"])
    assert len(locks) == 0


async def test_cancelled_waiter_and_failing_holder_leave_no_entry() -> None:
    locks = KeyedLocks()
    entered = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("k"):
            entered.set()
            await asyncio.sleep(0.05)
            raise RuntimeError("boom")

    task = asyncio.ensure_future(holder())
    await entered.wait()
    waiter = asyncio.ensure_future(locks.hold("k").__aenter__())
    await asyncio.sleep(0)
    assert locks.locked("k") and len(locks) == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    with pytest.raises(RuntimeError):
        await task
    assert len(locks) == 0 and not locks.locked("k")
