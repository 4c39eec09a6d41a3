"""v2 authored context, dream promotion and the lifecycle journal.

``authored.ingest`` / ``authored.delete`` manage markdown documents (hard/soft/variant
nodes); ``dream.promote`` gates dream-diary entries (raw diary text or parsed entries);
``lifecycle.hint`` / ``lifecycle.journal`` append to and read the host lifecycle journal.
See docs/authored.md and docs/protocol.md.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.base import MethodSchema, Params, WireStruct


class SourceInfo(Params, kw_only=True):
    """Provenance of a document (all optional; stored as ``source_*`` metadata)."""

    root: str = ""
    path: str = ""  # relative to root
    kind: str = ""  # authored: "generic" | "obsidian"; dream: default "dream"
    file_hash: str = ""
    hash_backend: str = ""
    size: int = 0
    mtime_ms: int = 0
    ingest_version: int = 0


class AuthoredIngestParams(Params, kw_only=True):
    source_doc: str
    text: str
    # true/false forces the document's core status (only core documents yield hard rules);
    # null = the frontmatter decides (``core: true``), default not core.
    core: bool | None = None
    tokenizer_id: str = "markdown-ingest:v1"
    source: SourceInfo | None = None
    dry_run: bool = False  # parse and report the tiers; write nothing


class AuthoredIngestResult(WireStruct, kw_only=True):
    source_doc: str
    core: bool
    nodes: int  # nodes stored (after tombstone suppression)
    hard: int
    soft: int
    variant: int
    removed: int  # previous records of the document that were deleted
    unchanged: bool  # identical to what is stored: nothing written, nothing embedded
    suppressed: int  # nodes not written because a forget tombstone covers them
    hop_targets: list[str] = msgspec.field(default_factory=list)
    cache_key: str = ""


class AuthoredDeleteParams(Params, kw_only=True):
    source_doc: str


class AuthoredDeleteResult(WireStruct, kw_only=True):
    source_doc: str
    deleted: int


class AuthoredListParams(Params, kw_only=True):
    source_doc: str = ""  # only this document ("" = every document)


class AuthoredDocument(WireStruct, kw_only=True):
    """One loaded authored document: where it came from and what it became."""

    source_doc: str
    root: str  # the watched root it was read from ("" when sent through authored.ingest)
    kind: str  # "generic" | "obsidian" | ...
    path: str  # relative to the root
    core: bool  # hard rules come only from core documents
    hard: int
    soft: int
    variant: int
    watched: bool  # read by the daemon's watcher from a configured root


class AuthoredListResult(WireStruct, kw_only=True):
    documents: list[AuthoredDocument]


class DreamEntryParams(Params, kw_only=True):
    text: str
    score: float
    recall_count: int
    unique_queries: int
    section: str = ""
    line: int = 0  # 1-based line in the diary file (0 = unknown)
    metadata: dict[str, Any] | None = None


class DreamPromoteParams(Params, kw_only=True):
    """Exactly one of ``text`` (a raw diary, parsed by the daemon) or ``entries``."""

    source_doc: str
    user_id: str = ""  # the dream namespace: ``namespace`` or else ``userId`` (one required)
    namespace: str = ""
    text: str | None = None
    entries: list[DreamEntryParams] | None = None
    source: SourceInfo | None = None


class DreamRejection(WireStruct, kw_only=True):
    text: str
    line: int
    reasons: list[str]


class DreamPromoteResult(WireStruct, kw_only=True):
    promoted: int
    rejected: int
    removed: int  # earlier entries of the document that were replaced or deleted
    suppressed: int  # accepted entries not written because a forget tombstone covers them
    collection: str
    ids: list[str] = msgspec.field(default_factory=list)
    rejections: list[DreamRejection] = msgspec.field(default_factory=list)


class LifecycleHintParams(Params, kw_only=True):
    hook: str
    session_id: str = ""
    reason: str = ""
    session_key: str = ""
    session_file: str = ""
    agent_id: str = ""
    workspace_dir: str = ""
    message_count: int | None = None
    duration_ms: int | None = None
    transcript_archived: bool | None = None
    next_session_id: str = ""
    next_session_key: str = ""
    extra: dict[str, Any] | None = None  # stored under metadata.extra


class LifecycleHintResult(WireStruct, kw_only=True):
    id: str
    hook: str
    session_id: str
    reason: str
    ts: int  # epoch ms
    pruned: int  # older entries removed by the retention cap


class LifecycleJournalParams(Params, kw_only=True):
    session_id: str = ""
    hook: str = ""
    limit: int = 50  # <= 0 = all


class JournalEntry(WireStruct, kw_only=True):
    id: str
    hook: str
    session_id: str
    reason: str
    ts: int
    metadata: dict[str, Any]


class LifecycleJournalResult(WireStruct, kw_only=True):
    entries: list[JournalEntry]
    total: int  # matching entries before the limit


METHODS: dict[str, MethodSchema] = {
    "authored.ingest": MethodSchema(
        AuthoredIngestParams,
        AuthoredIngestResult,
        "Parse a markdown document into hard/soft/variant nodes; atomically replace it",
    ),
    "authored.delete": MethodSchema(
        AuthoredDeleteParams, AuthoredDeleteResult, "Delete an authored document's nodes"
    ),
    "authored.list": MethodSchema(
        AuthoredListParams,
        AuthoredListResult,
        "The loaded authored documents: source, root, core flag and nodes per tier",
    ),
    "dream.promote": MethodSchema(
        DreamPromoteParams,
        DreamPromoteResult,
        "Gate dream-diary entries (text or entries); atomically replace the doc's entries",
    ),
    "lifecycle.hint": MethodSchema(
        LifecycleHintParams,
        LifecycleHintResult,
        "Append a host lifecycle hook to the journal (retention: journal.max_entries)",
    ),
    "lifecycle.journal": MethodSchema(
        LifecycleJournalParams,
        LifecycleJournalResult,
        "Lifecycle journal entries, newest first, filtered by session and/or hook",
    ),
}
