"""Auto-compaction (token accumulator, background, per-session lock, never blocks ingest),
the compaction epoch and its invalidation hook."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sidecar.memory.compaction.compactor import CompactionOptions
from sidecar.memory.ingest.sessions import MessageIn
from sidecar.memory.service import InvalidationEvent
from tests.memory_rpc.conftest import make_harness


def _msgs(start: int, n: int) -> list[MessageIn]:
    return [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            f"message {i} about the garden and the deploy pipeline number {i}",
            f"m{i:04d}",
            1000 + i,
        )
        for i in range(start, start + n)
    ]


async def test_soft_threshold_triggers_background_compaction(tmp_path: Path) -> None:
    h, close = await make_harness(
        tmp_path, **{"compaction.session_budget_tokens": 400, "compaction.target_size": 5}
    )
    try:
        events: list[InvalidationEvent] = []
        unsubscribe = h.memory.subscribe(events.append)
        assert h.memory.epoch("s") == 0
        # 10 turns * ~17 tokens = 170 < 280 (70%): nothing scheduled
        await h.memory.ingest("s", _msgs(0, 10))
        await h.memory.wait_idle()
        assert h.memory.auto_runs == 0 and events == []
        # crossing 70% schedules one background compaction; ingest returns at once
        await h.memory.ingest("s", _msgs(10, 10))
        await h.memory.wait_idle()
        assert h.memory.auto_runs == 1
        assert [e.reason for e in events] == ["compaction"] and events[0].session_id == "s"
        epoch = h.memory.epoch("s")
        assert epoch == events[0].epoch == 1 and h.memory.is_current("s", 1)
        sums = await h.memory.store.list_records("session_summary:s")
        assert sums
        # the accumulator restarted from the uncovered remainder
        assert h.memory.accumulator.tokens("s") < 280
        unsubscribe()
        out = await h.memory.compact("s", CompactionOptions(target_size=5))
        assert not out.did_compact and len(events) == 1
    finally:
        await close()


async def test_ingest_not_blocked_by_running_compaction(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.session_budget_tokens": 100})
    try:
        await h.memory.ingest("s", _msgs(0, 30))
        async with h.memory.compaction_lock("s"):  # a compaction "in progress"
            out = await asyncio.wait_for(h.memory.ingest("s", _msgs(30, 5)), 5)
            assert out.ingested == 5
        await h.memory.wait_idle()
        assert h.memory.auto_runs >= 1
    finally:
        await close()


async def test_auto_compaction_can_be_disabled(tmp_path: Path) -> None:
    h, close = await make_harness(
        tmp_path, **{"compaction.session_budget_tokens": 50, "compaction.auto": False}
    )
    try:
        await h.memory.ingest("s", _msgs(0, 30))
        await h.memory.wait_idle()
        assert h.memory.auto_runs == 0
        assert await h.memory.store.list_records("session_summary:s") == []
        assert await h.memory.load_epoch("s") == 0
    finally:
        await close()


async def test_epoch_survives_restart(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        await h.memory.ingest("s", _msgs(0, 30))
        out = await h.memory.compact("s", CompactionOptions(target_size=5))
        assert out.did_compact and out.epoch == 1
    finally:
        await close()
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        assert h.memory.epoch("s") == 0
        assert await h.memory.load_epoch("s") == 1
        await h.memory.ingest("s", _msgs(30, 30))
        out = await h.memory.compact("s", CompactionOptions(target_size=5))
        assert out.epoch == 2
    finally:
        await close()


async def test_forget_waits_for_a_running_compaction(tmp_path: Path) -> None:
    # A compaction in flight must not write summaries or shards into collections that
    # forget has just dropped: forget takes the session's compaction and ingest locks.
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        await h.memory.ingest("s", _msgs(0, 12), user_id="u")
        holding, release = asyncio.Event(), asyncio.Event()

        async def running_compaction() -> None:  # holds the lock as a compaction does
            async with h.memory.compaction_lock("s"):
                holding.set()
                await release.wait()

        compaction = asyncio.ensure_future(running_compaction())
        await holding.wait()
        forget = asyncio.ensure_future(h.call("forget", {"userId": "u", "includeSessions": True}))
        await asyncio.sleep(0.05)
        assert not forget.done()
        release.set()
        await compaction
        res = await asyncio.wait_for(forget, 10)
        assert res["deleted"] >= 12
        assert (await h.call("list_collection", {"collection": "session_raw:s"}))["results"] == []
    finally:
        await close()


async def test_at_most_max_concurrent_compactions_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sidecar.memory.service as service_module

    h, close = await make_harness(
        tmp_path, **{"compaction.max_concurrent": 2, "compaction.target_size": 5}
    )
    running = peak = 0
    real = service_module.compact_session

    async def observed(*args: Any, **kwargs: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.05)  # long enough for every caller to be waiting
            return await real(*args, **kwargs)
        finally:
            running -= 1

    monkeypatch.setattr(service_module, "compact_session", observed)
    try:
        sessions = [f"s{i}" for i in range(6)]
        for sid in sessions:
            await h.memory.ingest(sid, _msgs(0, 12))
        await h.memory.wait_idle()
        opts = CompactionOptions.from_settings(h.memory.settings, force=True)
        outs = await asyncio.gather(*(h.memory.compact(sid, opts) for sid in sessions))
        assert peak == 2
        assert all(o.did_compact for o in outs)
    finally:
        await close()


async def test_idle_sessions_keep_no_locks(tmp_path: Path) -> None:
    # Regression: one ingest lock and one compaction lock per session id, kept forever (a
    # slow leak in a long-running daemon).
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        for i in range(50):
            await h.memory.ingest(f"s{i}", _msgs(0, 6))
            await h.memory.compact(f"s{i}", CompactionOptions(target_size=3))
        await h.call("forget", {"namespace": "session:s0", "includeSessions": True})
        assert h.memory.held_session_locks() == 0
    finally:
        await close()
