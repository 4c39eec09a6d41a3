"""v2 session memory methods: ``ingest``, ``compact``, ``expand`` (``forget`` is in
``api/forget.py``).

The logic lives in ``sidecar.memory`` (``MemoryService``, which also resolves the
session's namespace); these handlers only decode and shape results.
"""

from __future__ import annotations

import msgspec

from protocol.sessions import (
    CompactParams,
    CompactResult,
    ExpandedTurn,
    ExpandParams,
    ExpandResult,
    IngestParams,
    IngestResult,
)
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields, ingested_messages
from sidecar.errors import InvalidInput, NotFound
from sidecar.memory.compaction.compactor import CompactionOptions
from sidecar.memory.ingest.sessions import messages_from_wire
from sidecar.memory.service import MemoryService
from sidecar.store.names import explicit_ts


def memory_service(ctx: CallContext) -> MemoryService:
    return ctx.app.service(MemoryService)


methods = MethodTable()


@methods.method("ingest")
async def ingest(ctx: CallContext, params: IngestParams) -> IngestResult:
    svc = memory_service(ctx)
    out = await svc.ingest(
        params.session_id,
        messages_from_wire(params.messages),
        namespace=params.namespace,
        user_id=params.user_id,
        progress=ctx.progress,
        advancement_key=params.advancement_key,
    )
    return IngestResult(
        ingested=out.ingested,
        skipped=out.skipped,
        ids=out.ids,
        empty=out.empty,
        duplicate=out.duplicate if params.advancement_key is not None else msgspec.UNSET,
        messages=ingested_messages(
            out,
            [m.role for m in params.messages],
            out.duplicate,
            [m.durable for m in params.messages],
        )
        if params.explain
        else msgspec.UNSET,
    )


@methods.method("compact")
async def compact(ctx: CallContext, params: CompactParams) -> CompactResult:
    svc = memory_service(ctx)
    if not params.session_id.strip():
        raise InvalidInput("sessionId is required")
    opts = CompactionOptions.from_settings(
        svc.settings, target_size=params.target_size or None, force=params.force
    )
    out = await svc.compact_known(params.session_id, opts, ctx.progress)
    # the summaries written: of turns, then of summaries
    ids = out.summary_ids + out.condensed_ids
    return msgspec.structs.replace(copy_fields(out, CompactResult), summary_ids=ids)


@methods.method("expand")
async def expand(ctx: CallContext, params: ExpandParams) -> ExpandResult:
    svc = memory_service(ctx)
    if not params.session_id.strip():
        raise InvalidInput("sessionId is required")
    if not params.summary_id.strip():
        raise InvalidInput("summaryId is required")
    items = await svc.expand(params.session_id, params.summary_id, params.max_depth)
    if items is None:
        raise NotFound(f"summary {params.summary_id!r} not found in session {params.session_id!r}")
    turns: list[ExpandedTurn] = []
    for it in items:
        meta = it.record.metadata
        if it.kind == "summary":
            ts = meta.get("source_ts_min")
            turns.append(
                ExpandedTurn(
                    id=it.id,
                    role="summary",
                    ts=ts if isinstance(ts, int) else it.record.ts_ms,
                    text=it.record.text,
                )
            )
        else:
            role = meta.get("role")
            ts_val = explicit_ts(meta)
            turns.append(
                ExpandedTurn(
                    id=it.id,
                    role=role if isinstance(role, str) else "",
                    ts=it.record.created_ms if ts_val is None else ts_val,
                    text=it.record.text,
                )
            )
    return ExpandResult(turns=turns)


register = methods.register
