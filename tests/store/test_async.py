"""The asyncio façade: writes awaited on the writer thread, reads off the event loop."""

from __future__ import annotations

import asyncio

import pytest

from sidecar.store import AsyncStore, InvalidInput, Put, SessionLocked, VersionConflict

from .conftest import Location


async def test_async_round_trip(location: Location) -> None:
    store = await AsyncStore.open(location, embed_dims=4, fingerprint="fp")
    try:
        await store.ensure_collections(["user:u1", "authored:hard"])
        r = await store.put("user:u1", "a", text="alpha", metadata={"k": 1}, vector=[1, 0, 0, 0])
        assert r.created
        await store.put_many([Put("user:u1", f"b{i}", "", {}, [0, 1, i, 0]) for i in range(5)])
        hits = await store.search("user:u1", [1, 0, 0, 0], 1)
        assert hits[0].id == "a"
        assert (await store.get("user:u1", "a")).text == "alpha"  # type: ignore[union-attr]
        assert [x.id for x in await store.list_records("user:u1", limit=2)] == ["a", "b0"]
        assert await store.increment({"user:u1": ["a", "missing"]}) == 1
        with pytest.raises(VersionConflict):
            await store.put("user:u1", "a", vector=[1, 0, 0, 0], if_version=7)
        with pytest.raises(InvalidInput):
            await store.put("", "a", vector=[1, 0, 0, 0])
        assert await store.delete("user:u1", "a")
        assert not await store.delete("user:u1", "a")
        assert store.count_prefix("user:") == 5
        await store.checkpoint()
    finally:
        await store.aclose()


async def test_concurrent_async_writes_are_group_committed(location: Location) -> None:
    store = await AsyncStore.open(location, embed_dims=4)
    try:
        results = await asyncio.gather(
            *(store.put(f"user:u{i % 3}", f"r{i}", vector=[1, i, 0, 0]) for i in range(300))
        )
        assert all(r.version == 1 for r in results)
        assert store.count_prefix("user:") == 300
        # read-your-writes: every acknowledged write is visible immediately
        hits = await store.search("user:u0", [1, 0, 0, 0], 0)
        assert len(hits) == 100
    finally:
        await store.aclose()


async def test_session_lock_excludes_and_a_cancelled_waiter_leaves_it_free(
    location: Location,
) -> None:
    store = await AsyncStore.open(location, embed_dims=4)
    try:
        order: list[str] = []
        async with store.session_lock("session:s1"):
            order.append("first in")
            waiter = asyncio.create_task(_locked_append(store, "session:s1", order, "second"))
            other = asyncio.create_task(_locked_append(store, "session:s2", order, "other key"))
            await other  # another key is not excluded
            await asyncio.sleep(0.2)
            assert "second" not in order
            order.append("first out")
        await waiter
        assert order == ["first in", "other key", "first out", "second"]
        # a bounded wait on a held lock gives up with SessionLocked
        async with store.session_lock("session:s1"):
            with pytest.raises(SessionLocked):
                async with store.session_lock("session:s1", timeout=0.2):
                    pass
            # a waiter cancelled while it waits never holds the lock afterwards
            cancelled = asyncio.create_task(_locked_append(store, "session:s1", order, "never"))
            await asyncio.sleep(0.1)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
        await asyncio.sleep(0.2)
        async with store.session_lock("session:s1", timeout=5):
            assert "never" not in order
    finally:
        await store.aclose()


async def _locked_append(store: AsyncStore, key: str, out: list[str], what: str) -> None:
    async with store.session_lock(key):
        out.append(what)
