"""The authored rules as MCP resources.

``libravdb://authored`` lists the loaded authored documents (``authored.list``) as JSON;
``libravdb://authored/{source_doc}`` (the document name percent-encoded, as listed) is one
document's rules and notes as markdown: hard rules (always in the assembled context), soft
rules, then the notes recalled by relevance, each tier in document order.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from libravdb_client import AsyncClient
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from sidecar.mcp.bridge import DaemonBridge

INDEX_URI = "libravdb://authored"
DOCUMENT_TEMPLATE = "libravdb://authored/{source_doc}"
TIERS = (
    ("hard", "Hard rules (always in the assembled context)"),
    ("soft", "Soft rules"),
    ("variant", "Notes (recalled when relevant)"),
)


def document_uri(source_doc: str) -> str:
    return f"{INDEX_URI}/{quote(source_doc, safe='')}"


async def list_documents(bridge: DaemonBridge) -> list[dict[str, Any]]:
    try:
        out = await bridge.call("authored.list", lambda c: c.call("authored.list", {}))
    except ToolError as exc:
        raise ResourceError(str(exc)) from exc
    docs: list[dict[str, Any]] = out["documents"]
    return docs


async def read_index(bridge: DaemonBridge) -> str:
    docs = await list_documents(bridge)
    for doc in docs:
        doc["uri"] = document_uri(doc["sourceDoc"])
    return json.dumps({"documents": docs}, indent=2, ensure_ascii=False)


async def read_document(bridge: DaemonBridge, source_doc: str) -> str:
    docs = [d for d in await list_documents(bridge) if d["sourceDoc"] == source_doc]
    if not docs:
        raise ResourceNotFoundError(f"no authored document {source_doc!r} is loaded")
    doc = docs[0]

    async def nodes(c: AsyncClient) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for tier, _title in TIERS:
            params = {"collection": f"authored:{tier}", "key": "source_doc", "value": source_doc}
            found[tier] = (await c.call("list_by_meta", params))["results"]
        return found

    try:
        by_tier = await bridge.call("reading the authored document", nodes)
    except ToolError as exc:
        raise ResourceError(str(exc)) from exc
    lines = [
        f"# {source_doc}",
        "",
        f"core: {'yes' if doc['core'] else 'no'}; hard rules {doc['hard']}, soft rules "
        f"{doc['soft']}, notes {doc['variant']}",
    ]
    for tier, title in TIERS:
        records = sorted(by_tier[tier], key=_ordinal)
        if records:
            lines += ["", f"## {title}", ""]
            lines += [f"- {_one_line(r['text'])}" for r in records]
    return "\n".join(lines) + "\n"


def _ordinal(record: dict[str, Any]) -> tuple[int, str]:
    value = record.get("metadata", {}).get("ordinal")
    return (value if isinstance(value, int) else 0, str(record.get("id", "")))


def _one_line(text: str) -> str:
    return " ".join(text.split())
