"""Results as the client sees them: the planner's and the gate's values turned into the
protocol's types. The only place the wire shape of these results is built; the memory
and assembly layers return plain Python values and never camelCase dictionaries."""

from __future__ import annotations

from collections.abc import Mapping

from protocol.assemble import (
    AssembleBudget,
    AssembleResult,
    AssembleSelected,
    MemoryRecord,
    SearchHitOut,
)
from protocol.v1_memory import GatingSignalsResult
from sidecar.assembly.budget import BudgetPartition
from sidecar.assembly.cache import scope_of
from sidecar.assembly.plan import SearchHit
from sidecar.assembly.selection import AssemblyPlan, SelectedItem
from sidecar.memory.ingest.gate import GatingSignals
from sidecar.store.names import explicit_ts
from sidecar.store.types import Record

SCORE_DIGITS = 6  # scores: more digits only carry float noise
MS_DIGITS = 3


def budget_out(b: BudgetPartition) -> AssembleBudget:
    return AssembleBudget(
        total=b.total,
        hard=b.hard,
        tail=b.tail,
        soft=b.soft,
        elevated=b.elevated,
        retrieval=b.retrieval,
        recovery=b.recovery,
        used=b.used,
    )


def selected_out(s: SelectedItem) -> AssembleSelected:
    return AssembleSelected(
        kind=s.kind,
        collection=s.collection,
        id=s.id,
        turn_ids=list(s.turn_ids),
        session_id=s.session_id,
        role=s.role,
        ts=s.ts,
        score=round(s.score, SCORE_DIGITS),
        tokens=s.tokens,
        reason=s.reason,
    )


def assemble_result(
    plan: AssemblyPlan, service_ms: Mapping[str, float] | None = None, window_start: int = 0
) -> AssembleResult:
    """``service_ms``: the service's own timings (embedding, gather, ...) beside the
    planner's; the planner's total is reported as ``planMs``."""
    timings = {k: round(v, MS_DIGITS) for k, v in (service_ms or {}).items()}
    for key, value in plan.timings.items():
        timings["planMs" if key == "totalMs" else key] = round(value, MS_DIGITS)
    return AssembleResult(
        messages=plan.messages,
        system_prompt_addition=plan.system_prompt_addition,
        estimated_tokens=plan.estimated_tokens,
        budget=budget_out(plan.budget),
        selected=[selected_out(s) for s in plan.selected],
        degraded=list(plan.degraded) or None,
        timings=timings or None,
        window_start=window_start,
    )


def search_hit_out(h: SearchHit) -> SearchHitOut:
    return SearchHitOut(
        kind=h.kind,
        collection=h.collection,
        id=h.id,
        turn_ids=list(h.turn_ids),
        session_id=h.session_id,
        role=h.role,
        ts=h.ts,
        score=round(h.score, SCORE_DIGITS),
        text=h.text,
    )


def gating_result(s: GatingSignals) -> GatingSignalsResult:
    """The reference ``gating_scalar`` result: every signal, without the decision."""
    return GatingSignalsResult(
        g=s.g,
        t=s.t,
        h=s.h,
        r=s.r,
        d=s.d,
        input_freq=s.input_freq,
        mem_saturation=s.mem_saturation,
        p=s.p,
        a=s.a,
        dtech=s.dtech,
        gconv=s.gconv,
        gtech=s.gtech,
    )


def memory_record_out(record: Record) -> MemoryRecord:
    """A stored record as ``memory.get``/``memory.list``/``memory.update`` return it."""
    meta = record.metadata
    scope, kind = scope_of(record.collection)
    return MemoryRecord(
        collection=record.collection,
        id=record.id,
        text=record.text,
        kind=kind if kind else scope,
        role=str(meta.get("role") or ""),
        session_id=str(meta.get("sessionId") or ""),
        ts=explicit_ts(meta),
        metadata=dict(meta),
    )
