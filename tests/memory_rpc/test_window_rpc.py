"""``assemble {windowMessages: true}``: an owning host's transcript is windowed by the daemon,
and what falls out of the window can still be recalled from memory."""

from __future__ import annotations

from protocol.codes import ErrorCode
from tests.memory_rpc.conftest import Call

FACT = "My passport number ends in 7781 and it expires next March."


def _chat(n: int) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [{"id": "f0", "role": "user", "content": FACT}]
    for i in range(1, n):
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append({"id": f"f{i}", "role": role, "content": f"small talk {i} " + "la " * 60})
    return msgs


async def test_window_drops_old_messages_and_recalls_them(rpc: Call) -> None:
    msgs = _chat(60)
    await rpc("ingest", {"sessionId": "w1", "userId": "wu", "messages": msgs})
    out = await rpc(
        "assemble",
        {
            "sessionId": "w1",
            "tokenBudget": 3_000,
            "messages": msgs,
            "prompt": "When does my passport expire?",
            "windowMessages": True,
        },
    )
    start = out["windowStart"]
    assert start > 0 and msgs[start]["role"] == "user"
    assert [m["id"] for m in out["messages"]] == [m["id"] for m in msgs[start:]]
    assert FACT in out["systemPromptAddition"]  # out of the window, back from memory
    assert out["estimatedTokens"] <= 3_000


async def test_window_without_messages_is_refused(rpc: Call) -> None:
    err = await rpc(
        "assemble", {"sessionId": "w2", "tokenBudget": 100, "windowMessages": True}, error=True
    )
    assert err["code"] == ErrorCode.INVALID_INPUT and "windowMessages" in err["message"]


async def test_no_window_returns_all_messages(rpc: Call) -> None:
    msgs = _chat(6)
    out = await rpc("assemble", {"sessionId": "w3", "tokenBudget": 3_000, "messages": msgs})
    assert len(out["messages"]) == 6 and "windowStart" not in out
