"""The ``forget`` tool: two steps, so that no call deletes something nobody chose.

A call with a ``query`` only never deletes: it is the daemon's ``forget`` with ``dryRun``,
and it returns the matching memories as candidates with the instruction to call ``forget``
again with the ``records`` (or ``message_ids``) of the ones to delete. Deleting takes those
ids and nothing else, so a retry (a host may repeat a call by itself: the tool is
published idempotent) deletes nothing more: the ids are gone, and a query deletes nothing.
A query that deleted its best match would delete a different, unrelated memory on each
repetition.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from sidecar.mcp.bridge import DaemonBridge
from sidecar.mcp.results import ForgetCandidate, ForgetOutput, ForgottenThing

DESCRIPTION = (
    "Permanently forget specific memories, everywhere they are stored (summaries that "
    "contained them are rewritten without them). Two steps. 1: call it with `query` (what "
    "to forget, in words): nothing is deleted; it returns the matching memories as "
    "`candidates`, each with its collection and id. 2: call it again with `records` set to "
    "the [{collection, id}] of the candidates that really are what the user wants "
    "forgotten (or `message_ids`, as remember and search hits give them): exactly those are "
    "deleted. Search hits' collection and id work as records too. `dry_run` true with "
    "records or message_ids shows what would go and deletes nothing. The whole memory is "
    "never forgotten by this tool."
)
NEXT_STEP = (
    "Nothing was deleted. To forget some of these candidates, call forget again with "
    "records set to the [{collection, id}] of the ones to delete (only those are deleted)."
)
NO_MATCH = (
    "Nothing was deleted, and nothing stored clearly matches this query. search_memory "
    "finds related memories; the collection and id of a hit work as records here."
)
# The daemon refuses a query with more clear matches than its limit; the tool asks for
# all of them (its dry run deletes nothing) and lists the first `limit`.
DAEMON_LIMIT = 50
DRY_RUN = (
    "Nothing was deleted (dry_run): {memories} would be forgotten. Call forget again with "
    "the same records or message_ids and dry_run false to delete them."
)


class RecordRef(BaseModel):
    collection: str = Field(description="the `collection` of a candidate or search hit")
    id: str = Field(description="the `id` of that candidate or hit")


def register_forget(server: MCPServer, bridge: DaemonBridge, namespace: str) -> None:
    # destructive: it deletes for good; idempotent: a repeated call deletes nothing more
    # (given ids are gone after the first, a query deletes nothing).
    @server.tool(
        name="forget",
        title="Forget",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True
        ),
    )
    async def forget(
        query: Annotated[
            str | None,
            Field(description="step 1: find candidates matching these words (deletes nothing)"),
        ] = None,
        records: Annotated[
            list[RecordRef] | None,
            Field(description="step 2: the candidates (or search hits) to delete"),
        ] = None,
        message_ids: Annotated[
            list[str] | None,
            Field(description="step 2, by message: ids of messages to delete"),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=50, description="candidates a query lists at most")
        ] = 5,
        dry_run: Annotated[
            bool,
            Field(description="with records or message_ids: only report what would go"),
        ] = False,
    ) -> ForgetOutput:
        wanted = query.strip() if query else ""
        if wanted and (records or message_ids):
            raise ToolError(
                "give query (to list candidates; it deletes nothing) or records/message_ids "
                "(to delete them), not both"
            )
        if wanted:
            params: dict[str, Any] = {
                "namespace": namespace,
                "query": query,
                "limit": DAEMON_LIMIT,
                "dryRun": True,
            }
            out = await bridge.call("forget", lambda c: c.call("forget", params))
            return _candidates(out, limit)
        if not records and not message_ids:
            raise ToolError(
                "name what to forget: a query (lists candidates), or records or message_ids"
            )
        params = {"namespace": namespace, "dryRun": dry_run}
        if message_ids:
            params["messageIds"] = message_ids
        if records:
            params["records"] = [{"collection": r.collection, "id": r.id} for r in records]
        out = await bridge.call("forget", lambda c: c.call("forget", params))
        return _forgotten(out)


def _candidates(out: dict[str, Any], limit: int) -> ForgetOutput:
    found = [
        ForgetCandidate(
            text=i["text"], collection=i["collection"], id=i["id"], session_id=i["sessionId"]
        )
        for i in out["items"][:limit]
    ]
    return ForgetOutput(
        dry_run=True,
        forgotten=0,
        items=[],
        candidates=found,
        missing=[],
        summaries_rebuilt=0,
        summaries_removed=0,
        next_step=NEXT_STEP if found else NO_MATCH,
    )


def _forgotten(out: dict[str, Any]) -> ForgetOutput:
    # The daemon's ``deleted`` counts records: one remembered message is its raw record and
    # its copies (3 or more), which a model reads as that many memories. The tool counts
    # memories, and each item says how many copies it had.
    items = [
        ForgottenThing(
            collection=i["collection"],
            id=i["id"],
            text=i["text"],
            session_id=i["sessionId"],
            copies=i["copies"],
        )
        for i in out["items"]
    ]
    dry_run = bool(out["dryRun"])
    return ForgetOutput(
        dry_run=dry_run,
        forgotten=len(items),
        items=items,
        missing=[
            f"{m['collection']}/{m['id']}" if m["collection"] else m["id"] for m in out["missing"]
        ],
        summaries_rebuilt=int(out["summariesRebuilt"]),
        summaries_removed=int(out["summariesRemoved"]),
        next_step=DRY_RUN.format(memories=_memories(len(items))) if dry_run and items else "",
    )


def _memories(n: int) -> str:
    return "1 memory" if n == 1 else f"{n} memories"
