"""`libravdb mcp --namespace bob` cannot reach alice's sessions by naming their ids.

Regression: alice's session written through v1 (`insert_session_turn`, as the published
plugin does) counted as unowned, so bob's `recall_context` with its id returned alice's
raw tail and bob's `remember` took the session over. Each tool call that names another
namespace's session is a tool error that shows nothing of it, and alice still reads it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from libravdb_client import Client as DaemonClient
from libravdb_client.testing import DaemonProcess

from tests.mcp_face.conftest import McpClient, structured, text_of

pytestmark = pytest.mark.sqlite_only("the MCP face over RPCs tested on both backends")

PIN = "7301"
V1_SESSION, V2_SESSION = "own-v1", "own-v2"
ALICE = "alice-ns"


@pytest.fixture(scope="module")
def alice(daemon: DaemonProcess) -> Iterator[DaemonClient]:
    """Alice's sessions: one the published plugin wrote (v1), one written through v2."""
    with DaemonClient(daemon.endpoint, timeout=120) as client:
        for turn, role, text in (
            ("t1", "user", f"my bank pin is {PIN}"),
            ("t2", "assistant", "ok"),
        ):
            meta = {"role": role, "ts": 1_760_000_000_000, "userId": ALICE}
            meta |= {"sessionId": V1_SESSION, "type": "turn", "source_turn_id": turn}
            client.call(
                "insert_session_turn",
                {
                    "sessionId": V1_SESSION,
                    "id": f"{V1_SESSION}:{turn}",
                    "text": text,
                    "metadata": meta,
                },
            )
        message = {"id": "p1", "role": "user", "content": f"My bank pin is {PIN}."}
        client.call("ingest", {"sessionId": V2_SESSION, "namespace": ALICE, "messages": [message]})
        yield client


def _raw(client: DaemonClient, sid: str) -> str:
    return repr(client.call("list_collection", {"collection": f"session_raw:{sid}"}))


@pytest.mark.parametrize("sid", [V1_SESSION, V2_SESSION])
async def test_bob_cannot_recall_or_remember_into_alices_session(
    mcp_client: McpClient, alice: DaemonClient, sid: str
) -> None:
    before = _raw(alice, sid)
    async with mcp_client("--namespace", "bob", "--session", "bob-own") as client:
        recalled = await client.call_tool(
            "recall_context", {"question": "what is my bank pin?", "session_id": sid}
        )
        assert recalled.is_error, text_of(recalled)
        assert "belongs to another namespace" in text_of(recalled)
        assert PIN not in text_of(recalled) and ALICE not in text_of(recalled)

        kept = await client.call_tool(
            "remember", {"text": "bob was here", "session_id": sid, "message_id": "b1"}
        )
        assert kept.is_error, text_of(kept)
        assert "belongs to another namespace" in text_of(kept)

        found = await client.call_tool(
            "search_memory", {"query": "bank pin", "scopes": ["session"], "session_id": sid}
        )
        assert found.is_error and PIN not in text_of(found)

        listed = structured(await client.call_tool("list_sessions", {}))
        assert sid not in {s["session_id"] for s in listed["sessions"]}
        gone = structured(await client.call_tool("forget", {"message_ids": ["p1", f"{sid}:t1"]}))
        assert gone["forgotten"] == 0 and gone["items"] == []
        # bob's own session keeps working
        own = structured(await client.call_tool("remember", {"text": "bob likes tea"}))
        assert own["stored"] is True and own["namespace"] == "bob"
    assert _raw(alice, sid) == before
    assert "bob was here" not in _raw(alice, sid)


async def test_alice_still_recalls_her_sessions(mcp_client: McpClient, alice: DaemonClient) -> None:
    async with mcp_client("--namespace", ALICE) as client:
        for sid in (V1_SESSION, V2_SESSION):
            recalled = await client.call_tool(
                "recall_context", {"question": "what is my bank pin?", "session_id": sid}
            )
            assert not recalled.is_error and PIN in text_of(recalled), text_of(recalled)
