"""The asyncio façade: writes awaited on the writer thread, reads off the event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sidecar.store import AsyncStore, InvalidInput, Put, VersionConflict


async def test_async_round_trip(tmp_path: Path) -> None:
    store = await AsyncStore.open(tmp_path / "d", embed_dims=4, fingerprint="fp")
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


async def test_concurrent_async_writes_are_group_committed(tmp_path: Path) -> None:
    store = await AsyncStore.open(tmp_path / "d", embed_dims=4)
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
