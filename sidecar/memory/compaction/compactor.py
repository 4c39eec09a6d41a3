"""Compaction over the store and engines.

``compact_session`` runs under the session's compaction lock (``MemoryService.compact``):

1. Load the raw turns (``session_raw:<sid>``, plus v1 ``session:<sid>`` turns that have no
   raw copy), the summaries and the coverage edges, and rebuild the
   :class:`~sidecar.memory.compaction.lineage.LineageGraph`.
2. ``plan_compaction``: the protected recent tail (``min_turns``, ``tail_tokens``, the
   single split request/response pair), then chronological clusters of the *uncovered*
   turns before it (incremental: covered turns are never summarized again).
3. Per cluster: rule-like turns with enough stability are protected
   (``protection_decision``; the booster similarity uses the stored turn vectors against
   the guidance prototypes) and copied verbatim as guidance shards into
   ``elevated:user:<userId>`` / ``elevated:session:<sid>``. The other turns are
   summarized from their summary views (sanitized; tool outputs masked): routing picks
   seq2seq when available and the mean known gating score warrants it, the escalation
   ladder runs (primary → aggressive → bounded extractive fallback) until strict
   progress in the one token unit; the abstractive draft is replaced by an extractive
   one below the preservation gate. Prior-summary context goes only to abstractive
   steps. The summary covers **every** turn of the cluster (protected ones too, so
   expansions stay lossless); its text summarizes the compressible ones.
4. Condensation: when more than ``max_active_summaries`` summaries are active before the
   tail, consecutive groups are summarized a level up (DAG).
5. One transaction writes shards, summaries, edges and the session state (CAS on
   ``__session_state__``); raw turns are never touched. The compaction epoch advances and
   listeners are notified.

The extractive summarizer here is ``quality.extractive_select`` over the stored turn
vectors (no model call); only the summaries themselves are embedded, in one call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.config import Settings
from sidecar.memory.compaction import continuity as K
from sidecar.memory.compaction import lineage as L
from sidecar.memory.compaction import quality as Q
from sidecar.memory.compaction.sanitize import summary_view
from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.core.progress import Progress, no_progress
from sidecar.memory.core.tokens import estimate_tokens, sum_tokens
from sidecar.memory.core.turns import Turn, chronological, stability_weight
from sidecar.store.names import explicit_ts
from sidecar.store.types import Op, Patch, Put, Record

if TYPE_CHECKING:
    from sidecar.memory.service import MemoryService

F32 = np.ndarray[Any, Any]
SUMMARY_JOINER = "\n"
CONDENSE_FANOUT = 4
METHOD_GUIDANCE = "guidance_shard"


@dataclass(frozen=True, slots=True)
class CompactionOptions:
    min_turns: int = K.DEFAULT_MIN_TURNS
    tail_tokens: int = K.DEFAULT_TAIL_TOKENS
    prior_context_tokens: int = K.DEFAULT_PRIOR_CONTEXT_TOKENS
    target_size: int = K.DEFAULT_TARGET_SIZE
    max_active_summaries: int = 8
    max_output_tokens: int = K.DEFAULT_MAX_OUTPUT_TOKENS
    force: bool = False
    # Emergency auto-compaction: skip the seq2seq model (seconds per cluster on CPU) so the
    # shrink lands fast; the extractive summarizer takes its place.
    extractive_only: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> CompactionOptions:
        c = settings.compaction
        base: dict[str, Any] = {
            "min_turns": c.min_turns,
            "tail_tokens": c.tail_tokens,
            "prior_context_tokens": c.prior_context_tokens,
            "target_size": c.target_size,
            "max_active_summaries": c.max_active_summaries,
        }
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


@dataclass(slots=True)
class CompactionOutcome:
    did_compact: bool = False
    clusters_formed: int = 0
    clusters_declined: int = 0
    turns_covered: int = 0
    summary_method: str = ""
    mean_confidence: float = 0.0
    summary_ids: list[str] = field(default_factory=list)
    guidance_ids: list[str] = field(default_factory=list)
    condensed_ids: list[str] = field(default_factory=list)
    epoch: int = 0


@dataclass(slots=True)
class _TurnRec:
    turn: Turn
    collection: str
    vector: F32 | None
    user_id: str


@dataclass(slots=True)
class _SummaryRec:
    id: str
    text: str
    vector: F32 | None
    level: int
    ts_min: int
    ts_max: int
    tokens: int
    original_tokens: int


def _merge_method(current: str, method: str) -> str:
    if not current:
        return method
    return current if current == method else "mixed"


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: object, default: int = 0) -> int:
    v = _num(value)
    return default if v is None or v != v or v in (float("inf"), float("-inf")) else int(v)


def _to_turn(rec: Record, collection: str) -> _TurnRec:
    meta = rec.metadata
    role = meta.get("role") if isinstance(meta.get("role"), str) else ""
    ts = explicit_ts(meta)
    stability = _num(meta.get("stability_weight"))
    gating = _num(meta.get("gating_score"))
    bundle = meta.get("continuity_bundle_id")
    user = meta.get("userId")
    turn = Turn(
        id=rec.id,
        role=str(role),
        text=rec.text,
        ts=rec.created_ms if ts is None else ts,
        seq=_int(meta.get("seq"), rec.seq),
        bundle_id=bundle if isinstance(bundle, str) else "",
        stability=stability if stability is not None else stability_weight(str(role)),
        gating_score=gating,
        user_id=user if isinstance(user, str) else "",
    )
    return _TurnRec(turn, collection, rec.vector, turn.user_id)


def _is_turn_record(rec: Record) -> bool:
    t = rec.metadata.get("type")
    return t not in (C.TYPE_SUMMARY, C.TYPE_GUIDANCE, C.TYPE_EDGE)


async def load_session(
    svc: MemoryService, session_id: str
) -> tuple[list[_TurnRec], dict[str, _SummaryRec], L.LineageGraph]:
    """Raw turns (chronological), summaries and the lineage graph of a session."""
    s = svc.store.store
    raw_coll = C.session_raw(session_id)
    active_coll = C.session(session_id)

    def read() -> tuple[list[Record], list[Record], list[Record], list[Record]]:
        raw = s.list_records(raw_coll, include_vectors=True)
        active = s.list_records(active_coll, where={"sessionId": session_id}, include_vectors=True)
        sums = s.list_records(C.session_summary(session_id), include_vectors=True)
        edges = s.list_records(C.session_edge(session_id))
        return raw, active, sums, edges

    raw, active, sums, edges = await asyncio.to_thread(read)
    recs: dict[str, _TurnRec] = {}
    for r in raw:
        if _is_turn_record(r):
            recs[r.id] = _to_turn(r, raw_coll)
    for r in active:
        if r.id not in recs and _is_turn_record(r):
            recs[r.id] = _to_turn(r, active_coll)
    ordered = [recs[t.id] for t in chronological(x.turn for x in recs.values())]
    graph = L.LineageGraph({t.turn.id: t.turn.sort_key for t in ordered})

    children: dict[str, list[tuple[int, L.ChildRef]]] = {}
    for e in edges:
        m = e.metadata
        parent, child, kind = m.get("parent_summary_id"), m.get("child_id"), m.get("child_type")
        if not isinstance(parent, str) or not isinstance(child, str):
            continue
        ref = L.summary_ref(child) if kind == "summary" else L.turn_ref(child)
        children.setdefault(parent, []).append((_int(m.get("edge_order")), ref))
    summaries: dict[str, _SummaryRec] = {}
    for r in sums:
        m = r.metadata
        summaries[r.id] = _SummaryRec(
            id=r.id,
            text=r.text,
            vector=r.vector,
            level=_int(m.get("level"), 1),
            ts_min=_int(m.get("source_ts_min")),
            ts_max=_int(m.get("source_ts_max")),
            tokens=_int(m.get("token_count"), estimate_tokens(r.text)),
            original_tokens=_int(m.get("original_tokens")),
        )
    # Add summaries bottom-up; skip any whose children are unknown (e.g. a partial forget).
    pending = sorted(summaries.values(), key=lambda x: (x.level, x.id))
    for _ in range(len(pending) + 1):
        retry: list[_SummaryRec] = []
        for srec in pending:
            refs = [ref for _, ref in sorted(children.get(srec.id, []))]
            if not refs:
                continue
            known = all((r.id in graph) if r.kind == "summary" else (r.id in recs) for r in refs)
            if not known:
                retry.append(srec)
                continue
            try:
                graph.add_summary(srec.id, list(dict.fromkeys(refs)), strict=False)
            except L.LineageError:
                continue
        if len(retry) == len(pending):
            break
        pending = retry
    return ordered, summaries, graph


# ---------------------------------------------------------------------- summarizers


def _extractive_step(views: Sequence[str], vectors: F32 | None) -> K.StepSummarizer:
    def run(texts: Sequence[str], step: K.LadderStep, prior: str) -> K.Draft:
        if vectors is not None and len(vectors) == len(texts):
            picked, conf = Q.extractive_select(vectors, step.target_density, texts=texts)
        else:
            picked, conf = list(range(len(texts)))[:1], 0.0
        text = SUMMARY_JOINER.join(texts[i] for i in picked)
        return K.Draft(text, conf, "extractive")

    return run


def _seq2seq_step(svc: MemoryService) -> K.StepSummarizer | None:
    hub = svc.hub
    if hub is None or hub.summarizer.seq2seq is None:
        return None
    summarizer = hub.summarizer

    def run(texts: Sequence[str], step: K.LadderStep, prior: str) -> K.Draft:
        inputs = ([prior] if prior else []) + list(texts)
        res = summarizer.summarize_sync(
            inputs,
            max_tokens=step.max_output_tokens,
            method="seq2seq",
            density=step.target_density,
        )
        if res.method != "seq2seq":
            raise RuntimeError(res.fallback_reason or "seq2seq unavailable")
        return K.Draft(res.summary, res.confidence, Q.ABSTRACTIVE_METHOD)

    return run


@dataclass(slots=True)
class _Draft:
    text: str
    method: str
    raw_confidence: float
    step: K.LadderStep | None
    support_ids: tuple[str, ...] = ()
    support_tokens: int = 0


def _ladder(
    replaced: Sequence[str],
    views: Sequence[str],
    vectors: F32 | None,
    primary: K.StepSummarizer | None,
    opts: CompactionOptions,
    prior: K.PriorContext | None,
) -> _Draft | None:
    extractive = _extractive_step(views, vectors)
    abstractive = primary is not None
    ladder = K.escalation_ladder(
        primary_is_abstractive=abstractive, max_output_tokens=opts.max_output_tokens
    )
    outcome = K.run_ladder(
        replaced,
        views,
        primary=primary or extractive,
        extractive=extractive,
        ladder=ladder,
        prior=prior.prompt if prior is not None else "",
    )
    if outcome.draft is None or outcome.step is None:
        return None
    d = outcome.draft
    uses_prior = outcome.step.uses_prior_context and prior is not None and bool(prior.ids)
    return _Draft(
        d.text,
        d.method,
        d.confidence,
        outcome.step,
        prior.ids if uses_prior and prior is not None else (),
        prior.tokens if uses_prior and prior is not None else 0,
    )


# ---------------------------------------------------------------------- compaction


def _cos_max(vec: F32 | None, protos: F32) -> float:
    if vec is None or protos.size == 0:
        return 0.0
    v = np.asarray(vec, dtype=np.float64)
    n = float(np.linalg.norm(v))
    if n < 1e-12:
        return 0.0
    p = np.asarray(protos, dtype=np.float64)
    pn = np.linalg.norm(p, axis=1)
    pn[pn < 1e-12] = np.inf
    return float(np.max((p @ v) / (pn * n)))


def _similarity(vec: F32 | None, protos: F32) -> K.SimilarityFn:
    def sim(_text: str) -> float:
        return _cos_max(vec, protos)

    return sim


def _item(t: _TurnRec) -> L.SourceItem:
    tok = estimate_tokens(t.turn.text)
    return L.SourceItem(L.turn_ref(t.turn.id), t.turn.ts, t.turn.ts, tok, tok, t.user_id)


async def compact_session(
    svc: MemoryService,
    session_id: str,
    opts: CompactionOptions,
    progress: Progress = no_progress,
) -> CompactionOutcome:
    """Compact the session's uncovered turns outside the tail (module doc).

    ``progress(done, total, message)`` is awaited after each cluster is summarized and
    once more when the result is written (a summarizer takes up to seconds per cluster).
    """
    if not isinstance(session_id, str) or not session_id.strip():
        raise MemoryInputError("session ID is required")
    store = svc.store
    state_coll = C.session_state(session_id)
    state = await store.get(state_coll, C.SESSION_STATE_ID)
    generation = _int(state.metadata.get("compaction_generation")) if state else 0
    svc.barrier.set(session_id, generation)

    turns, summaries, graph = await load_session(svc, session_id)
    by_id = {t.turn.id: t for t in turns}
    out = CompactionOutcome()
    if len(turns) < 2:
        return out
    plan = K.plan_compaction(
        [t.turn for t in turns],
        graph.covered_turns(),
        min_turns=opts.min_turns if opts.min_turns > 0 else K.DEFAULT_MIN_TURNS,
        tail_tokens=opts.tail_tokens if opts.tail_tokens > 0 else K.DEFAULT_TAIL_TOKENS,
        target_size=opts.target_size if opts.target_size > 0 else K.DEFAULT_TARGET_SIZE,
    )
    out.clusters_formed = plan.clusters_formed
    out.clusters_declined = len(plan.singletons)
    now = int(time.time() * 1000)
    new_generation = generation + 1
    protos = await svc.prototype_vectors() if plan.clusters else np.zeros((0, 0))
    primary = None if opts.extractive_only else _seq2seq_step(svc)
    ops: list[Op] = []
    drafts: list[tuple[list[_TurnRec], list[_TurnRec], _Draft]] = []
    shard_puts: list[Put] = []
    confidences: list[float] = []

    steps = len(plan.clusters) + 1  # every cluster, then the write
    for done, cluster in enumerate(plan.clusters):
        if done:
            await progress(done, steps, "summarizing clusters")
        members = [by_id[t.id] for t in cluster]
        protected: list[_TurnRec] = []
        compressible: list[_TurnRec] = []
        for m in members:
            decision = K.protection_decision(
                m.turn.text, m.turn.stability, similarity=_similarity(m.vector, protos)
            )
            (protected if decision.protected else compressible).append(m)
            if decision.protected:
                target = C.elevated_user(m.user_id) if m.user_id else C.elevated_session(session_id)
                text = m.turn.text.strip()
                shard_id = L.guidance_shard_id(session_id, m.turn.id)
                meta: dict[str, Any] = {
                    "type": C.TYPE_GUIDANCE,
                    "ts": now,
                    "sessionId": session_id,
                    "source_turn_id": m.turn.id,
                    "source_turn_ts": m.turn.ts,
                    "token_count": estimate_tokens(text),
                    "token_estimate": estimate_tokens(text),
                    "elevated_guidance": True,
                    "protection_reason": "deontic_surface",
                    "protection_path": decision.path,
                    "guidance_confidence": 1.0,
                    "authority": decision.stability,
                    "stability_weight": decision.stability,
                    "provenance_class": "",
                    "role": m.turn.role,
                    "generation": new_generation,
                }
                if m.user_id:
                    meta["userId"] = m.user_id
                shard_puts.append(Put(target, shard_id, text, meta, m.vector))
                out.guidance_ids.append(shard_id)
        if not compressible:
            text = f"[{len(protected)} guidance turn(s) kept verbatim in elevated memory]"
            drafts.append((members, protected, _Draft(text, METHOD_GUIDANCE, 1.0, None)))
            continue
        views = [summary_view(m.turn.text, m.turn.role) for m in compressible]
        replaced = [m.turn.text for m in compressible]
        vecs = (
            np.stack([np.asarray(m.vector, dtype=np.float32) for m in compressible])
            if all(m.vector is not None for m in compressible)
            else None
        )
        route, _mean = K.route_summarizer(
            [m.turn.gating_score for m in members], abstractive_available=primary is not None
        )
        use_primary = primary if route == K.Route.ABSTRACTIVE else None
        prior = None
        if use_primary is not None:
            active = [summaries[s] for s in graph.active_summaries() if s in summaries]
            prior = K.select_prior_context(
                [K.PriorSummary(a.id, a.text, a.ts_max) for a in active],
                members[0].turn.ts,
                opts.prior_context_tokens
                if opts.prior_context_tokens > 0
                else K.DEFAULT_PRIOR_CONTEXT_TOKENS,
            )
        draft = await asyncio.to_thread(_ladder, replaced, views, vecs, use_primary, opts, prior)
        if draft is None:
            out.clusters_declined += 1
            continue
        drafts.append((members, protected, draft))

    if plan.clusters:
        await progress(len(plan.clusters), steps, "embedding and writing summaries")
    # Embed every summary text once, score quality, build records.
    texts = [d.text for _, _, d in drafts]
    svecs = await svc.embed(texts, "document") if texts else np.zeros((0, 0))
    new_summaries: list[tuple[L.SummaryRecord, F32, list[L.SourceItem]]] = []
    for (members, protected, draft), svec in zip(drafts, svecs, strict=True):
        protected_ids = {m.turn.id for m in protected}
        comp = [m for m in members if m.turn.id not in protected_ids]
        quality: dict[str, float] = {}
        confidence = draft.raw_confidence
        method = draft.method
        text = draft.text
        if comp and all(m.vector is not None for m in comp):
            tv = np.stack([np.asarray(m.vector, dtype=np.float32) for m in comp])
            pres = Q.preservation_metrics(svec, tv)
            dec = Q.finalize_confidence(method, pres, draft.raw_confidence)
            if dec.replace_with_extractive:
                views = [summary_view(m.turn.text, m.turn.role) for m in comp]
                picked, _c = Q.extractive_select(tv, K.DEFAULT_DENSITY)
                alt = SUMMARY_JOINER.join(views[i] for i in picked)
                if K.strict_progress([m.turn.text for m in comp], alt):
                    text, method = alt, "extractive"
                    svec = (await svc.embed([alt], "document"))[0]
                    pres = Q.preservation_metrics(svec, tv)
                    confidence = pres.confidence
                    draft = _Draft(alt, method, 0.0, None)
                else:
                    confidence = dec.confidence
            else:
                confidence = dec.confidence
            quality = {
                "nomic_align": pres.align,
                "nomic_cover": pres.cover,
                "confidence_nomic": dec.confidence_nomic,
            }
            if method == Q.ABSTRACTIVE_METHOD or dec.confidence_t5 > 0:
                quality["confidence_t5"] = dec.confidence_t5
        items = [_item(m) for m in members]
        rec = L.build_summary_record(
            session_id,
            items,
            text=text,
            summary_tokens=estimate_tokens(text),
            method=method,
            confidence=confidence,
            generation=new_generation,
            compacted_at=now,
            level=1,
            support_summary_ids=draft.support_ids,
            support_tokens=draft.support_tokens,
            quality=quality,
        )
        rec.metadata["protected_turn_ids"] = [m.turn.id for m in protected]
        rec.metadata["summarized_turn_ids"] = [m.turn.id for m in comp]
        rec.metadata["input_tokens"] = sum_tokens(m.turn.text for m in comp)
        new_summaries.append((rec, svec, items))
        graph.add_summary(rec.id, [i.ref for i in items], strict=False)
        summaries[rec.id] = _SummaryRec(
            rec.id,
            text,
            svec,
            1,
            items[0].ts_min,
            items[-1].ts_max,
            estimate_tokens(text),
            sum(i.original_tokens for i in items),
        )
        out.summary_ids.append(rec.id)
        out.turns_covered += len(members)
        if method != METHOD_GUIDANCE:
            # A guidance-only placeholder moves turns to elevated memory verbatim: it covers
            # them (lossless expand) but summarizes nothing, so it is not a shrink.
            out.summary_method = _merge_method(out.summary_method, method)
            confidences.append(confidence)

    # Condensation into higher levels.
    before = plan.tail.recent[0].sort_key if plan.tail.recent else None
    groups = L.plan_condensation(
        graph,
        max_active=max(1, opts.max_active_summaries),
        fanout=CONDENSE_FANOUT,
        before=before,
    )
    condensed: list[tuple[L.SummaryRecord, list[L.SourceItem]]] = []
    for group in groups:
        kids = [summaries[r.id] for r in group if r.id in summaries]
        if len(kids) != len(group):
            continue
        replaced = [k.text for k in kids]
        views = [summary_view(k.text, "summary") for k in kids]
        vecs = (
            np.stack([np.asarray(k.vector, dtype=np.float32) for k in kids])
            if all(k.vector is not None for k in kids)
            else None
        )
        draft = await asyncio.to_thread(_ladder, replaced, views, vecs, None, opts, None)
        if draft is None:
            continue
        citems = [
            L.SourceItem(L.summary_ref(k.id), k.ts_min, k.ts_max, k.tokens, k.original_tokens)
            for k in kids
        ]
        conf = draft.raw_confidence
        level = 1 + max(k.level for k in kids)
        crec = L.build_summary_record(
            session_id,
            citems,
            text=draft.text,
            summary_tokens=estimate_tokens(draft.text),
            method=draft.method,
            confidence=conf,
            generation=new_generation,
            compacted_at=now,
            level=level,
        )
        graph.add_summary(crec.id, [c.ref for c in citems], strict=False)
        summaries[crec.id] = _SummaryRec(
            crec.id,
            draft.text,
            None,
            level,
            citems[0].ts_min,
            citems[-1].ts_max,
            estimate_tokens(draft.text),
            sum(c.original_tokens for c in citems),
        )
        condensed.append((crec, citems))
        out.condensed_ids.append(crec.id)
    cvecs = await svc.embed([c.text for c, _ in condensed]) if condensed else np.zeros((0, 0))

    if not new_summaries and not condensed and not shard_puts:
        return out

    sum_coll = C.session_summary(session_id)
    ops.extend(shard_puts)
    for rec, svec, items in new_summaries:
        ops.append(Put(sum_coll, rec.id, rec.text, rec.metadata, svec))
        ops.extend(_edge_puts(session_id, rec.id, items, by_id, now))
    for (crec, citems), cvec in zip(condensed, cvecs, strict=True):
        ops.append(Put(sum_coll, crec.id, crec.text, crec.metadata, cvec))
        ops.extend(_edge_puts(session_id, crec.id, citems, by_id, now))
    last_id = (
        out.condensed_ids[-1]
        if out.condensed_ids
        else out.summary_ids[-1]
        if out.summary_ids
        else ""
    )
    state_meta: dict[str, Any] = {
        "type": C.TYPE_SESSION_STATE,
        "sessionId": session_id,
        "compaction_generation": new_generation,
        "last_compacted_at": now,
        "last_summary_id": last_id,
        "updated_at": now,
    }
    if state is None:
        ops.append(Put(state_coll, C.SESSION_STATE_ID, "", state_meta, None, if_version=0))
    else:
        ops.append(Patch(state_coll, C.SESSION_STATE_ID, state_meta, if_version=state.version))
    await store.write(ops)

    # Turns moved verbatim into elevated guidance leave the active view as surely as
    # summarized ones: a cluster of rules is compacted too (the reference plugin's
    # host-flow suite forces compaction of 16 turns the deontic classifier reads as rules).
    out.did_compact = bool(out.summary_ids or out.condensed_ids)
    if not out.summary_method and out.guidance_ids:
        out.summary_method = METHOD_GUIDANCE
    out.mean_confidence = (
        min(1.0, max(0.0, sum(confidences) / len(confidences))) if confidences else 0.0
    )
    out.epoch = svc.advance_epoch(session_id, new_generation)
    covered = graph.covered_turns()
    svc.accumulator.compacted(
        session_id, sum(estimate_tokens(t.turn.text) for t in turns if t.turn.id not in covered)
    )
    return out


def _edge_puts(
    session_id: str,
    summary: str,
    items: Sequence[L.SourceItem],
    by_id: dict[str, _TurnRec],
    now: int,
) -> list[Put]:
    raw = C.session_raw(session_id)
    edges = L.coverage_edges(session_id, summary, items, compacted_at=now, raw_collection=raw)
    puts: list[Put] = []
    for e in edges:
        eid = e.pop("id")
        if e.get("child_type") == "turn":
            t = by_id.get(str(e.get("child_id")))
            if t is not None:
                e["child_collection"] = t.collection
        puts.append(Put(C.session_edge(session_id), eid, "", e, None))
    return puts


# ---------------------------------------------------------------------- expand


@dataclass(frozen=True, slots=True)
class ExpandedItem:
    id: str
    kind: str  # "turn" | "summary"
    collection: str
    record: Record


async def expand_summary(
    svc: MemoryService, session_id: str, summary_id: str, max_depth: int | None
) -> list[ExpandedItem] | None:
    """Children of a summary, chronological; ``max_depth`` None or <= 0 = down to raw
    turns. Returns None when the summary is unknown."""
    turns, _summaries, graph = await load_session(svc, session_id)
    if summary_id not in graph:
        return None
    depth = max_depth if max_depth is not None and max_depth > 0 else 1 << 30
    refs = graph.expand(summary_id, depth)
    by_id = {t.turn.id: t for t in turns}
    raw_ids: dict[str, list[str]] = {}
    for r in refs:
        if r.kind == "turn" and r.id in by_id:
            raw_ids.setdefault(by_id[r.id].collection, []).append(r.id)
    sum_ids = [r.id for r in refs if r.kind == "summary"]
    got: dict[tuple[str, str], Record] = {}
    for coll, ids in raw_ids.items():
        for rec in await svc.store.get_many(coll, ids):
            got[("turn", rec.id)] = rec
    if sum_ids:
        for rec in await svc.store.get_many(C.session_summary(session_id), sum_ids):
            got[("summary", rec.id)] = rec
    out: list[ExpandedItem] = []
    for r in refs:
        found = got.get((r.kind, r.id))
        if found is not None:
            out.append(ExpandedItem(r.id, r.kind, found.collection, found))
    return out


async def active_view(svc: MemoryService, session_id: str) -> list[L.ChildRef]:
    """The session's active frontier: active summaries and uncovered turns, chronological."""
    _turns, _sums, graph = await load_session(svc, session_id)
    return graph.frontier()
