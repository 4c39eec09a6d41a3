"""The authored rules as MCP resources: the index and one document's rules, read with the
MCP SDK's client after the document was ingested through the daemon."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from libravdb_client import Client as DaemonClient
from libravdb_client.testing import DaemonProcess
from mcp.shared.exceptions import MCPError
from mcp.types import TextResourceContents

from tests.mcp_face.conftest import McpClient

pytestmark = pytest.mark.sqlite_only("the MCP face over RPCs tested on both backends")

DOC = "/notes/team handbook.md"
HANDBOOK = """---
title: Team handbook
core: true
---

# Rules

- Always answer in British English.
- Never share the staging database password.

> Prefer short answers unless asked for detail.

## Background

The team ships the mobile app every second Tuesday.
"""


@pytest.fixture(scope="module")
def handbook(daemon: DaemonProcess) -> str:
    with DaemonClient(daemon.endpoint, timeout=60) as client:
        out = client.authored_ingest(DOC, HANDBOOK)
    assert out.hard == 2
    return "libravdb://authored/" + quote(DOC, safe="")


async def test_the_index_lists_the_document(mcp_client: McpClient, handbook: str) -> None:
    async with mcp_client() as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert "libravdb://authored" in listed
        assert handbook in listed
        assert listed[handbook].mime_type == "text/markdown"
        assert listed[handbook].description == "2 hard rules, 1 soft rules, 1 notes"
        index = (await client.read_resource("libravdb://authored")).contents[0]
    assert isinstance(index, TextResourceContents)
    docs = json.loads(index.text)["documents"]
    doc = next(d for d in docs if d["sourceDoc"] == DOC)
    assert (doc["core"], doc["hard"], doc["uri"]) == (True, 2, handbook)


async def test_a_document_resource_holds_its_rules(mcp_client: McpClient, handbook: str) -> None:
    async with mcp_client() as client:
        contents = (await client.read_resource(handbook)).contents[0]
        templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["libravdb://authored/{source_doc}"]
    assert isinstance(contents, TextResourceContents)
    text = contents.text
    assert text.startswith(f"# {DOC}\n")
    hard = text.index("## Hard rules")
    assert text.index("- Always answer in British English.") > hard
    assert text.index("- Never share the staging database password.") > text.index(
        "- Always answer in British English."
    )
    assert text.index("- Prefer short answers unless asked for detail.") > text.index(
        "## Soft rules"
    )
    assert "- The team ships the mobile app every second Tuesday." in text


async def test_an_unknown_document_is_a_clear_error(mcp_client: McpClient) -> None:
    async with mcp_client() as client:
        with pytest.raises(
            MCPError, match=re.escape("no authored document '/nowhere.md' is loaded")
        ):
            await client.read_resource("libravdb://authored/" + quote("/nowhere.md", safe=""))
