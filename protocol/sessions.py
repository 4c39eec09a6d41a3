"""v2 session memory methods: ``ingest``, ``compact``, ``expand``, ``forget``."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from protocol.base import MethodSchema, Params, WireStruct


class IngestMessage(Params):
    """One message. ``content`` is a string or a list of text parts (``{type:"text",
    text}`` or strings); ``ts`` is the event time in epoch milliseconds (default now);
    ``id`` the client's stable message id (default: derived from session, position and
    content hash)."""

    role: str
    content: Any = None
    id: str | None = None
    ts: int | None = None


class IngestParams(Params):
    """``advancementKey`` makes the call a host's accepted-turn commit (OpenClaw
    ``commitTurn``): the messages and a commit marker for the key are written in one
    transaction, and a later call with the same key writes nothing and answers
    ``duplicate: true``."""

    session_id: str
    messages: list[IngestMessage]
    namespace: str | None = None
    user_id: str | None = None
    advancement_key: str | None = None


class IngestResult(WireStruct):
    """``ids[i]`` is the stored id of ``messages[i]``, "" for a message without text.

    ``skipped`` counts messages not stored (already stored, forgotten, repeated in the
    batch, or without text); ``empty`` counts the ones skipped because they carry no text
    (for example an assistant turn holding only a tool call). ``duplicate`` (only with
    an ``advancementKey``) is true when that key was already committed: nothing was
    written.
    """

    ingested: int
    skipped: int
    ids: list[str]
    empty: int = 0
    duplicate: bool | msgspec.UnsetType = msgspec.UNSET


class CompactParams(Params):
    session_id: str
    force: bool = False
    target_size: Annotated[int, msgspec.Meta(ge=0)] | None = None


class CompactResult(WireStruct):
    did_compact: bool
    clusters_formed: int
    clusters_declined: int
    turns_covered: int
    summary_method: str
    mean_confidence: float
    summary_ids: list[str] = msgspec.field(default_factory=list)


class ExpandParams(Params):
    session_id: str
    summary_id: str
    max_depth: int | None = None


class ExpandedTurn(WireStruct):
    """A raw turn, or (``role: "summary"``) a summary left unexpanded by ``maxDepth``."""

    id: str
    role: str
    ts: int
    text: str


class ExpandResult(WireStruct):
    turns: list[ExpandedTurn]


class ForgetParams(Params):
    namespace: str | None = None
    user_id: str | None = None
    include_sessions: bool = False


class ForgetResult(WireStruct):
    deleted: int


METHODS: dict[str, MethodSchema] = {
    "ingest": MethodSchema(
        IngestParams,
        IngestResult,
        "store a batch of session messages as raw history (one transaction, one embed "
        "call); gated admission of user turns to durable memory",
    ),
    "compact": MethodSchema(
        CompactParams,
        CompactResult,
        "summarize the session's uncovered turns outside the recent tail (incremental, "
        "lossless lineage)",
    ),
    "expand": MethodSchema(
        ExpandParams, ExpandResult, "the raw turns a summary covers, chronological"
    ),
    "forget": MethodSchema(
        ForgetParams,
        ForgetResult,
        "delete every record of a namespace (and its sessions when asked), leaving tombstones",
    ),
}
