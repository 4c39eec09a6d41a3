"""Why: ingest explains what became of each message; assemble explains what it left out."""

from __future__ import annotations

from pathlib import Path

from tests.memory_rpc.conftest import Harness, make_harness


async def test_ingest_explains_each_message(harness: Harness) -> None:
    rpc = harness.call
    await rpc(
        "ingest",
        {
            "sessionId": "s1",
            "userId": "u",
            "messages": [{"id": "old", "role": "user", "content": "x"}],
        },
    )
    await rpc("forget", {"userId": "u", "messageIds": ["gone"]})  # nothing: not found
    msgs = [
        {"id": "m1", "role": "user", "content": "I'm allergic to peanuts, never suggest them."},
        {"id": "m2", "role": "assistant", "content": "Noted, no peanuts."},
        {"id": "m3", "role": "assistant", "content": [{"type": "tool_use"}]},  # no text
        {"id": "old", "role": "user", "content": "x"},
        {"id": "m1", "role": "user", "content": "again"},
    ]
    out = await rpc("ingest", {"sessionId": "s1", "userId": "u", "messages": msgs, "explain": True})
    got = out["messages"]
    assert [m["id"] for m in got] == ["m1", "m2", "", "old", "m1"]
    first, second, empty, stored, repeated = got
    assert first["stored"] is True and first["gate"]["threshold"] == 0.21
    assert first["durable"] is True  # a constraint (the example)
    assert first["reason"].startswith(
        "durable: gate score" if first["durable"] else "stored; not durable"
    )
    assert set(first["gate"]) >= {
        "novelty",
        "repetition",
        "structure",
        "technical",
        "conversational",
    }
    assert second["durable"] is False and "only user messages" in second["reason"]
    assert (empty["stored"], empty["reason"], empty["gate"]) == (False, "not stored: no text", None)
    assert stored["reason"] == "not stored: already stored" and stored["gate"] is None
    assert repeated["reason"] == "not stored: repeated in this batch"
    # without explain the result keeps its shape
    plain = await rpc("ingest", {"sessionId": "s1", "userId": "u", "messages": msgs[:1]})
    assert "messages" not in plain


async def test_ingest_explains_forgotten_and_committed(harness: Harness) -> None:
    rpc = harness.call
    one = [{"id": "f1", "role": "user", "content": "My PIN is 4417."}]
    await rpc("ingest", {"sessionId": "s2", "userId": "u", "messages": one})
    await rpc("forget", {"userId": "u", "messageIds": ["f1"]})
    again = await rpc(
        "ingest", {"sessionId": "s2", "userId": "u", "messages": one, "explain": True}
    )
    assert again["messages"][0]["reason"] == "not stored: forgotten"
    key = {"sessionId": "s2", "userId": "u", "advancementKey": "k1", "explain": True}
    msgs = [{"id": "c1", "role": "user", "content": "hello there"}]
    await rpc("ingest", {**key, "messages": msgs})
    dup = await rpc("ingest", {**key, "messages": msgs})
    assert dup["duplicate"] is True
    assert dup["messages"][0]["reason"] == "not stored: this advancementKey was already committed"


async def test_assemble_explains_what_it_left_out(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        rpc = h.call
        facts = [f"The garden shed number {i} holds tools for the orchard." for i in range(30)]
        msgs = [{"id": f"g{i}", "role": "user", "content": t} for i, t in enumerate(facts)]
        await rpc("ingest", {"sessionId": "old", "userId": "u", "messages": msgs})
        base = {"sessionId": "new", "userId": "u", "prompt": "which shed holds orchard tools?"}
        # a small budget: some matching turns cannot be injected
        out = await rpc("assemble", {**base, "tokenBudget": 400, "explain": True})
        considered = out["considered"]
        assert 0 < len(considered) <= 10
        selected = {(s["collection"], s["id"]) for s in out["selected"]}
        assert not {(c["collection"], c["id"]) for c in considered} & selected
        scores = [c["score"] for c in considered]
        assert scores == sorted(scores, reverse=True)
        assert all(c["why"] and c["reason"] and c["tokens"] > 0 for c in considered)
        assert any(
            c["why"].startswith(("did not fit", "not reached", "score below")) for c in considered
        )
        plain = await rpc("assemble", {**base, "tokenBudget": 400})
        assert "considered" not in plain
    finally:
        await close()
