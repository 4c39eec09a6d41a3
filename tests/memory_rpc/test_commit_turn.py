"""``ingest`` with an ``advancementKey``: OpenClaw's ``commitTurn`` contract.

The host retries a commit with the same key after a process or plugin failure; the
daemon must write the turn once and answer ``duplicate`` to every retry.
"""

from __future__ import annotations

from protocol.codes import ErrorCode
from tests.memory_rpc.conftest import Call, Harness

TURN = [
    {"id": "k1:0", "role": "user", "content": "My sister Ines lives in Porto."},
    {"id": "k1:1", "role": "assistant", "content": "Noted: Ines lives in Porto."},
]


async def _raw(rpc: Call, sid: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = (
        await rpc("list_collection", {"collection": f"session_raw:{sid}"})
    )["results"]
    return out


async def test_commit_then_retry_is_duplicate(rpc: Call) -> None:
    params = {"sessionId": "c1", "userId": "ana", "messages": TURN, "advancementKey": "turn-1"}
    first = await rpc("ingest", params)
    assert first["ingested"] == 2 and first["duplicate"] is False
    again = await rpc("ingest", params)
    assert again == {
        "ingested": 0,
        "skipped": 2,
        "ids": ["k1:0", "k1:1"],
        "empty": 0,
        "duplicate": True,
    }
    assert len(await _raw(rpc, "c1")) == 2


async def test_retry_with_new_text_under_same_key_changes_nothing(rpc: Call) -> None:
    await rpc("ingest", {"sessionId": "c2", "messages": TURN, "advancementKey": "k"})
    changed = [{"role": "user", "content": "something else entirely"}]
    out = await rpc("ingest", {"sessionId": "c2", "messages": changed, "advancementKey": "k"})
    assert out["duplicate"] is True and out["ingested"] == 0
    texts = {r["text"] for r in await _raw(rpc, "c2")}
    assert "something else entirely" not in texts


async def test_key_of_already_stored_messages_still_commits(rpc: Call) -> None:
    # The turn reached the store through a plain ingest first (for example the host's
    # own ingestBatch); committing it afterwards records the key without re-writing.
    await rpc("ingest", {"sessionId": "c3", "messages": TURN})
    out = await rpc("ingest", {"sessionId": "c3", "messages": TURN, "advancementKey": "k3"})
    assert out["duplicate"] is False and out["ingested"] == 0 and out["skipped"] == 2
    again = await rpc("ingest", {"sessionId": "c3", "messages": TURN, "advancementKey": "k3"})
    assert again["duplicate"] is True


async def test_keys_are_per_session(rpc: Call) -> None:
    a = await rpc("ingest", {"sessionId": "s-a", "messages": TURN, "advancementKey": "same"})
    b = await rpc("ingest", {"sessionId": "s-b", "messages": TURN, "advancementKey": "same"})
    assert a["duplicate"] is False and b["duplicate"] is False
    assert len(await _raw(rpc, "s-b")) == 2


async def test_bad_keys_are_refused_and_write_nothing(rpc: Call) -> None:
    for key in ["", "   ", "x" * 1025, "a\x00b"]:
        err = await rpc(
            "ingest", {"sessionId": "c4", "messages": TURN, "advancementKey": key}, error=True
        )
        assert err["code"] == ErrorCode.INVALID_INPUT, (key, err)
        assert "advancementKey" in err["message"]
    assert await _raw(rpc, "c4") == []


async def test_forget_removes_commit_markers(harness: Harness) -> None:
    rpc = harness.call
    await rpc(
        "ingest", {"sessionId": "c5", "userId": "bo", "messages": TURN, "advancementKey": "k5"}
    )
    await rpc("forget", {"userId": "bo", "includeSessions": True})
    state = (await rpc("list_collection", {"collection": "session_state:c5"}))["results"]
    assert [r for r in state if str(r["id"]).startswith("__commit__:")] == []
