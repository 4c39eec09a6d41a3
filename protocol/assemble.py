"""v2 context assembly: ``assemble`` and ``search``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from protocol.base import MethodSchema, Params, WireStruct

MAX_SEARCH_K = 200


class AssembleParams(Params):
    session_id: str
    token_budget: Annotated[float, msgspec.Meta(gt=0)]
    namespace: str | None = None
    user_id: str | None = None
    # the host's current messages ({role, content, id?, ts?}), returned unchanged
    messages: list[dict[str, Any]] | None = None
    prompt: str | None = None
    memory_budget_fraction: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.25
    # Where the recent tail goes: "messages" (default when messages are given: the host's
    # messages carry it, the addition does not repeat it) or "addition" (rendered in
    # <recent_session_tail> and left out of the returned messages). Without messages the
    # stored tail is always rendered in the addition.
    tail_placement: Literal["messages", "addition"] | None = None
    # For hosts that let the engine own compaction: keep only the newest messages that fit
    # what the memory budget leaves, from a user message on; older ones are left to memory.
    # The result's windowStart says where the kept messages begin.
    window_messages: bool = False
    # Add ``considered``: the best-ranked candidates left out, with their scores and why.
    explain: bool = False
    # "compact" (default): entries as "[M3] user: text" under one "[YYYY-MM-DD]" line per
    # day; "dated": the reference's tagged entries under the same day lines; "reference":
    # the reference's bytes, for hosts that parse them
    render: Literal["compact", "dated", "reference"] = "compact"
    # Add each selected item's ``text``, for hosts that render memory themselves
    item_text: bool = False


class AssembleBudget(WireStruct):
    total: int
    hard: int
    tail: int
    soft: int
    elevated: int
    retrieval: int
    recovery: int
    used: int


class AssembleSelected(WireStruct):
    kind: str
    collection: str
    id: str
    turn_ids: list[str]
    session_id: str
    role: str
    ts: int | None
    score: float
    tokens: int
    reason: str
    # with ``itemText``: the item's text as it is rendered (unescaped)
    text: str | msgspec.UnsetType = msgspec.UNSET


class AssembleConsidered(WireStruct):
    """A candidate ranked but not injected: ``why`` it was left out, ``reason`` how it
    scored (the parts, as in a selected item's ``reason``)."""

    kind: str
    collection: str
    id: str
    text: str
    score: float
    tokens: int
    why: str
    reason: str


class AssembleResult(WireStruct, omit_defaults=True):
    messages: list[Any]
    system_prompt_addition: str
    estimated_tokens: int
    budget: AssembleBudget
    selected: list[AssembleSelected]
    degraded: list[str] | None = None
    timings: dict[str, float] | None = None
    # index of the first host message kept (windowMessages); the returned messages start there
    window_start: int = 0
    # with ``explain``: the best-ranked candidates left out (at most 10, best first)
    considered: list[AssembleConsidered] | None = None


class SearchFilters(Params):
    role: str | None = None
    since: int | None = None
    until: int | None = None
    kind: str | None = None


class SearchParams(Params):
    query: str
    namespace: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    scopes: list[str] | None = None
    k: Annotated[int, msgspec.Meta(ge=1, le=MAX_SEARCH_K)] = 8
    filters: SearchFilters | None = None


class SearchHitOut(WireStruct):
    kind: str
    collection: str
    id: str
    turn_ids: list[str]
    session_id: str
    role: str
    ts: int | None
    score: float
    text: str


class SearchResult(WireStruct):
    hits: list[SearchHitOut] = msgspec.field(default_factory=list)


class MemoryGetParams(Params):
    """One record by the ``collection`` and ``id`` a ``search`` hit named. Only a collection
    that a search in the same namespace reads is served (the namespace's turns, durable,
    dream and elevated memory, ``global``, ``authored:*``, and the summaries, raw turns and
    guidance of sessions that belong to it)."""

    collection: str
    id: str
    namespace: str | None = None
    user_id: str | None = None
    session_id: str | None = None


class MemoryRecord(WireStruct):
    collection: str
    id: str
    text: str
    kind: str
    role: str
    session_id: str
    ts: int | None
    metadata: dict[str, Any]


class MemoryGetResult(WireStruct):
    record: MemoryRecord


METHODS: dict[str, MethodSchema] = {
    "assemble": MethodSchema(
        AssembleParams,
        AssembleResult,
        "assemble the memory context of one turn under a token budget: hard rules, the "
        "exact recent tail, the soft prefix, elevated guidance, hybrid retrieval, recovery",
    ),
    "search": MethodSchema(
        SearchParams,
        SearchResult,
        "hybrid (dense + BM25) search over a namespace's memory scopes, with filters",
    ),
    "memory.get": MethodSchema(
        MemoryGetParams,
        MemoryGetResult,
        "read one record that a search in the same namespace can return",
    ),
}
