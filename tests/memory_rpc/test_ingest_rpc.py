"""v2 ingest over the dispatcher: one embedding call per batch, gating decisions stored,
the configured threshold honoured, nothing written on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.memory_rpc.conftest import EmbedCounter, make_harness


def _messages(n: int) -> list[dict[str, Any]]:
    texts = [
        "I prefer dark mode and I work best in the mornings.",
        "Noted, dark mode it is.",
        "The deploy script fails with ERR_LOCK_TIMEOUT when /srv/app/migrate.py runs twice.",
        "Let us add a lock file around the migration step.",
    ]
    return [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": texts[i % 4]}
        for i in range(n)
    ]


async def test_one_embedding_call_per_batch(tmp_path: Path) -> None:
    counter = EmbedCounter()
    h, close = await make_harness(tmp_path, embed=counter, **{"compaction.auto": False})
    try:
        counter.calls.clear()
        res = await h.call("ingest", {"sessionId": "s", "userId": "u", "messages": _messages(8)})
        assert res["ingested"] == 8
        assert counter.calls == [8]  # every new turn of the batch in one call
        counter.calls.clear()
        again = await h.call("ingest", {"sessionId": "s", "userId": "u", "messages": _messages(8)})
        assert again == {
            "ingested": 0,
            "skipped": 8,
            "ids": [f"m{i}" for i in range(8)],
            "empty": 0,
        }
        assert counter.calls == []  # nothing new, nothing embedded
    finally:
        await close()


async def test_gating_decision_and_signals_are_stored(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False, "gating.threshold": 0.99})
    try:
        await h.call("ingest", {"sessionId": "s", "userId": "u", "messages": _messages(4)})
        raw = (await h.call("list_collection", {"collection": "session_raw:s"}))["results"]
        user_turns = [r for r in raw if r["metadata"]["role"] == "user"]
        assert user_turns
        for r in user_turns:
            meta = r["metadata"]
            assert meta["gating_admitted"] is False  # nothing reaches a 0.99 threshold
            assert {"gating_score", "gating_t", "gating_h", "gating_r", "gating_d"} <= set(meta)
        assert (await h.call("list_collection", {"collection": "user:u"}))["results"] == []
    finally:
        await close()
    h, close = await make_harness(
        tmp_path / "low", **{"compaction.auto": False, "gating.threshold": 0.0}
    )
    try:
        await h.call("ingest", {"sessionId": "s", "userId": "u", "messages": _messages(4)})
        durable = (await h.call("list_collection", {"collection": "user:u"}))["results"]
        assert len(durable) == 2  # both user turns admitted, assistant turns never
    finally:
        await close()


async def test_bad_message_writes_nothing(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        msgs = [*_messages(3), {"id": "bad", "role": "wizard", "content": "hi"}]
        err = await h.call(
            "ingest", {"sessionId": "s", "userId": "u", "messages": msgs}, error=True
        )
        assert err["code"] == -32009 and "messages[3].role" in err["message"]
        for coll in ("session_raw:s", "turns:u", "user:u"):
            assert (await h.call("list_collection", {"collection": coll}))["results"] == []
    finally:
        await close()
