"""Per-session bookkeeping is dropped once a session goes idle (a long-running daemon
would otherwise keep one entry per session it ever saw), and nothing stored is lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.config import load_settings
from sidecar.memory.compaction.autocompact import IdleSessions
from sidecar.memory.compaction.compactor import CompactionOptions
from sidecar.memory.ingest.sessions import messages_from_wire
from sidecar.memory.service import MemoryService
from sidecar.store.service import StoreService
from tests.support import current_store, hash_embedder

DIMS = 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.sqlite_only("no store: the sweep's bookkeeping alone")
def test_idle_sessions_are_swept_in_activity_order() -> None:
    clock = Clock()
    idle = IdleSessions(100.0, clock)
    idle.touch("a")
    clock.now += 50
    idle.touch("b")
    clock.now += 60  # a idle 110 s, b 60 s
    assert idle.sweep() == ["a"]
    assert len(idle) == 1
    idle.touch("c")
    assert idle.sweep() == []  # swept less than a minute ago
    clock.now += 100
    idle.touch("c")
    assert idle.sweep() == ["b"]
    assert len(idle) == 1


@pytest.mark.sqlite_only("no store: the sweep's bookkeeping alone")
def test_zero_keeps_everything() -> None:
    clock = Clock()
    idle = IdleSessions(0.0, clock)
    idle.touch("a")
    clock.now += 10**9
    assert idle.sweep() == []


def _msgs(sid: str, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{sid}-{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        for i in range(n)
    ]


async def test_an_idle_session_loses_its_bookkeeping_not_its_memory(tmp_path: Path) -> None:
    settings = load_settings(
        flags={
            "data_dir": str(tmp_path / "data"),
            "compaction.idle_forget_s": 600,
            **current_store().flags(tmp_path / "data"),
        },
        env={},
    )
    store = StoreService(settings, embed=hash_embedder(DIMS), embed_dims=DIMS, fingerprint="h")
    clock = Clock()
    memory = MemoryService(settings, store, clock=clock)
    await store.start()
    try:
        for sid in ("s1", "s2"):
            await memory.ingest(sid, messages_from_wire(_msgs(sid, 12)), namespace="ns")
        out = await memory.compact(
            "s1", CompactionOptions(min_turns=2, tail_tokens=8, target_size=4)
        )
        assert out.did_compact and memory.epoch("s1") == 1
        assert memory.accumulator.tokens("s2") > 0
        assert len(memory.idle) == 2 and len(memory.barrier) >= 1

        clock.now += 601
        await memory.ingest("s3", messages_from_wire(_msgs("s3", 2)), namespace="ns")
        assert len(memory.idle) == 1  # only s3 is tracked
        assert memory.accumulator.tokens("s2") == 0
        assert memory.epoch("s1") == 0 and len(memory.barrier) == 0
        # the epoch comes back from the store; the turns are all there
        assert await memory.load_epoch("s1") == 1
        assert store.store.count("session_raw:s1") == 12
    finally:
        await memory.close()
        await store.close()


async def test_a_session_only_compacted_is_dropped_too(tmp_path: Path) -> None:
    # Regression: only ingest marked a session active, so a session compacted after a
    # restart (its turns ingested by an earlier process) kept its epoch forever.
    settings = load_settings(
        flags={
            "data_dir": str(tmp_path / "data"),
            "compaction.idle_forget_s": 600,
            **current_store().flags(tmp_path / "data"),
        },
        env={},
    )
    store = StoreService(settings, embed=hash_embedder(DIMS), embed_dims=DIMS, fingerprint="h")
    await store.start()
    try:
        earlier = MemoryService(settings, store)
        await earlier.ingest("s1", messages_from_wire(_msgs("s1", 12)), namespace="ns")
        await earlier.close()
        clock = Clock()
        memory = MemoryService(settings, store, clock=clock)
        out = await memory.compact(
            "s1", CompactionOptions(min_turns=2, tail_tokens=8, target_size=4)
        )
        assert out.did_compact and len(memory.barrier) == 1 and len(memory.idle) == 1
        clock.now += 601
        await memory.ingest("s2", messages_from_wire(_msgs("s2", 2)), namespace="ns")
        assert len(memory.barrier) == 0 and len(memory.idle) == 1
        assert await memory.load_epoch("s1") == 1
        await memory.close()
    finally:
        await store.close()
