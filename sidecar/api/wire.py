"""Results as the client sees them: the planner's and the gate's values turned into the
protocol's types. The only place the wire shape of these results is built; the memory
and assembly layers return plain Python values and never camelCase dictionaries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import msgspec

from protocol.assemble import (
    AssembleConsidered,
    AssembleResult,
    AssembleSelected,
    MemoryRecord,
    SearchHitOut,
)
from protocol.sessions import IngestedMessage, IngestGate
from protocol.v1_memory import GatingSignalsResult
from sidecar.assembly.cache import scope_of
from sidecar.assembly.plan import SearchHit
from sidecar.assembly.selection import AssemblyPlan, ConsideredItem, SelectedItem
from sidecar.memory.ingest.gate import GatingSignals
from sidecar.memory.ingest.sessions import IngestOutcome
from sidecar.store.names import explicit_ts
from sidecar.store.types import Record

SCORE_DIGITS = 6  # scores: more digits only carry float noise
MS_DIGITS = 3

W = TypeVar("W")


def copy_fields(value: object, kind: type[W]) -> W:
    """A ``kind`` (a wire Struct or a dataclass) whose fields are ``value``'s attributes of
    the same names, nested values alike, checked against ``kind``'s types: for a service
    result the protocol names field for field (or params a service takes as they are),
    instead of copying each field by hand; a field renamed on one side fails the call
    instead of going missing."""
    return msgspec.convert(value, kind, from_attributes=True)


def selected_out(s: SelectedItem, *, with_text: bool = False) -> AssembleSelected:
    return msgspec.structs.replace(
        copy_fields(s, AssembleSelected),
        score=round(s.score, SCORE_DIGITS),
        text=s.text if with_text else msgspec.UNSET,
    )


def assemble_result(
    plan: AssemblyPlan,
    service_ms: Mapping[str, float] | None = None,
    window_start: int = 0,
    *,
    explain: bool = False,
    item_text: bool = False,
) -> AssembleResult:
    """``service_ms``: the service's own timings (embedding, gather, ...) beside the
    planner's; the planner's total is reported as ``planMs``. ``explain`` adds what was
    considered and left out."""
    timings = {k: round(v, MS_DIGITS) for k, v in (service_ms or {}).items()}
    for key, value in plan.timings.items():
        timings["planMs" if key == "totalMs" else key] = round(value, MS_DIGITS)
    return AssembleResult(
        messages=plan.messages,
        system_prompt_addition=plan.system_prompt_addition,
        estimated_tokens=plan.estimated_tokens,
        budget=plan.budget,
        selected=[selected_out(s, with_text=item_text) for s in plan.selected],
        degraded=list(plan.degraded) or None,
        timings=timings or None,
        window_start=window_start,
        considered=[considered_out(c) for c in plan.considered] if explain else None,
    )


def considered_out(c: ConsideredItem) -> AssembleConsidered:
    return msgspec.structs.replace(
        copy_fields(c, AssembleConsidered), score=round(c.score, SCORE_DIGITS)
    )


def search_hit_out(h: SearchHit) -> SearchHitOut:
    return msgspec.structs.replace(copy_fields(h, SearchHitOut), score=round(h.score, SCORE_DIGITS))


def gating_result(s: GatingSignals) -> GatingSignalsResult:
    """The reference ``gating_scalar`` result: every signal, without the decision."""
    return copy_fields(s, GatingSignalsResult)


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


def ingested_messages(
    out: IngestOutcome, roles: Sequence[str], duplicate: bool, stated: Sequence[bool] = ()
) -> list[IngestedMessage]:
    """``ingest`` ``explain``: what became of each message of the request, in order
    (``stated[i]``: message i came with ``durable: true``)."""
    result: list[IngestedMessage] = []
    admitted = set(out.admitted)
    for i, (mid, role) in enumerate(zip(out.ids, roles, strict=True)):
        sig = out.gating.get(mid) if mid and i not in out.skips else None
        if duplicate:
            why = "not stored: this advancementKey was already committed"
        elif not mid:
            why = "not stored: no text"
        elif i in out.skips:
            why = f"not stored: {out.skips[i]}"
        elif sig is None:
            why = "stored"
        elif mid in admitted and i < len(stated) and stated[i]:
            why = f"durable: stated as a fact (gate score {sig.g:.3f})"
        elif mid in admitted:
            why = f"durable: gate score {sig.g:.3f} >= {sig.threshold:.3f}"
        elif role.strip().lower() != "user":
            why = f"stored; not durable: only user messages are ({role} message)"
        else:
            why = f"stored; not durable: gate score {sig.g:.3f} < {sig.threshold:.3f}"
        result.append(
            IngestedMessage(
                id=mid,
                stored=sig is not None,
                durable=mid in admitted and sig is not None,
                reason=why,
                gate=gate_out(sig) if sig is not None else None,
            )
        )
    return result


def gate_out(s: GatingSignals) -> IngestGate:
    return IngestGate(
        score=round(s.g, SCORE_DIGITS),
        threshold=s.threshold,
        conversational=round(s.gconv, SCORE_DIGITS),
        technical_score=round(s.gtech, SCORE_DIGITS),
        technical=round(s.t, SCORE_DIGITS),
        novelty=round(s.h, SCORE_DIGITS),
        repetition=round(s.r, SCORE_DIGITS),
        structure=round(s.d, SCORE_DIGITS),
        specificity=round(s.p, SCORE_DIGITS),
        actionability=round(s.a, SCORE_DIGITS),
        tech_density=round(s.dtech, SCORE_DIGITS),
    )
