"""A session as compaction sees it: raw turns, summaries and the lineage graph, read from
the store in one pass."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sidecar.memory.compaction import lineage as L
from sidecar.memory.core import layout as C
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.memory.core.turns import Turn, chronological, stability_weight
from sidecar.store.aio import AsyncStore
from sidecar.store.names import explicit_ts
from sidecar.store.types import Record

F32 = np.ndarray[Any, Any]


class StoreHost(Protocol):
    """Anything that holds the store (the memory service does)."""

    @property
    def store(self) -> AsyncStore: ...


@dataclass(slots=True)
class TurnRec:
    turn: Turn
    collection: str
    vector: F32 | None
    user_id: str


@dataclass(slots=True)
class SummaryRec:
    id: str
    text: str
    vector: F32 | None
    level: int
    ts_min: int
    ts_max: int
    tokens: int
    original_tokens: int


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def int_or(value: object, default: int = 0) -> int:
    v = _num(value)
    return default if v is None or v != v or v in (float("inf"), float("-inf")) else int(v)


def _to_turn(rec: Record, collection: str) -> TurnRec:
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
        seq=int_or(meta.get("seq"), rec.seq),
        bundle_id=bundle if isinstance(bundle, str) else "",
        stability=stability if stability is not None else stability_weight(str(role)),
        gating_score=gating,
        user_id=user if isinstance(user, str) else "",
    )
    return TurnRec(turn, collection, rec.vector, turn.user_id)


def _is_turn_record(rec: Record) -> bool:
    t = rec.metadata.get("type")
    return t not in (C.TYPE_SUMMARY, C.TYPE_GUIDANCE, C.TYPE_EDGE)


async def load_session(
    host: StoreHost, session_id: str
) -> tuple[list[TurnRec], dict[str, SummaryRec], L.LineageGraph]:
    """Raw turns (chronological), summaries and the lineage graph of a session."""
    s = host.store.store
    raw_coll = C.session_raw(session_id)
    active_coll = C.session(session_id)

    def read() -> tuple[list[Record], list[Record], list[Record], list[Record]]:
        raw = s.list_records(raw_coll, include_vectors=True)
        active = s.list_records(active_coll, where={"sessionId": session_id}, include_vectors=True)
        sums = s.list_records(C.session_summary(session_id), include_vectors=True)
        edges = s.list_records(C.session_edge(session_id))
        return raw, active, sums, edges

    raw, active, sums, edges = await asyncio.to_thread(read)
    recs: dict[str, TurnRec] = {}
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
        children.setdefault(parent, []).append((int_or(m.get("edge_order")), ref))
    summaries: dict[str, SummaryRec] = {}
    for r in sums:
        m = r.metadata
        summaries[r.id] = SummaryRec(
            id=r.id,
            text=r.text,
            vector=r.vector,
            level=int_or(m.get("level"), 1),
            ts_min=int_or(m.get("source_ts_min")),
            ts_max=int_or(m.get("source_ts_max")),
            tokens=int_or(m.get("token_count"), estimate_tokens(r.text)),
            original_tokens=int_or(m.get("original_tokens")),
        )
    # Add summaries bottom-up; skip any whose children are unknown (e.g. a partial forget).
    pending = sorted(summaries.values(), key=lambda x: (x.level, x.id))
    for _ in range(len(pending) + 1):
        retry: list[SummaryRec] = []
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
