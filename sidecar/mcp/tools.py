"""The memory tools a model calls: search, remember, recall, list sessions (forget has a
module of its own, ``forget``).

Each tool works in the server's one namespace (``--namespace``): a model cannot reach
another user's memory by naming it. Arguments are validated against the published JSON
Schema before a tool runs (a bad value is a tool error naming the field); the daemon's own
refusals come back as tool errors carrying its one-line message.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from libravdb_client import AsyncClient
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from sidecar.mcp.bridge import DaemonBridge
from sidecar.mcp.forget import register_forget
from sidecar.mcp.results import (
    MemoryHit,
    RememberOutput,
    SearchOutput,
    SessionEntry,
    SessionsOutput,
)
from sidecar.store.timestamps import in_range

Scope = Literal[
    "history", "session", "durable", "summary", "global", "authored", "dream", "elevated"
]
SessionArg = Annotated[
    str | None,
    Field(
        description="a session id; default: this server's session (the --session option, or "
        "one named after the time the server started)"
    ),
]


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Where the tools read and write: the namespace and the default session."""

    namespace: str
    session_id: str

    def session_of(self, session_id: str | None) -> str:
        """The session a tool call names, else the default one."""
        sid = self.session_id if session_id is None else session_id.strip()
        if not sid:
            raise ToolError("session_id must not be blank (omit it to use the default session)")
        return sid


def iso_date(ts: int | None) -> str | None:
    """The ISO 8601 time of an epoch-ms ``ts``; None without one, or for a record stored
    before the daemon refused times outside its range (a year past 9999 has no date)."""
    if ts is None or not in_range(ts):
        return None
    return datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="seconds")


def register_tools(server: MCPServer, bridge: DaemonBridge, scope: MemoryScope) -> None:
    _register_reads(server, bridge, scope)
    _register_writes(server, bridge, scope)
    register_forget(server, bridge, scope.namespace)


