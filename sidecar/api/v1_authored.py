"""v1 authored-context methods, wire-exact.

Fixed reference bugs, invisible to its client: ``ingest_markdown_document`` replaces a
document atomically; ``promote_dream_entries`` replaces earlier entries also when
every entry is rejected and stores the real file line as ``dream_line``;
``list_lifecycle_journal`` lists newest first so ``limit`` keeps the latest;
fractional ``sourceMtimeMs`` / ``sourceSize`` are accepted.
"""

from __future__ import annotations

from typing import Any

from protocol.v1_authored import (
    DeleteAuthoredDocumentParams,
    IngestMarkdownDocumentParams,
    ListLifecycleJournalParams,
    PromoteDreamEntriesParams,
    PromoteDreamEntriesResult,
    SessionLifecycleHintParams,
    SessionLifecycleHintResult,
)
from protocol.v1_store import OkResult, ResultsResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.v1_store import _result
from sidecar.memory.authored.service import AuthoredService, SourceMeta
from sidecar.memory.authored.watcher import glob_match
from sidecar.memory.lifecycle.dream import DreamEntry, resolve_source_line
from sidecar.memory.lifecycle.dreams import DreamProvenance, DreamService
from sidecar.memory.lifecycle.journal import LifecycleJournal


def _v1_core(ctx: CallContext, core_doc: bool, source_path: str) -> bool | None:
    """Core status of a v1 document. None lets its frontmatter decide (``core: true``)."""
    settings = ctx.app.settings.authored
    if not core_doc:
        return False
    if settings.v1_core_doc == "trust" or glob_match(settings.core_globs, source_path):
        return True
    return None


methods = MethodTable()


@methods.method("ingest_markdown_document")
async def ingest_markdown_document(
    ctx: CallContext, params: IngestMarkdownDocumentParams
) -> OkResult:
    m = params.source_meta
    source = (
        SourceMeta(
            root=m.source_root,
            path=m.source_path,
            kind=m.source_kind,
            file_hash=m.file_hash,
            size=m.source_size,
            mtime_ms=m.source_mtime_ms,
            ingest_version=m.ingest_version,
            hash_backend=m.hash_backend,
        )
        if m is not None
        else None
    )
    await ctx.app.service(AuthoredService).ingest(
        params.source_doc,
        params.text,
        core=_v1_core(ctx, params.core_doc, m.source_path if m is not None else ""),
        tokenizer_id=params.tokenizer_id,
        source=source,
    )
    return OkResult(ok=True)


@methods.method("delete_authored_document")
async def delete_authored_document(
    ctx: CallContext, params: DeleteAuthoredDocumentParams
) -> OkResult:
    svc = ctx.app.service(AuthoredService)
    await svc.delete(params.source_doc)
    await svc.store.scrub_after_forget()
    return OkResult(ok=True)


@methods.method("promote_dream_entries")
async def promote_dream_entries(
    ctx: CallContext, params: PromoteDreamEntriesParams
) -> PromoteDreamEntriesResult:
    entries = [
        DreamEntry(
            text=e.text,
            score=e.score,
            recall_count=e.recall_count,
            unique_queries=e.unique_queries,
            section=e.section,
            line=resolve_source_line(e.line, e.source_line),
            index=e.line if e.line > 0 else i + 1,
            metadata=e.metadata or {},
        )
        for i, e in enumerate(params.entries or [])
    ]
    prov = DreamProvenance(
        root=params.source_root,
        path=params.source_path,
        kind=params.source_kind,
        file_hash=params.file_hash,
        size=params.source_size,
        mtime_ms=params.source_mtime_ms,
        ingest_version=params.ingest_version,
        hash_backend=params.hash_backend,
    )
    rep = await ctx.app.service(DreamService).promote(
        params.user_id, params.source_doc, entries, prov
    )
    return PromoteDreamEntriesResult(promoted=rep.promoted, rejected=rep.rejected)


@methods.method("session_lifecycle_hint")
async def session_lifecycle_hint(
    ctx: CallContext, params: SessionLifecycleHintParams
) -> SessionLifecycleHintResult:
    fields: dict[str, Any] = {
        "hook": params.hook,
        "reason": params.reason,
        "sessionFile": params.session_file,
        "sessionId": params.session_id,
        "sessionKey": params.session_key,
        "agentId": params.agent_id,
        "workspaceDir": params.workspace_dir,
        "messageCount": params.message_count,
        "durationMs": params.duration_ms,
        "transcriptArchived": params.transcript_archived,
        "nextSessionId": params.next_session_id,
        "nextSessionKey": params.next_session_key,
    }
    await ctx.app.service(LifecycleJournal).append(params.hook, params.session_id, fields)
    return SessionLifecycleHintResult(
        ok=True, hook=params.hook, session_id=params.session_id, reason=params.reason
    )


@methods.method("list_lifecycle_journal")
async def list_lifecycle_journal(
    ctx: CallContext, params: ListLifecycleJournalParams
) -> ResultsResult:
    recs, _ = await ctx.app.service(LifecycleJournal).entries(
        session_id=params.session_id, limit=params.limit
    )
    return ResultsResult(results=[_result(r, 0.0, None) for r in recs])


register = methods.register
