"""`libravdb mcp` over stdio, driven by the MCP SDK's client against the real daemon (real
embedding model): the tools' schemas, and remember -> search -> recall -> forget."""

from __future__ import annotations

from typing import Any

import pytest
from libravdb_client import Client as DaemonClient
from libravdb_client.testing import DaemonProcess

from tests.mcp_face.conftest import NAMESPACE, McpClient, structured, text_of

pytestmark = pytest.mark.sqlite_only("the MCP face over RPCs tested on both backends")

TOOLS = {"search_memory", "remember", "recall_context", "forget", "list_sessions"}
FACT = "My sister Ingrid lives in Trondheim and works as a marine biologist."


async def test_tools_are_listed_with_precise_schemas(mcp_client: McpClient) -> None:
    async with mcp_client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80, tool.name
        assert tool.input_schema["type"] == "object"
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    search = tools["search_memory"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["query"]["minLength"] == 1
    assert (search["properties"]["k"]["minimum"], search["properties"]["k"]["maximum"]) == (1, 50)
    scope_items = search["properties"]["scopes"]["anyOf"][0]["items"]
    assert set(scope_items["enum"]) >= {"history", "durable", "authored", "session"}
    remember = tools["remember"].input_schema
    assert remember["required"] == ["text"]
    assert remember["properties"]["role"]["enum"] == ["user", "assistant"]
    assert remember["properties"]["kind"]["enum"] == ["message", "fact"]
    forget = tools["forget"]
    assert forget.annotations is not None and forget.annotations.destructive_hint is True
    # honest: a retry deletes nothing more (a query never deletes, ids are gone once)
    assert forget.annotations.idempotent_hint is True
    assert "candidates" in forget.description and "records" in forget.description
    assert tools["search_memory"].annotations is not None
    assert tools["search_memory"].annotations.read_only_hint is True
    # structured results come with their schema
    assert tools["search_memory"].output_schema is not None
    assert "hits" in tools["search_memory"].output_schema["properties"]
    assert tools["recall_context"].input_schema["properties"]["token_budget"]["maximum"] == 32_000


async def test_remember_search_recall_forget(mcp_client: McpClient) -> None:
    async with mcp_client("--session", "mcp-flow") as client:
        kept = structured(await client.call_tool("remember", {"text": FACT}))
        assert kept["stored"] is True and kept["session_id"] == "mcp-flow"
        assert kept["namespace"] == NAMESPACE and kept["reason"]
        mid = kept["message_id"]
        again = structured(await client.call_tool("remember", {"text": FACT, "message_id": mid}))
        assert again["stored"] is False  # the same message id is stored once

        found = structured(
            await client.call_tool("search_memory", {"query": "where does Ingrid live?"})
        )
        hit = _hit_with(found["hits"], "Trondheim")
        assert mid in hit["message_ids"]
        assert hit["session_id"] == "mcp-flow" and hit["date"].endswith("+00:00")

        own = {"query": "Ingrid", "scopes": ["session"]}  # the server's default session
        _hit_with(structured(await client.call_tool("search_memory", own))["hits"], "Ingrid")
        other = {"query": "Ingrid", "scopes": ["session"], "session_id": "mcp-elsewhere"}
        assert structured(await client.call_tool("search_memory", other))["hits"] == []
        later = {"query": "where does Ingrid live?", "since": "2999-01-01"}
        assert structured(await client.call_tool("search_memory", later))["hits"] == []
        earlier = {"query": "where does Ingrid live?", "since": "2020-01-01T00:00:00Z"}
        _hit_with(structured(await client.call_tool("search_memory", earlier))["hits"], "Ingrid")

        recalled = await client.call_tool(
            "recall_context", {"question": "What does my sister do for a living?"}
        )
        assert not recalled.is_error
        assert "marine biologist" in text_of(recalled)

        dry = structured(await client.call_tool("forget", {"message_ids": [mid], "dry_run": True}))
        assert dry["dry_run"] is True and dry["forgotten"] == 1  # one memory...
        assert [i["id"] for i in dry["items"]] == [mid]
        assert dry["items"][0]["copies"] >= 2  # ...kept as the raw turn and its index copy
        still = structured(await client.call_tool("search_memory", {"query": "Ingrid Trondheim"}))
        _hit_with(still["hits"], "Trondheim")  # a dry run changes nothing

        gone = structured(await client.call_tool("forget", {"message_ids": [mid]}))
        assert gone["dry_run"] is False and gone["forgotten"] == dry["forgotten"]
        after = structured(await client.call_tool("search_memory", {"query": "Ingrid Trondheim"}))
        assert not [h for h in after["hits"] if "Trondheim" in h["text"]]
        recalled = await client.call_tool(
            "recall_context", {"question": "What does my sister do for a living?"}
        )
        assert "marine biologist" not in text_of(recalled)
        missing = structured(await client.call_tool("forget", {"message_ids": [mid]}))
        assert missing["forgotten"] == 0 and missing["missing"] == [mid]


async def test_forget_by_query_deletes_nothing_and_lists_candidates(
    mcp_client: McpClient,
) -> None:
    async with mcp_client("--session", "mcp-forget") as client:
        await client.call_tool("remember", {"text": "The wifi password at the cabin is fjord42."})
        await client.call_tool("remember", {"text": "My dentist appointment is on Friday."})
        query = {"query": "cabin wifi password"}
        # a host may retry a call by itself: a query, however often, deletes nothing
        first = structured(await client.call_tool("forget", query))
        again = structured(await client.call_tool("forget", query))
        for out in (first, again):
            assert (out["dry_run"], out["forgotten"], out["items"]) == (True, 0, [])
            assert "records" in out["next_step"] and "Nothing was deleted" in out["next_step"]
        assert first["candidates"] == again["candidates"]
        wifi = _hit_with(first["candidates"], "fjord42")
        assert wifi["session_id"] == "mcp-forget"
        still = structured(await client.call_tool("search_memory", {"query": "cabin wifi"}))
        _hit_with(still["hits"], "fjord42")
        _hit_with(
            structured(await client.call_tool("search_memory", {"query": "dentist"}))["hits"],
            "dentist",
        )

        # the second step deletes exactly the records the model chose, and a retry of it
        # deletes nothing more
        chosen = {"records": [{"collection": wifi["collection"], "id": wifi["id"]}]}
        gone = structured(await client.call_tool("forget", chosen))
        assert gone["dry_run"] is False and gone["forgotten"] == 1
        assert [i["id"] for i in gone["items"]] == [wifi["id"]]
        retried = structured(await client.call_tool("forget", chosen))
        assert retried["forgotten"] == 0 and retried["missing"] == [
            f"{wifi['collection']}/{wifi['id']}"
        ]
        found = structured(await client.call_tool("search_memory", {"query": "dentist Friday"}))
        hit = _hit_with(found["hits"], "dentist")  # the other memory is untouched
        record = {"collection": hit["collection"], "id": hit["id"]}
        structured(await client.call_tool("forget", {"records": [record]}))
        after = structured(
            await client.call_tool("search_memory", {"query": "wifi password dentist"})
        )
        assert not [h for h in after["hits"] if "fjord42" in h["text"] or "dentist" in h["text"]]
        both = await client.call_tool("forget", {"query": "dentist", "records": [record]})
        assert both.is_error and "not both" in text_of(both)


async def test_list_sessions_shows_the_sessions_written_through_mcp(mcp_client: McpClient) -> None:
    async with mcp_client("--session", "mcp-list-a") as client:
        await client.call_tool("remember", {"text": "Session A: we planned the garden."})
        await client.call_tool(
            "remember",
            {"text": "Session B: I booked the ferry.", "session_id": "mcp-list-b"},
        )
        await client.call_tool(
            "remember",
            {
                "text": "Noted, the ferry is booked.",
                "session_id": "mcp-list-b",
                "role": "assistant",
            },
        )
        listed = structured(await client.call_tool("list_sessions", {"limit": 100}))
    assert listed["namespace"] == NAMESPACE
    by_id = {s["session_id"]: s for s in listed["sessions"]}
    assert by_id["mcp-list-b"]["turn_count"] == 2 and by_id["mcp-list-a"]["turn_count"] == 1
    order = [s["session_id"] for s in listed["sessions"]]
    assert order.index("mcp-list-b") < order.index("mcp-list-a")  # newest first
    assert by_id["mcp-list-b"]["last_date"] >= by_id["mcp-list-b"]["first_date"]
    first = structured(await _one_page(mcp_client))
    assert len(first["sessions"]) == 1 and first["next_cursor"]
    assert first["total"] == listed["total"]


async def _one_page(mcp_client: McpClient) -> Any:
    async with mcp_client() as client:
        return await client.call_tool("list_sessions", {"limit": 1})


async def test_bad_input_is_a_tool_error_with_a_clear_message(mcp_client: McpClient) -> None:
    async with mcp_client() as client:
        empty = await client.call_tool("search_memory", {"query": ""})
        assert empty.is_error and "query" in text_of(empty)
        too_many = await client.call_tool("search_memory", {"query": "x", "k": 500})
        assert too_many.is_error and "k" in text_of(too_many)
        wrong_role = await client.call_tool("remember", {"text": "hi", "role": "system"})
        assert wrong_role.is_error and "role" in text_of(wrong_role)
        nothing = await client.call_tool("forget", {})
        assert nothing.is_error
        assert "name what to forget" in text_of(nothing)
        bad_date = await client.call_tool("search_memory", {"query": "x", "since": "yesterday"})
        assert bad_date.is_error and "since must be an ISO 8601" in text_of(bad_date)
        # refused by the daemon: its own message comes back, the server keeps serving
        bad_session = await client.call_tool("remember", {"text": "hi", "session_id": "a/b"})
        assert bad_session.is_error
        assert "remember failed: session ID 'a/b' contains a path separator" in text_of(bad_session)
        summary = await client.call_tool(
            "forget", {"records": [{"collection": "session_summary:x", "id": "s1"}]}
        )
        assert summary.is_error and "'s1' is a summary" in text_of(summary)
        alive = await client.call_tool("list_sessions", {})
        assert not alive.is_error


async def test_a_pinned_namespace_cannot_forget_shared_global_memory(
    mcp_client: McpClient, daemon: DaemonProcess
) -> None:
    """Regression (issue 32): a forget through an MCP server pinned with ``--namespace``
    deleted a shared ``global`` record for every client."""
    shared = {"collection": "global", "id": "mcp-shared-wifi"}
    with DaemonClient(daemon.endpoint, timeout=60) as direct:
        direct.call("insert_text", {**shared, "text": "The office wifi is blue-otter."})
    async with mcp_client() as client:
        refused = await client.call_tool("forget", {"records": [shared]})
    assert refused.is_error and "shared by every namespace" in text_of(refused)
    with DaemonClient(daemon.endpoint, timeout=60) as direct:
        kept = direct.call("list_collection", {"collection": "global"})["results"]
    assert shared["id"] in [r["id"] for r in kept]


def test_the_python_clients_list_sessions(daemon: DaemonProcess) -> None:
    with DaemonClient(daemon.endpoint, timeout=60) as client:
        msgs = [
            {"id": "py-1", "role": "user", "content": "typed client turn", "ts": 1_700_000_000_000}
        ]
        client.ingest("py-sessions", msgs, namespace="py-ns")
        out = client.sessions_list(namespace="py-ns", limit=5)
    assert [(s.session_id, s.turn_count, s.first_ts) for s in out.sessions] == [
        ("py-sessions", 1, 1_700_000_000_000)
    ]
    assert (out.namespace, out.total, out.next_cursor) == ("py-ns", 1, "")


def _hit_with(hits: list[dict[str, Any]], words: str) -> dict[str, Any]:
    matching = [h for h in hits if words in h["text"]]
    assert matching, [h["text"] for h in hits]
    return matching[0]
