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
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from sidecar.config import Settings
from sidecar.memory.compaction import continuity as K
from sidecar.memory.compaction import lineage as L
from sidecar.memory.compaction import quality as Q
from sidecar.memory.compaction.autocompact import CompactionBarrier, TokenAccumulator
from sidecar.memory.compaction.drafts import (
    SUMMARY_JOINER,
    SummaryDraft,
    run_draft_ladder,
    seq2seq_step,
)
from sidecar.memory.compaction.loading import (
    StoreHost,
    SummaryRec,
    TurnRec,
    int_or,
    load_session,
)
from sidecar.memory.compaction.sanitize import summary_view
from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.core.progress import Progress, no_progress
from sidecar.memory.core.tokens import estimate_tokens, sum_tokens
from sidecar.store.aio import AsyncStore
from sidecar.store.types import Op, Patch, Put, Record

if TYPE_CHECKING:
    from sidecar.engines import EngineHub

F32 = np.ndarray[Any, Any]
CONDENSE_FANOUT = 4
METHOD_GUIDANCE = "guidance_shard"


class CompactionHost(Protocol):
    """What a compaction uses of its owner (the memory service): the store, the engines,
    the epoch barrier and the pressure accumulator."""

    @property
    def store(self) -> AsyncStore: ...

    @property
    def hub(self) -> EngineHub | None: ...

    @property
    def barrier(self) -> CompactionBarrier: ...

    @property
    def accumulator(self) -> TokenAccumulator: ...

    async def embed(self, texts: Sequence[str], kind: str = "document") -> F32: ...

    async def prototype_vectors(self) -> F32: ...

    def advance_epoch(self, session_id: str, at_least: int = 0) -> int: ...


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


def _merge_method(current: str, method: str) -> str:
    if not current:
        return method
    return current if current == method else "mixed"


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


def _stack(vectors: Sequence[F32 | None]) -> F32 | None:
    """The vectors as one matrix, or None when any is missing."""
    if not all(v is not None for v in vectors):
        return None
    return np.stack([np.asarray(v, dtype=np.float32) for v in vectors])


def _item(t: TurnRec) -> L.SourceItem:
    tok = estimate_tokens(t.turn.text)
    return L.SourceItem(L.turn_ref(t.turn.id), t.turn.ts, t.turn.ts, tok, tok, t.user_id)


@dataclass
class _Run:
    """One compaction: what every phase reads, and what they add to."""

    host: CompactionHost
    session_id: str
    opts: CompactionOptions
    now: int
    generation: int  # the generation this compaction writes
    graph: L.LineageGraph
    summaries: dict[str, SummaryRec]
    by_id: dict[str, TurnRec]
    protos: F32
    primary: K.StepSummarizer | None
    out: CompactionOutcome
    shard_puts: list[Put] = field(default_factory=list)
    confidences: list[float] = field(default_factory=list)


# (members, protected members, draft) of one summarized cluster
_Clustered = tuple[list[TurnRec], list[TurnRec], SummaryDraft]
# (summary record, its vector, the items it covers)
_NewSummary = tuple[L.SummaryRecord, F32 | None, list[L.SourceItem]]


