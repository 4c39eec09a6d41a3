"""What a model remembers through MCP is durable (issue 34, item 8): the facts it writes the
way the tool asks (third person, "The user's daughter is called Mia") pass the admission
gate, and ``kind: "fact"`` keeps a fact whatever the gate says."""

from __future__ import annotations

import pytest

from tests.mcp_face.conftest import McpClient, structured

pytestmark = pytest.mark.sqlite_only("the MCP face over RPCs tested on both backends")


async def test_facts_written_as_the_tool_asks_are_durable(mcp_client: McpClient) -> None:
    async with mcp_client("--namespace", "mcp-facts", "--session", "mcp-facts") as client:
        for fact in (
            "The user's daughter is called Mia",
            "The user prefers tea over coffee.",
            "Bob likes jazz.",
        ):
            kept = structured(await client.call_tool("remember", {"text": fact}))
            assert kept["durable"] is True, (fact, kept["reason"])
        # thanks said again and again is never a fact (repetition used to admit it)
        for _ in range(5):
            thanks = structured(await client.call_tool("remember", {"text": "Thanks, that helps."}))
            assert thanks["stored"] is True and thanks["durable"] is False, thanks["reason"]


async def test_kind_fact_is_durable_whatever_the_gate_says(mcp_client: McpClient) -> None:
    text = "The cat sleeps on the radiator all winter."  # the gate does not keep it
    async with mcp_client("--namespace", "mcp-kind", "--session", "mcp-kind") as client:
        said = structured(await client.call_tool("remember", {"text": text}))
        assert said["durable"] is False
        fact = structured(await client.call_tool("remember", {"text": text, "kind": "fact"}))
        assert fact["stored"] is True and fact["durable"] is True
        assert "stated as a fact" in fact["reason"]
        found = structured(
            await client.call_tool(
                "search_memory", {"query": "where does the cat sleep", "scopes": ["durable"]}
            )
        )
        assert [h["message_ids"] for h in found["hits"] if "radiator" in h["text"]] == [
            [fact["message_id"]]
        ]
