"""v2 session memory methods: ``ingest``, ``compact``, ``expand``, ``forget``."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from protocol.base import MethodSchema, Params, WireStruct


class IngestMessage(Params):
    """One message. ``content`` is a string or a list of text parts (``{type:"text",
    text}`` or strings); ``ts`` is the event time in epoch milliseconds (default now), from
    0 (1970-01-01) to 253402300799999 (9999-12-31T23:59:59.999Z), else -32009; ``id`` the
    client's stable message id (default: derived from session, position and content
    hash)."""

    role: str
    content: Any = None
    id: str | None = None
    ts: int | None = None
    # The caller says the message is a fact to keep (a memory tool's "remember this"): it
    # is admitted to durable memory whatever the admission gate scores, and its records
    # carry ``stated_fact: true``.
    durable: bool = False


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
    # add ``messages`` to the result: per message, stored or not, durable or not, and why
    explain: bool = False


class IngestGate(WireStruct):
    """The admission gate's signals for one stored message (each in [0, 1]).

    ``score = (1 - technical) * conversational + technical * technicalScore``;
    ``conversational`` combines ``novelty`` (unlike the namespace's durable memories),
    ``repetition`` (the user keeps saying it) and ``structure`` (facts, preferences,
    constraints, names, dates); ``technicalScore`` combines ``specificity`` (paths, error
    codes, refs), ``actionability`` (decisions, fixes, releases) and ``techDensity``.
    A user message is durable when ``score >= threshold``."""

    score: float
    threshold: float
    conversational: float
    technical_score: float
    technical: float
    novelty: float
    repetition: float
    structure: float
    specificity: float
    actionability: float
    tech_density: float


class IngestedMessage(WireStruct):
    """What became of ``messages[i]``: ``stored`` in the raw history, ``durable``
    (admitted to durable memory), ``reason`` in words, and the gate's signals for a
    stored message."""

    id: str
    stored: bool
    durable: bool
    reason: str
    gate: IngestGate | None = None


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
    # with ``explain``: one entry per message, in request order
    messages: list[IngestedMessage] | msgspec.UnsetType = msgspec.UNSET


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


MAX_FORGET_ITEMS = 1_000
MAX_FORGET_QUERY_HITS = 50


class RecordRef(Params):
    """One stored record: its collection and id (as ``search`` and ``memory.get`` name
    it)."""

    collection: str
    id: str


class ForgetParams(Params):
    """Without ``messageIds``, ``records`` or ``query``: the whole namespace (its sessions
    too with ``includeSessions``). With any of them: just those things, completely: a
    turn goes from every collection that holds a copy and every summary covering it is
    rebuilt without it, and every ``memory.update`` version of it goes too. ``query``
    forgets the namespace's memories that clearly match it (a strict bar, not a search's
    best hits): none when nothing clearly matches, and none (-32009) when more than
    ``limit`` do. ``dryRun`` lists what would go and changes nothing. Shared ``global``
    records are never forgotten by a namespace (-32009)."""

    namespace: str | None = None
    user_id: str | None = None
    include_sessions: bool = False
    message_ids: Annotated[list[str], msgspec.Meta(max_length=MAX_FORGET_ITEMS)] | None = None
    records: Annotated[list[RecordRef], msgspec.Meta(max_length=MAX_FORGET_ITEMS)] | None = None
    query: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_FORGET_QUERY_HITS)] = 1
    dry_run: bool = False


class MissingItem(WireStruct):
    """A message id (``collection`` "") or record asked for and not found."""

    collection: str
    id: str


class ForgottenItem(WireStruct):
    """A turn (``sessionId`` set; ``copies`` = records holding it) or one plain record."""

    collection: str
    id: str
    text: str
    session_id: str
    copies: int


class ForgetResult(WireStruct):
    """``deleted`` counts records deleted (in a dry run: that would be). ``items`` lists
    what was (or would be) forgotten by id or query; ``missing`` the ids and records not
    found in the namespace. ``summariesRebuilt``/``summariesRemoved`` count summaries
    rebuilt without a forgotten turn or left with nothing to cover."""

    deleted: int
    items: list[ForgottenItem] = msgspec.field(default_factory=list)
    missing: list[MissingItem] = msgspec.field(default_factory=list)
    summaries_rebuilt: int = 0
    summaries_removed: int = 0
    dry_run: bool = False


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
        "forget a whole namespace (and its sessions when asked), or chosen messages, records "
        "or the memories that clearly match a query, completely (summaries rebuilt without "
        "them, versions with them); tombstones keep them from coming back; dryRun lists "
        "what would go",
    ),
}