async def compact_session(
    host: CompactionHost,
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
    state_coll = C.session_state(session_id)
    state = await host.store.get(state_coll, C.SESSION_STATE_ID)
    generation = int_or(state.metadata.get("compaction_generation")) if state else 0
    host.barrier.set(session_id, generation)

    turns, summaries, graph = await load_session(host, session_id)
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
    run = _Run(
        host=host,
        session_id=session_id,
        opts=opts,
        now=int(time.time() * 1000),
        generation=generation + 1,
        graph=graph,
        summaries=summaries,
        by_id={t.turn.id: t for t in turns},
        protos=await host.prototype_vectors() if plan.clusters else np.zeros((0, 0)),
        primary=None if opts.extractive_only else seq2seq_step(host.hub),
        out=out,
    )
    clustered = await _summarize_clusters(run, plan.clusters, progress)
    new_summaries = await _record_summaries(run, clustered)
    before = plan.tail.recent[0].sort_key if plan.tail.recent else None
    condensed = await _condense(run, before)
    if not new_summaries and not condensed and not run.shard_puts:
        return out
    await host.store.write(_write_ops(run, state, new_summaries + condensed))
    _finish(run, turns)
    return out


async def _summarize_clusters(
    run: _Run, clusters: Sequence[Sequence[Any]], progress: Progress
) -> list[_Clustered]:
    steps = len(clusters) + 1  # every cluster, then the write
    out: list[_Clustered] = []
    for done, cluster in enumerate(clusters):
        if done:
            await progress(done, steps, "summarizing clusters")
        summarized = await _summarize_cluster(run, [run.by_id[t.id] for t in cluster])
        if summarized is not None:
            out.append(summarized)
    if clusters:
        await progress(len(clusters), steps, "embedding and writing summaries")
    return out


async def _summarize_cluster(run: _Run, members: list[TurnRec]) -> _Clustered | None:
    protected, compressible = _protect(run, members)
    if not compressible:
        text = f"[{len(protected)} guidance turn(s) kept verbatim in elevated memory]"
        return members, protected, SummaryDraft(text, METHOD_GUIDANCE, 1.0, None)
    views = [summary_view(m.turn.text, m.turn.role) for m in compressible]
    replaced = [m.turn.text for m in compressible]
    route, _mean = K.route_summarizer(
        [m.turn.gating_score for m in members], abstractive_available=run.primary is not None
    )
    primary = run.primary if route == K.Route.ABSTRACTIVE else None
    prior = _prior_context(run, members) if primary is not None else None
    draft = await asyncio.to_thread(
        run_draft_ladder,
        replaced,
        views,
        _stack([m.vector for m in compressible]),
        primary,
        run.opts.max_output_tokens,
        prior,
    )
    if draft is None:
        run.out.clusters_declined += 1
        return None
    return members, protected, draft


def _prior_context(run: _Run, members: Sequence[TurnRec]) -> K.PriorContext:
    active = [run.summaries[s] for s in run.graph.active_summaries() if s in run.summaries]
    budget = run.opts.prior_context_tokens
    return K.select_prior_context(
        [K.PriorSummary(a.id, a.text, a.ts_max) for a in active],
        members[0].turn.ts,
        budget if budget > 0 else K.DEFAULT_PRIOR_CONTEXT_TOKENS,
    )


def _protect(run: _Run, members: Sequence[TurnRec]) -> tuple[list[TurnRec], list[TurnRec]]:
    """(protected, compressible): rule-like turns are copied verbatim as guidance shards."""
    protected: list[TurnRec] = []
    compressible: list[TurnRec] = []
    for m in members:
        decision = K.protection_decision(
            m.turn.text, m.turn.stability, similarity=_similarity(m.vector, run.protos)
        )
        if not decision.protected:
            compressible.append(m)
            continue
        protected.append(m)
        shard = _guidance_shard(run, m, decision)
        run.shard_puts.append(shard)
        run.out.guidance_ids.append(shard.id)
    return protected, compressible


def _guidance_shard(run: _Run, m: TurnRec, decision: K.ProtectionDecision) -> Put:
    sid = run.session_id
    target = C.elevated_user(m.user_id) if m.user_id else C.elevated_session(sid)
    text = m.turn.text.strip()
    meta: dict[str, Any] = {
        "type": C.TYPE_GUIDANCE,
        "ts": run.now,
        "sessionId": sid,
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
        "generation": run.generation,
    }
    if m.user_id:
        meta["userId"] = m.user_id
    return Put(target, L.guidance_shard_id(sid, m.turn.id), text, meta, m.vector)


@dataclass
class _Finished:
    """A draft after the quality gate (a condensation's as it is, without a vector yet):
    what the summary record says."""

    text: str
    method: str
    confidence: float
    vector: F32 | None
    draft: SummaryDraft
    quality: dict[str, float] = field(default_factory=dict)

    def record(self, run: _Run, items: Sequence[L.SourceItem], level: int) -> L.SummaryRecord:
        return L.build_summary_record(
            run.session_id,
            items,
            text=self.text,
            summary_tokens=estimate_tokens(self.text),
            method=self.method,
            confidence=self.confidence,
            generation=run.generation,
            compacted_at=run.now,
            level=level,
            support_summary_ids=self.draft.support_ids,
            support_tokens=self.draft.support_tokens,
            quality=self.quality,
        )


async def _quality_gate(
    run: _Run, comp: Sequence[TurnRec], draft: SummaryDraft, svec: F32
) -> _Finished:
    """Score the draft against its turns; an abstractive draft below the preservation
    gate is replaced by an extractive one when that still makes strict progress."""
    done = _Finished(draft.text, draft.method, draft.raw_confidence, svec, draft)
    tv = _stack([m.vector for m in comp]) if comp else None
    if tv is None:
        return done
    pres = Q.preservation_metrics(svec, tv)
    dec = Q.finalize_confidence(draft.method, pres, draft.raw_confidence)
    done.confidence = dec.confidence
    if dec.replace_with_extractive:
        views = [summary_view(m.turn.text, m.turn.role) for m in comp]
        picked, _c = Q.extractive_select(tv, K.DEFAULT_DENSITY)
        alt = SUMMARY_JOINER.join(views[i] for i in picked)
        if K.strict_progress([m.turn.text for m in comp], alt):
            done.text, done.method = alt, "extractive"
            done.vector = (await run.host.embed([alt], "document"))[0]
            pres = Q.preservation_metrics(done.vector, tv)
            done.confidence = pres.confidence
            done.draft = SummaryDraft(alt, "extractive", 0.0, None)
    done.quality = {
        "nomic_align": pres.align,
        "nomic_cover": pres.cover,
        "confidence_nomic": dec.confidence_nomic,
    }
    if done.method == Q.ABSTRACTIVE_METHOD or dec.confidence_t5 > 0:
        done.quality["confidence_t5"] = dec.confidence_t5
    return done


async def _record_summaries(run: _Run, clustered: Sequence[_Clustered]) -> list[_NewSummary]:
    """Embed every summary text once, pass it through the quality gate, build records."""
    texts = [d.text for _, _, d in clustered]
    svecs = await run.host.embed(texts, "document") if texts else np.zeros((0, 0))
    out: list[_NewSummary] = []
    for (members, protected, draft), svec in zip(clustered, svecs, strict=True):
        protected_ids = {m.turn.id for m in protected}
        comp = [m for m in members if m.turn.id not in protected_ids]
        done = await _quality_gate(run, comp, draft, svec)
        items = [_item(m) for m in members]
        rec = done.record(run, items, level=1)
        rec.metadata["protected_turn_ids"] = [m.turn.id for m in protected]
        rec.metadata["summarized_turn_ids"] = [m.turn.id for m in comp]
        rec.metadata["input_tokens"] = sum_tokens(m.turn.text for m in comp)
        out.append((rec, done.vector, items))
        _add_to_graph(run, rec, done.vector, items, level=1)
        run.out.summary_ids.append(rec.id)
        run.out.turns_covered += len(members)
        if done.method != METHOD_GUIDANCE:
            # A guidance-only placeholder moves turns to elevated memory verbatim: it covers
            # them (lossless expand) but summarizes nothing, so it is not a shrink.
            run.out.summary_method = _merge_method(run.out.summary_method, done.method)
            run.confidences.append(done.confidence)
    return out


def _add_to_graph(
    run: _Run, rec: L.SummaryRecord, vector: F32 | None, items: Sequence[L.SourceItem], level: int
) -> None:
    run.graph.add_summary(rec.id, [i.ref for i in items], strict=False)
    run.summaries[rec.id] = SummaryRec(
        rec.id,
        rec.text,
        vector,
        level,
        items[0].ts_min,
        items[-1].ts_max,
        estimate_tokens(rec.text),
        sum(i.original_tokens for i in items),
    )


async def _condense(run: _Run, before: Any) -> list[_NewSummary]:
    """Summaries a level up while more than ``max_active_summaries`` are active before the
    tail (groups of :data:`CONDENSE_FANOUT`)."""
    groups = L.plan_condensation(
        run.graph,
        max_active=max(1, run.opts.max_active_summaries),
        fanout=CONDENSE_FANOUT,
        before=before,
    )
    condensed: list[tuple[L.SummaryRecord, list[L.SourceItem]]] = []
    for group in groups:
        kids = [run.summaries[r.id] for r in group if r.id in run.summaries]
        if len(kids) != len(group):
            continue
        draft = await asyncio.to_thread(
            run_draft_ladder,
            [k.text for k in kids],
            [summary_view(k.text, "summary") for k in kids],
            _stack([k.vector for k in kids]),
            None,
            run.opts.max_output_tokens,
            None,
        )
        if draft is None:
            continue
        citems = [
            L.SourceItem(L.summary_ref(k.id), k.ts_min, k.ts_max, k.tokens, k.original_tokens)
            for k in kids
        ]
        level = 1 + max(k.level for k in kids)
        # not quality-gated; without prior context, so without support summaries
        crec = _Finished(draft.text, draft.method, draft.raw_confidence, None, draft).record(
            run, citems, level
        )
        _add_to_graph(run, crec, None, citems, level)
        condensed.append((crec, citems))
        run.out.condensed_ids.append(crec.id)
    if not condensed:
        return []
    cvecs = await run.host.embed([c.text for c, _ in condensed])
    return [(c, v, items) for (c, items), v in zip(condensed, cvecs, strict=True)]


def _write_ops(run: _Run, state: Record | None, summaries: Sequence[_NewSummary]) -> list[Op]:
    """Shards, summaries, edges and the session state (CAS), for one transaction."""
    sid, out = run.session_id, run.out
    sum_coll = C.session_summary(sid)
    ops: list[Op] = list(run.shard_puts)
    for rec, vec, items in summaries:
        ops.append(Put(sum_coll, rec.id, rec.text, rec.metadata, vec))
        ops.extend(edge_puts(sid, rec.id, items, run.by_id, run.now))
    last_ids = out.condensed_ids or out.summary_ids
    state_meta: dict[str, Any] = {
        "type": C.TYPE_SESSION_STATE,
        "sessionId": sid,
        "compaction_generation": run.generation,
        "last_compacted_at": run.now,
        "last_summary_id": last_ids[-1] if last_ids else "",
        "updated_at": run.now,
    }
    state_coll = C.session_state(sid)
    if state is None:
        ops.append(Put(state_coll, C.SESSION_STATE_ID, "", state_meta, None, if_version=0))
    else:
        ops.append(Patch(state_coll, C.SESSION_STATE_ID, state_meta, if_version=state.version))
    return ops


def _finish(run: _Run, turns: Sequence[TurnRec]) -> None:
    out = run.out
    # Turns moved verbatim into elevated guidance leave the active view as surely as
    # summarized ones: a cluster of rules is compacted too (a host that forces compaction
    # of turns the rule classifier reads as rules must see it happen).
    out.did_compact = bool(out.summary_ids or out.condensed_ids)
    if not out.summary_method and out.guidance_ids:
        out.summary_method = METHOD_GUIDANCE
    conf = run.confidences
    out.mean_confidence = min(1.0, max(0.0, sum(conf) / len(conf))) if conf else 0.0
    out.epoch = run.host.advance_epoch(run.session_id, run.generation)
    covered = run.graph.covered_turns()
    run.host.accumulator.compacted(
        run.session_id,
        sum(estimate_tokens(t.turn.text) for t in turns if t.turn.id not in covered),
    )


def edge_puts(
    session_id: str,
    summary: str,
    items: Sequence[L.SourceItem],
    by_id: dict[str, TurnRec],
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
    host: StoreHost, session_id: str, summary_id: str, max_depth: int | None
) -> list[ExpandedItem] | None:
    """Children of a summary, chronological; ``max_depth`` None or <= 0 = down to raw
    turns. Returns None when the summary is unknown."""
    turns, _summaries, graph = await load_session(host, session_id)
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
        for rec in await host.store.get_many(coll, ids):
            got[("turn", rec.id)] = rec
    if sum_ids:
        for rec in await host.store.get_many(C.session_summary(session_id), sum_ids):
            got[("summary", rec.id)] = rec
    out: list[ExpandedItem] = []
    for r in refs:
        found = got.get((r.kind, r.id))
        if found is not None:
            out.append(ExpandedItem(r.id, r.kind, found.collection, found))
    return out


async def active_view(host: StoreHost, session_id: str) -> list[L.ChildRef]:
    """The session's active frontier: active summaries and uncovered turns, chronological."""
    _turns, _sums, graph = await load_session(host, session_id)
    return graph.frontier()
