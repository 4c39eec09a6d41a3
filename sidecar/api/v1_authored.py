"""v1 authored-context methods, wire-exact.

Fixed reference bugs, invisible to its client: ``ingest_markdown_document`` replaces a
document atomically; ``promote_dream_entries`` replaces earlier entries also when
every entry is rejected and stores the real file line as ``dream_line``;
``list_lifecycle_journal`` lists newest first so ``limit`` keeps the latest;
fractional ``sourceMtimeMs`` / ``sourceSize`` are accepted.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

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
from sidecar.api.authored import dream_entry
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.v1_store import _result
from sidecar.memory.authored.service import AuthoredService, SourceMeta
from sidecar.memory.authored.watcher import glob_match
from sidecar.memory.lifecycle.dream import resolve_source_line
from sidecar.memory.lifecycle.dreams import DreamProvenance, DreamService
from sidecar.memory.lifecycle.journal import LifecycleJournal

Provenance = TypeVar("Provenance", SourceMeta, DreamProvenance)
# v1 names a document's provenance flat, with a ``source`` prefix on some fields.
_V1_NAMES = {
    "root": "source_root",
    "path": "source_path",
    "kind": "source_kind",
    "size": "source_size",
    "mtime_ms": "source_mtime_ms",
}


def _v1_source(v1: object, kind: type[Provenance]) -> Provenance:
    """The provenance ``kind`` from the v1 ``source*`` fields of ``v1`` (a document's
    ``sourceMeta`` or a dream promotion's params)."""
    return kind(**{f.name: getattr(v1, _V1_NAMES.get(f.name, f.name)) for f in fields(kind)})


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
    await ctx.app.service(AuthoredService).ingest(
        params.source_doc,
        params.text,
        core=_v1_core(ctx, params.core_doc, m.source_path if m is not None else ""),
        tokenizer_id=params.tokenizer_id,
        source=_v1_source(m, SourceMeta) if m is not None else None,
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
        dream_entry(
            e,
            line=resolve_source_line(e.line, e.source_line),
            index=e.line if e.line > 0 else i + 1,
        )
        for i, e in enumerate(params.entries or [])
    ]
    rep = await ctx.app.service(DreamService).promote(
        params.user_id, params.source_doc, entries, _v1_source(params, DreamProvenance)
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
