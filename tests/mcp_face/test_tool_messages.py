"""What the tools say, read by a model: argument errors without pydantic's boilerplate,
and a forget result that counts memories, not the copies each one has (issue 34, item 16)."""

from __future__ import annotations

import pytest

from tests.mcp_face.conftest import McpClient, structured, text_of

pytestmark = pytest.mark.sqlite_only("the MCP face over RPCs tested on both backends")


async def test_argument_errors_carry_no_pydantic_boilerplate(mcp_client: McpClient) -> None:
    async with mcp_client() as client:
        bad = [
            await client.call_tool("search_memory", {"query": ""}),
            await client.call_tool("search_memory", {"query": "x", "k": 500}),
            await client.call_tool("remember", {"text": "hi", "role": "system"}),
            await client.call_tool("forget", {"records": [{"id": "no-collection"}]}),
        ]
    for result, field in zip(bad, ("query", "k", "role", "collection"), strict=True):
        message = text_of(result)
        assert result.is_error and field in message, message
        assert "pydantic" not in message and "https://" not in message, message
        assert "For further information" not in message, message


async def test_forget_counts_memories_and_names_their_copies(mcp_client: McpClient) -> None:
    """Regression: the dry run of one remembered message said ``deleted: 3`` (its raw
    record and its two copies), which a model reads as three memories."""
    async with mcp_client("--session", "mcp-forget-count") as client:
        kept = structured(
            await client.call_tool(
                "remember", {"text": "My locker code at the pool is 4471.", "kind": "fact"}
            )
        )
        mid = kept["message_id"]
        dry = structured(await client.call_tool("forget", {"message_ids": [mid], "dry_run": True}))
        assert dry["forgotten"] == 1 and dry["dry_run"] is True
        assert "deleted" not in dry
        [item] = dry["items"]
        assert item["copies"] >= 3  # raw history, the namespace index, durable memory
        assert "1 memory would be forgotten" in dry["next_step"]
        done = structured(await client.call_tool("forget", {"message_ids": [mid]}))
        assert done["forgotten"] == 1 and done["dry_run"] is False
        again = structured(await client.call_tool("forget", {"message_ids": [mid]}))
        assert again["forgotten"] == 0 and again["missing"] == [mid]
