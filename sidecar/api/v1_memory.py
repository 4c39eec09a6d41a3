"""v1 memory methods of the reference daemon, wire-exact.

Fixes invisible to the reference client: ``insert_session_turn`` embeds once for both
collections and upserts; ``gating_scalar`` searches only user turns of ``turns:<ns>`` and
drops one hit whose text equals the query (the host inserts the turn before asking, so it
was its own neighbour); ``compact_session`` is incremental and idempotent,
protects the tail by default (``continuityMinTurns`` absent → 4), and never fails on
a seq2seq error; ``expand_summary`` returns children chronologically.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import replace

from protocol.v1_memory import (
    CompactSessionParams,
    CompactSessionResult,
    ExpandSummaryParams,
    GatingScalarParams,
    GatingSignalsResult,
    InsertSessionTurnParams,
    QueryRawSessionParams,
)
from protocol.v1_store import OkResult, ResultsResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.sessions import memory_service
from sidecar.api.v1_store import _clean_ids, _embed, _fit, _result, _store, _svc
from sidecar.api.wire import gating_result
from sidecar.errors import InvalidInput
from sidecar.memory.compaction.compactor import CompactionOptions
from sidecar.memory.core import layout as C
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.memory.ingest.gate import REFERENCE_CONFIG, compute_gating
from sidecar.memory.service import MemoryService
from sidecar.store import errors as se
from sidecar.store.timestamps import check_metadata_ts
from sidecar.store.types import Put

methods = MethodTable()


@methods.method("insert_session_turn")
async def insert_session_turn(ctx: CallContext, params: InsertSessionTurnParams) -> OkResult:
    sid = params.session_id
    if not sid.strip():
        raise InvalidInput("session ID is required")
    if not params.id.strip():
        raise InvalidInput("record id is required")
    if not params.text.strip():
        # A turn without text (a tool call alone) is not stored, as in v2 `ingest`; the
        # reference plugin drops such messages before it calls, so it never sees this.
        return OkResult(ok=True)
    store = _store(ctx)
    meta: dict[str, Any] = dict(params.metadata or {})
    check_metadata_ts(meta)  # a numeric ts is the record's time: in range
    meta["text"] = params.text
    meta.setdefault("access_count", 0)
    if await store.tombstoned_anywhere([C.tombstone_key(C.session_raw(sid), params.id)]):
        return OkResult(ok=True)  # forgotten: a re-sent turn must not come back
    # Under the session's ingest lock, after its owner is checked against the turn's user.
    async with memory_service(ctx).v1_turn(sid, meta.get("userId"), estimate_tokens(params.text)):
        await _write_turn(ctx, sid, params, meta)
    return OkResult(ok=True)


async def _write_turn(
    ctx: CallContext, sid: str, params: InsertSessionTurnParams, meta: dict[str, Any]
) -> None:
    store = _store(ctx)
    raw_meta = {**meta, "raw_history": True, "active_view": False}
    await store.ensure_collections([C.session(sid), *C.lossless_collections(sid)])
    state_coll = C.session_state(sid)
    ops: list[Put] = []
    if await store.get(state_coll, C.SESSION_STATE_ID) is None:
        ops.append(
            Put(
                state_coll,
                C.SESSION_STATE_ID,
                "",
                {
                    "type": C.TYPE_SESSION_STATE,
                    "sessionId": sid,
                    "compaction_generation": 0,
                    "last_compacted_at": 0,
                    "last_summary_id": "",
                    "updated_at": 0,
                    # the first writer's namespace: the session's owner (scope.session_owner)
                    **({"userId": meta["userId"]} if isinstance(meta.get("userId"), str) else {}),
                },
                None,
                if_version=0,
            )
        )
    dims = store.store.dims_for(C.session(sid))
    vec = _fit((await _embed(_svc(ctx), [params.text], "document"))[0], dims)
    ops.append(Put(C.session(sid), params.id, params.text, meta, vec))
    # Raw history is immutable (the reference overwrote it on a re-sent id): the
    # active view is upserted as before, the raw copy is written once.
    raw = Put(C.session_raw(sid), params.id, params.text, raw_meta, vec, if_version=0)
    try:
        await store.write([*ops, raw])
    except se.VersionConflict:  # a re-sent id: the raw copy exists, keep it
        await store.write(ops)


@methods.method("gating_scalar")
async def gating_scalar(ctx: CallContext, params: GatingScalarParams) -> GatingSignalsResult:
    store = _store(ctx)
    mem = ctx.app.maybe_service(MemoryService)
    cfg = mem.gating if mem is not None else None
    centroid_k = cfg.centroid_k if cfg else ctx.app.settings.gating.centroid_k
    memory_k = cfg.memory_k if cfg else 5
    turns_coll, user_coll = f"turns:{params.user_id}", f"user:{params.user_id}"
    has_turns = store.store.collection(turns_coll) is not None
    has_user = store.store.collection(user_coll) is not None
    turn_scores: list[float] = []
    mem_scores: list[float] = []
    if has_turns or has_user:
        vec = (await _embed(_svc(ctx), [params.text], "query"))[0]
        needle = params.text.strip()
        if has_turns:
            hits = await store.search(turns_coll, vec, centroid_k + 1, where={"role": "user"})
            self_hit = next((h for h in hits if h.text.strip() == needle), None)
            turn_scores = [h.score for h in hits if h is not self_hit][:centroid_k]
        if has_user:
            hits = await store.search(user_coll, vec, memory_k + 1)
            self_hit = next((h for h in hits if h.text.strip() == needle), None)
            mem_scores = [h.score for h in hits if h is not self_hit][:memory_k]
    # The reference's formula: its host stores these values with the turn (wire-exact
    # worked examples); v2 ingest admits with the conversation model.
    base = cfg if cfg is not None else REFERENCE_CONFIG
    sig = compute_gating(params.text, turn_scores, mem_scores, replace(base, model="reference"))
    return gating_result(sig)


@methods.method("compact_session")
async def compact_session(ctx: CallContext, params: CompactSessionParams) -> CompactSessionResult:
    if not params.session_id.strip():
        raise InvalidInput("session ID is required")
    svc = memory_service(ctx)
    min_turns = params.continuity_min_turns
    opts = CompactionOptions.from_settings(
        svc.settings,
        target_size=params.target_size if params.target_size > 0 else None,
        min_turns=min_turns if min_turns is not None and min_turns > 0 else None,
        tail_tokens=params.continuity_tail_budget_tokens
        if params.continuity_tail_budget_tokens > 0
        else None,
        prior_context_tokens=params.continuity_prior_context_tokens
        if params.continuity_prior_context_tokens > 0
        else None,
        force=params.force,
    )
    out = await svc.compact(params.session_id, opts, ctx.progress)
    return CompactSessionResult(
        did_compact=out.did_compact,
        clusters_formed=out.clusters_formed,
        clusters_declined=out.clusters_declined,
        turns_removed=out.turns_covered,
        mean_confidence=out.mean_confidence,
        summary_method=out.summary_method or msgspec.UNSET,
    )


@methods.method("expand_summary")
async def expand_summary_v1(ctx: CallContext, params: ExpandSummaryParams) -> ResultsResult:
    if not params.session_id.strip():
        raise InvalidInput("sessionId is required")
    if not params.summary_id.strip():
        raise InvalidInput("summaryId is required")
    svc = memory_service(ctx)
    depth = params.max_depth if params.max_depth is not None and params.max_depth > 0 else 3
    items = await svc.expand(params.session_id, params.summary_id, depth)
    return ResultsResult(results=[_result(it.record, 0.0, None) for it in items or []])


@methods.method("query_raw_session")
async def query_raw_session(ctx: CallContext, params: QueryRawSessionParams) -> ResultsResult:
    if not params.session_id.strip():
        raise InvalidInput("sessionId is required")
    store = _store(ctx)
    coll = C.session_raw(params.session_id)
    if store.store.collection(coll) is None:
        return ResultsResult(results=[])
    vec = (await _embed(_svc(ctx), [params.text], "query"))[0]
    hits = await store.search(coll, vec, params.k, exclude_ids=_clean_ids(params.exclude_ids))
    return ResultsResult(results=[_result(h, h.score, h.collection) for h in hits])


register = methods.register