def _register_reads(server: MCPServer, bridge: DaemonBridge, scope: MemoryScope) -> None:
    ns, session_of = scope.namespace, scope.session_of

    @server.tool(
        name="search_memory",
        title="Search memory",
        description=(
            "Search the long-term memory for what was said, decided or learned before: past "
            "conversations (all sessions), durable facts about the user, summaries, authored "
            "rules and notes. Use it before answering a question that may depend on earlier "
            "conversations. Returns the best matches first, each with its text, date and the "
            "ids `forget` needs. An empty list means nothing relevant is stored."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def search_memory(
        query: Annotated[str, Field(min_length=1, description="what to look for, in words")],
        k: Annotated[int, Field(ge=1, le=50, description="at most this many hits")] = 8,
        scopes: Annotated[
            list[Scope] | None,
            Field(
                description="limit the search to these stores: history (every session's "
                "messages), session (only session_id's messages), durable (facts kept about "
                "the user), summary (session_id's summaries), global, authored (rules and "
                "notes), dream, elevated (guidance); default: all but session"
            ),
        ] = None,
        session_id: Annotated[
            str | None,
            Field(
                description="the session the session and summary scopes read (default: this "
                "server's session); other scopes search every session"
            ),
        ] = None,
        since: Annotated[
            str | None, Field(description="only things said at or after this ISO 8601 time")
        ] = None,
        until: Annotated[
            str | None, Field(description="only things said at or before this ISO 8601 time")
        ] = None,
    ) -> SearchOutput:
        params: dict[str, Any] = {"query": query, "namespace": ns, "k": k}
        if scopes is not None:
            params["scopes"] = list(scopes)
        if session_id is not None or (scopes is not None and {"session", "summary"} & set(scopes)):
            params["sessionId"] = session_of(session_id)
        filters = {
            key: _epoch_ms(value, key)
            for key, value in (("since", since), ("until", until))
            if value is not None
        }
        if filters:
            params["filters"] = filters
        result = await bridge.call("search", lambda c: c.call("search", params))
        return SearchOutput(hits=[_hit(h) for h in result["hits"]])

    @server.tool(
        name="recall_context",
        title="Recall context",
        description=(
            "Get the memory relevant to a question as one block of text to read before "
            "answering: standing rules, the recent messages of the session, durable facts and "
            "the most relevant past conversations, grouped by date, within a token budget. "
            "Prefer it to search_memory when you want context rather than a list of matches."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def recall_context(
        question: Annotated[str, Field(min_length=1, description="the question or task at hand")],
        token_budget: Annotated[
            int, Field(ge=64, le=32_000, description="the most tokens the text may take")
        ] = 1500,
        session_id: SessionArg = None,
    ) -> str:
        sid = session_of(session_id)

        async def assemble(c: AsyncClient) -> str:
            out = await c.assemble(
                sid,
                prompt=question,
                token_budget=token_budget,
                namespace=ns,
                memory_budget_fraction=1.0,
            )
            return out.system_prompt_addition

        text = await bridge.call("recall", assemble)
        return text if text.strip() else "No stored memory is relevant to this question."

    @server.tool(
        name="list_sessions",
        title="List sessions",
        description=(
            "List the conversations (sessions) stored in memory, most recently active first, "
            "with how many messages and summaries each has and when it started and ended."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def list_sessions(
        limit: Annotated[int, Field(ge=1, le=100, description="sessions per page")] = 20,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
    ) -> SessionsOutput:
        async def page(c: AsyncClient) -> SessionsOutput:
            out = await c.sessions_list(namespace=ns, limit=limit, cursor=cursor or None)
            return SessionsOutput(
                namespace=out.namespace,
                sessions=[
                    SessionEntry(
                        session_id=s.session_id,
                        turn_count=s.turn_count,
                        first_date=iso_date(s.first_ts),
                        last_date=iso_date(s.last_ts),
                        summary_count=s.summary_count,
                    )
                    for s in out.sessions
                ],
                total=out.total,
                next_cursor=out.next_cursor,
            )

        return await bridge.call("list sessions", page)


def _register_writes(server: MCPServer, bridge: DaemonBridge, scope: MemoryScope) -> None:
    ns, session_of = scope.namespace, scope.session_of

    @server.tool(
        name="remember",
        title="Remember",
        description=(
            "Store something in long-term memory. kind 'fact' is for a fact, preference or "
            "decision worth keeping (about the user, their people, places, plans or work): "
            'write it as a self-contained sentence ("The user\'s daughter is called Mia") '
            "and it is always kept as a durable fact. kind 'message' (the default) stores a "
            "message of the conversation as it was said; the memory's admission gate decides "
            "whether it also becomes a durable fact (thanks and one-off requests do not). "
            "role: 'user' for what the user said or a fact about them, 'assistant' for what "
            "the assistant said. Storing the same message_id twice stores it once."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    async def remember(
        text: Annotated[str, Field(min_length=1, description="what to remember, in full")],
        kind: Annotated[
            Literal["message", "fact"],
            Field(
                description="'fact': keep it as a durable fact whatever the admission gate "
                "says; 'message': a conversation message, durable only when the gate keeps it"
            ),
        ] = "message",
        role: Annotated[Literal["user", "assistant"], Field(description="who said it")] = "user",
        session_id: SessionArg = None,
        message_id: Annotated[
            str | None,
            Field(description="your own stable id for this message; default: a new one"),
        ] = None,
    ) -> RememberOutput:
        sid = session_of(session_id)
        mid = message_id.strip() if message_id else f"mcp-{uuid.uuid4().hex}"
        message: dict[str, Any] = {"id": mid, "role": role, "content": text}
        if kind == "fact":
            # the daemon admits it to durable memory whatever its gate scores
            message["durable"] = True
        params = {"sessionId": sid, "namespace": ns, "messages": [message], "explain": True}
        result = await bridge.call("remember", lambda c: c.call("ingest", params))
        entry = result["messages"][0]
        return RememberOutput(
            message_id=entry["id"] or mid,
            session_id=sid,
            namespace=ns,
            stored=bool(entry["stored"]),
            durable=bool(entry["durable"]),
            reason=str(entry["reason"]),
        )


def _hit(h: dict[str, Any]) -> MemoryHit:
    return MemoryHit(
        text=h["text"],
        kind=h["kind"],
        collection=h["collection"],
        id=h["id"],
        message_ids=list(h["turnIds"]),
        session_id=h["sessionId"],
        role=h["role"],
        date=iso_date(h["ts"]),
        score=round(float(h["score"]), 4),
    )


def _epoch_ms(value: str, name: str) -> int:
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ToolError(f"{name} must be an ISO 8601 date or time, not {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
