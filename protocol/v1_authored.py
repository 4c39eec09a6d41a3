"""v1 authored-context methods of the reference daemon, wire-exact.

``ingest_markdown_document``, ``delete_authored_document``, ``promote_dream_entries``,
``session_lifecycle_hint`` and ``list_lifecycle_journal``: names, camelCase params, defaults
and results as the reference, so the published OpenClaw plugin works unchanged. Absent or
``null`` params take their zero value (Go semantics); fractional numbers in integer fields
(``stat.mtimeMs``) are truncated by the dispatcher.
"""

from __future__ import annotations

from typing import Any

from protocol.base import MethodSchema, WireStruct
from protocol.v1_store import OkResult, ResultsResult


class MarkdownSourceMeta(WireStruct):
    source_root: str = ""
    source_path: str = ""
    source_kind: str = ""  # "generic" | "obsidian" (case-insensitive; others become generic)
    file_hash: str = ""
    source_size: int = 0
    source_mtime_ms: int = 0
    ingest_version: int = 0
    hash_backend: str = ""


class IngestMarkdownDocumentParams(WireStruct):
    source_doc: str = ""
    text: str = ""
    tokenizer_id: str = ""  # "" = "markdown-ingest:v1"
    core_doc: bool = False
    source_meta: MarkdownSourceMeta | None = None


class DeleteAuthoredDocumentParams(WireStruct):
    source_doc: str = ""


class V1DreamEntry(WireStruct):
    text: str = ""
    score: float = 0.0
    recall_count: int = 0
    unique_queries: int = 0
    section: str = ""
    line: int = 0  # the host sends the 1-based candidate index here
    source_line: int = 0  # and the real file line here (stored as dream_line)
    metadata: dict[str, Any] | None = None


class PromoteDreamEntriesParams(WireStruct):
    user_id: str = ""
    source_doc: str = ""
    source_root: str = ""
    source_path: str = ""
    source_kind: str = ""  # "" = "dream"
    file_hash: str = ""
    source_size: int = 0
    source_mtime_ms: int = 0
    ingest_version: int = 0
    hash_backend: str = ""
    entries: list[V1DreamEntry] | None = None


class PromoteDreamEntriesResult(WireStruct):
    promoted: int
    rejected: int


class SessionLifecycleHintParams(WireStruct):
    hook: str = ""
    reason: str = ""
    session_file: str = ""
    session_id: str = ""
    session_key: str = ""
    agent_id: str = ""
    workspace_dir: str = ""
    message_count: int = 0
    duration_ms: int = 0
    transcript_archived: bool = False
    next_session_id: str = ""
    next_session_key: str = ""


class SessionLifecycleHintResult(WireStruct):
    ok: bool
    hook: str
    session_id: str
    reason: str


class ListLifecycleJournalParams(WireStruct):
    session_id: str = ""
    limit: int = 0  # <= 0 = all


METHODS: dict[str, MethodSchema] = {
    "ingest_markdown_document": MethodSchema(
        IngestMarkdownDocumentParams,
        OkResult,
        "v1: parse markdown into authored hard/soft/variant nodes; atomically replaces the doc",
    ),
    "delete_authored_document": MethodSchema(
        DeleteAuthoredDocumentParams,
        OkResult,
        "v1: delete an authored document's nodes from the three authored collections",
    ),
    "promote_dream_entries": MethodSchema(
        PromoteDreamEntriesParams,
        PromoteDreamEntriesResult,
        "v1: gate dream-diary entries; accepted ones atomically replace the doc's earlier entries",
    ),
    "session_lifecycle_hint": MethodSchema(
        SessionLifecycleHintParams,
        SessionLifecycleHintResult,
        "v1: append a host lifecycle hook to the journal (pruned to journal.max_entries)",
    ),
    "list_lifecycle_journal": MethodSchema(
        ListLifecycleJournalParams,
        ResultsResult,
        "v1: lifecycle journal records, newest first, optional sessionId filter and limit",
    ),
}
