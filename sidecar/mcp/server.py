"""The MCP server object: the memory tools and the authored-rules resources."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.types import CallToolResult, InputRequiredResult
from mcp.types import Resource as MCPResource
from pydantic import ValidationError

import sidecar
from sidecar.mcp import resources as R
from sidecar.mcp.arg_errors import argument_error
from sidecar.mcp.bridge import DaemonBridge
from sidecar.mcp.tools import MemoryScope, register_tools

INSTRUCTIONS = """\
Long-term memory for this assistant, kept by the local libravdb daemon across
conversations. Use search_memory or recall_context before answering anything that may
depend on what was said or decided earlier; use remember with kind "fact" for facts,
preferences and decisions worth keeping (one self-contained sentence each). forget takes
two steps: with a query it only lists candidates; then forget with the records of the
ones to delete removes them everywhere. list_sessions shows the stored conversations.
The authored rules (libravdb://authored) are standing instructions written by the user."""


class MemoryServer(MCPServer[Any]):
    """An MCPServer whose resource list also names every loaded authored document (the
    set changes as documents are ingested, so it is asked of the daemon each time)."""

    def __init__(self, bridge: DaemonBridge, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bridge = bridge

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            # the cause stays the ValidationError: the SDK logs its field names only
            raise ToolError(argument_error(name, cause)) from cause

    async def list_resources(self) -> list[MCPResource]:
        listed = await super().list_resources()
        for doc in await R.list_documents(self.bridge):
            listed.append(
                MCPResource(
                    uri=R.document_uri(doc["sourceDoc"]),
                    name=doc["sourceDoc"],
                    title=f"Authored rules: {doc['sourceDoc']}",
                    description=(
                        f"{doc['hard']} hard rules, {doc['soft']} soft rules, "
                        f"{doc['variant']} notes"
                    ),
                    mime_type="text/markdown",
                )
            )
        return listed


def build_server(bridge: DaemonBridge, scope: MemoryScope) -> MemoryServer:
    server = MemoryServer(
        bridge,
        name="libravdb",
        title="libravdb memory",
        instructions=INSTRUCTIONS,
        version=sidecar.__version__,
    )
    register_tools(server, bridge, scope)

    @server.resource(
        R.INDEX_URI,
        name="authored documents",
        title="Authored documents",
        description="every loaded authored document: its tiers, counts and where it came from",
        mime_type="application/json",
    )
    async def authored_index() -> str:
        return await R.read_index(bridge)

    # A document name is only ever sent to the daemon as a name (never opened as a path
    # here), so absolute paths and ".." in it are legitimate.
    @server.resource(
        R.DOCUMENT_TEMPLATE,
        name="authored document",
        title="Authored document rules",
        description="one authored document's hard rules, soft rules and notes, as markdown",
        mime_type="text/markdown",
        security=ResourceSecurity(exempt_params={"source_doc"}),
    )
    async def authored_document(source_doc: str) -> str:
        return await R.read_document(bridge, source_doc)

    return server
