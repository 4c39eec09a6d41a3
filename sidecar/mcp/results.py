"""What the MCP tools return: pydantic models, so each tool publishes an output schema and
its result arrives both as structured content and as JSON text a model can read."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MemoryHit(BaseModel):
    """One search result."""

    text: str = Field(description="the remembered text")
    kind: str = Field(description="turn, durable, summary, guidance, authored, dream or global")
    collection: str = Field(description="where it is stored; pass with id to forget it")
    id: str = Field(description="its record id in the collection")
    message_ids: list[str] = Field(
        description="the message ids it covers (what `remember` returned); forget takes them"
    )
    session_id: str = Field(description="the session it came from (empty when none)")
    role: str = Field(description="user, assistant, ... (empty when not a message)")
    date: str | None = Field(description="UTC time it was said or written, ISO 8601")
    score: float = Field(description="relevance; higher is better")


class SearchOutput(BaseModel):
    hits: list[MemoryHit] = Field(description="best first; empty when nothing relevant")


class RememberOutput(BaseModel):
    message_id: str = Field(description="the stored message's id (forget takes it)")
    session_id: str
    namespace: str
    stored: bool = Field(description="false when it was already stored or was forgotten before")
    durable: bool = Field(
        description="true when it was also kept as a durable fact (always for kind 'fact'; "
        "for a message, when the admission gate keeps it)"
    )
    reason: str = Field(description="why, in words (a fact, or the gate's decision)")


class ForgottenThing(BaseModel):
    """One memory: a message or a stored record, however many copies of it were kept."""

    collection: str
    id: str
    text: str
    session_id: str
    copies: int = Field(
        description="records that held this one memory (raw history, the history index, "
        "durable memory, ...), all removed with it"
    )


class ForgetCandidate(BaseModel):
    """A stored memory that matches a forget query: nothing has been deleted."""

    text: str
    collection: str = Field(description="pass with id in forget's records to delete it")
    id: str
    session_id: str = Field(description="the session it came from (empty when none)")


class ForgetOutput(BaseModel):
    dry_run: bool = Field(description="true: nothing was changed")
    forgotten: int = Field(
        description="memories forgotten (in a dry run: that would be), each counted once "
        "however many copies it had; 0 for a query, which deletes nothing"
    )
    items: list[ForgottenThing] = Field(
        description="the memories that were (or, in a dry run, would be) forgotten"
    )
    candidates: list[ForgetCandidate] = Field(
        default_factory=list,
        description="a query's matches (nothing was deleted); forget the chosen ones with records",
    )
    missing: list[str] = Field(description="ids or collection/id pairs that were not found")
    summaries_rebuilt: int = Field(description="summaries rewritten without the forgotten text")
    summaries_removed: int = Field(description="summaries left empty and removed")
    next_step: str = Field(default="", description="what to do next, in words")


class SessionEntry(BaseModel):
    session_id: str
    turn_count: int = Field(description="messages stored in the session")
    first_date: str | None = Field(description="UTC time of its first message, ISO 8601")
    last_date: str | None = Field(description="UTC time of its last message, ISO 8601")
    summary_count: int = Field(description="summaries compaction has written for it")


class SessionsOutput(BaseModel):
    namespace: str
    sessions: list[SessionEntry] = Field(description="most recently active first")
    total: int = Field(description="sessions in the namespace (all pages)")
    next_cursor: str = Field(description="pass as cursor for the next page; empty on the last")
