"""v2 methods: ``authored.ingest``, ``authored.delete``, ``dream.promote``,
``lifecycle.hint``, ``lifecycle.journal`` (docs/protocol.md, docs/authored.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from protocol.authored import (
    AuthoredDeleteParams,
    AuthoredDeleteResult,
    AuthoredDocument,
    AuthoredIngestParams,
    AuthoredIngestResult,
    AuthoredListParams,
    AuthoredListResult,
    DreamEntryParams,
    DreamPromoteParams,
    DreamPromoteResult,
    JournalEntry,
    LifecycleHintParams,
    LifecycleHintResult,
    LifecycleJournalParams,
    LifecycleJournalResult,
    SourceInfo,
)
from protocol.v1_authored import V1DreamEntry
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields
from sidecar.errors import InvalidInput
from sidecar.memory.authored.service import AuthoredService, SourceMeta
from sidecar.memory.authored.watcher import AuthoredWatcher
from sidecar.memory.lifecycle.dream import DreamEntry, parse_dream_diary
from sidecar.memory.lifecycle.dreams import DreamProvenance, DreamService
from sidecar.memory.lifecycle.journal import LifecycleJournal


def _journal_entry(rid: str, meta: dict[str, Any]) -> JournalEntry:
    ts = meta.get("ts")
    return JournalEntry(
        id=rid,
        hook=str(meta.get("hook") or ""),
        session_id=str(meta.get("sessionId") or ""),
        reason=str(meta.get("reason") or ""),
        ts=ts if isinstance(ts, int) and not isinstance(ts, bool) else 0,
        metadata=meta,
    )


def dream_entry(e: DreamEntryParams | V1DreamEntry, *, line: int, index: int) -> DreamEntry:
    """A dream candidate as v2 ``dream.promote`` and v1 ``promote_dream_entries`` send it;
    each says which line and index it has. The other fields are copied by name (no
    ``metadata``: an empty one)."""
    entry = copy_fields(msgspec.structs.replace(e, metadata=e.metadata or {}), DreamEntry)
    return dataclasses.replace(entry, line=line, index=index)


methods = MethodTable()


@methods.method("authored.ingest")
async def authored_ingest(ctx: CallContext, params: AuthoredIngestParams) -> AuthoredIngestResult:
    rep = await ctx.app.service(AuthoredService).ingest(
        params.source_doc,
        params.text,
        core=params.core,
        tokenizer_id=params.tokenizer_id,
        source=copy_fields(params.source or SourceInfo(), SourceMeta),
        dry_run=params.dry_run,
        progress=ctx.progress,
    )
    return copy_fields(rep, AuthoredIngestResult)


@methods.method("authored.delete")
async def authored_delete(ctx: CallContext, params: AuthoredDeleteParams) -> AuthoredDeleteResult:
    svc = ctx.app.service(AuthoredService)
    n = await svc.delete(params.source_doc)
    await svc.store.scrub_after_forget()
    return AuthoredDeleteResult(source_doc=params.source_doc.strip(), deleted=n)


@methods.method("authored.list")
async def authored_list(ctx: CallContext, params: AuthoredListParams) -> AuthoredListResult:
    watcher = ctx.app.maybe_service(AuthoredWatcher)
    watched = set(watcher.files) if watcher is not None else set()
    docs = await ctx.app.service(AuthoredService).documents(watched)
    wanted = params.source_doc.strip()
    return AuthoredListResult(
        documents=[AuthoredDocument(**d) for d in docs if not wanted or d["source_doc"] == wanted]
    )


@methods.method("dream.promote")
async def dream_promote(ctx: CallContext, params: DreamPromoteParams) -> DreamPromoteResult:
    if (params.text is None) == (params.entries is None):
        raise InvalidInput("exactly one of text or entries is required")
    if params.text is not None:
        entries = parse_dream_diary(params.text)
    else:
        entries = [
            dream_entry(e, line=max(0, e.line), index=i + 1)
            for i, e in enumerate(params.entries or [])
        ]
    prov = copy_fields(params.source or SourceInfo(), DreamProvenance)
    ns = params.namespace.strip() or params.user_id.strip()
    if not ns:
        raise InvalidInput("userId or namespace is required")
    rep = await ctx.app.service(DreamService).promote(ns, params.source_doc, entries, prov)
    return copy_fields(rep, DreamPromoteResult)  # rejections: RejectedEntry.text, .line, .reasons


@methods.method("lifecycle.hint")
async def lifecycle_hint(ctx: CallContext, params: LifecycleHintParams) -> LifecycleHintResult:
    hook = params.hook.strip()
    if not hook:
        raise InvalidInput("hook is required")
    # the hint's other fields by their wire names, those given (not null, not empty)
    fields: dict[str, Any] = {"hook": hook}
    for key, value in msgspec.to_builtins(params).items():
        if key not in ("hook", "extra") and value is not None and value != "":
            fields[key] = value
    if params.extra:
        fields["extra"] = params.extra
    res = await ctx.app.service(LifecycleJournal).append(hook, params.session_id, fields)
    return LifecycleHintResult(
        id=res.id,
        hook=hook,
        session_id=params.session_id,
        reason=params.reason,
        ts=res.ts,
        pruned=res.pruned,
    )


@methods.method("lifecycle.journal")
async def lifecycle_journal(
    ctx: CallContext, params: LifecycleJournalParams
) -> LifecycleJournalResult:
    recs, total = await ctx.app.service(LifecycleJournal).entries(
        session_id=params.session_id, hook=params.hook, limit=params.limit
    )
    return LifecycleJournalResult(
        entries=[_journal_entry(r.id, r.metadata) for r in recs], total=total
    )


register = methods.register
