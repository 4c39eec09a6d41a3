"""Forget single things: chosen turns or records of one namespace, completely.

``forget_items(svc, ns, refs, dry_run=...)`` resolves each reference, then forgets it in
one store transaction per call:

* A **turn** (a message id, or any copy of it: ``session_raw:<sid>``, the v1
  ``session:<sid>`` view, ``turns:<ns>``/``user:<ns>`` as ``<sid>:<turnId>``, or a
  guidance shard quoting it) is deleted from every collection that holds a copy, and
  every summary whose leaves include it is **rebuilt** from its remaining children
  (lowest level first, so a condensed summary is rebuilt from its rebuilt children). A
  summary left with no children goes. The rebuilt text is made only from the remaining
  turns (the extractive summarizer, or the verbatim remaining text when that is shorter),
  never from the old summary, so the fact cannot come back through a summary.
* Any **other record** of the namespace (a dream entry, a v1 durable memory stored under
  its own id) is deleted.

Summaries and authored rules are refused: a summary is forgotten by forgetting the turns
it covers (``expand`` lists them); authored rules by ``authored.delete``.

Every deleted record gets a tombstone under the namespace, so ingest, import and dream
promotion do not bring it back. The sessions touched hold their compaction and ingest
locks, then the namespace's, for the whole call, so a background compaction cannot write
a summary of a turn being forgotten, nor a ``memory.update`` rewrite a forgotten fact (in
this daemon or another one on the same database).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.memory.compaction import continuity as K
from sidecar.memory.compaction import lineage as L
from sidecar.memory.compaction.compactor import edge_puts
from sidecar.memory.compaction.drafts import SUMMARY_JOINER, run_draft_ladder
from sidecar.memory.compaction.loading import SummaryRec, TurnRec, load_session
from sidecar.memory.compaction.sanitize import summary_view
from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.core.ownership import session_namespace
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.memory.lifecycle.forget import sessions_of_namespace
from sidecar.memory.lifecycle.forget_related import marks_to_clear, version_deletes
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Delete, Op, Put, Record

if TYPE_CHECKING:
    from sidecar.memory.service import MemoryService

F32 = np.ndarray[Any, Any]
MAX_ITEMS = 1_000
# Per-session collections a search reads (not the state, edges or v1 active view).
_SESSION_READ_PREFIXES = (C.SESSION_SUMMARY_PREFIX, C.SESSION_RAW_PREFIX, C.ELEVATED_SESSION_PREFIX)
_NOT_TURNS = (C.TYPE_SUMMARY, C.TYPE_GUIDANCE)
# Memory every namespace shares: a namespace's forget never deletes it (issue 32: bob's
# forget deleted a global record for everyone, and its tombstone blocked it coming back).
SHARED_COLLECTIONS = (C.GLOBAL,)


@dataclass(frozen=True, slots=True)
class RecordRef:
    collection: str
    id: str


@dataclass(frozen=True, slots=True)
class Forgotten:
    """One thing forgotten (or, in a dry run, that would be): a turn of ``session_id``
    with every copy, or one plain record (``session_id`` "")."""

    collection: str
    id: str
    text: str
    session_id: str = ""
    copies: int = 1


@dataclass(slots=True)
class ItemsOutcome:
    items: list[Forgotten] = field(default_factory=list)
    missing: list[RecordRef] = field(default_factory=list)
    deleted: int = 0
    summaries_rebuilt: int = 0
    summaries_removed: int = 0
    tombstones: int = 0


async def readable_by(store: AsyncStore, ns: str, collection: str) -> bool:
    """Whether a request of namespace ``ns`` may read (and so forget) ``collection``: its
    own collections, the shared ones, and the collections of sessions it owns."""
    if collection in (*C.namespace_collections(ns), C.GLOBAL, *C.AUTHORED_COLLECTIONS):
        return True
    sid = C.session_id_of(collection) if collection.startswith(_SESSION_READ_PREFIXES) else None
    return sid is not None and await session_namespace(store, sid, None, None) == ns


# ---------------------------------------------------------------------- resolution


@dataclass(slots=True)
class _Plan:
    turns: dict[str, dict[str, Record]] = field(default_factory=dict)  # sid -> turn id -> rec
    plain: dict[tuple[str, str], Record] = field(default_factory=dict)
    missing: list[RecordRef] = field(default_factory=list)


async def _turn_record(store: AsyncStore, sid: str, turn_id: str) -> Record | None:
    for coll in (C.session_raw(sid), C.session(sid)):
        rec = await store.get(coll, turn_id)
        if rec is not None and rec.metadata.get("type") not in _NOT_TURNS:
            return rec
    return None


def _turn_of_copy(rec: Record) -> tuple[str, str] | None:
    """(session, turn id) of a record that copies a raw turn, else None."""
    coll, meta = rec.collection, rec.metadata
    sid = meta.get("sessionId")
    sid = sid if isinstance(sid, str) else ""
    if coll.startswith(C.SESSION_RAW_PREFIX) or (
        coll.startswith(C.SESSION_PREFIX) and C.session_id_of(coll) == sid
    ):
        return (C.session_id_of(coll) or sid, rec.id)
    if meta.get("type") == C.TYPE_GUIDANCE:
        tid = meta.get("source_turn_id")
        return (sid, tid) if sid and isinstance(tid, str) else None
    turn = C.turn_id_in(rec.id, sid) if coll.startswith((C.TURNS_PREFIX, C.USER_PREFIX)) else None
    return (sid, turn) if turn is not None else None


async def _resolve(
    store: AsyncStore,
    ns: str,
    message_ids: Sequence[str],
    records: Sequence[RecordRef],
    sessions: Sequence[str] | None = None,
) -> _Plan:
    """What the request names; message ids are looked up in ``sessions`` (default: every
    session of the namespace)."""
    plan = _Plan()
    if message_ids:
        wanted = list(dict.fromkeys(message_ids))
        sids = list(sessions) if sessions is not None else await sessions_of_namespace(store, ns)
        found = await store.call(_find_turns, store.store, sids, wanted)
        for sid, tid, rec in found:
            plan.turns.setdefault(sid, {})[tid] = rec
        seen = {tid for _sid, tid, _rec in found}
        plan.missing += [RecordRef("", t) for t in wanted if t not in seen]
    for ref in dict.fromkeys(records):
        await _resolve_record(store, ns, ref, plan)
    return plan


def _find_turns(
    backend: StoreBackend, sids: Sequence[str], wanted: Sequence[str]
) -> list[tuple[str, str, Record]]:
    """(session, turn id, raw turn) of each wanted id in each session: two keyed reads a
    session (its raw history, then the v1 view for turns only it holds), not a read per
    id and session (a namespace of 3,000 sessions took 230 s for 200 ids)."""
    out: list[tuple[str, str, Record]] = []
    for sid in sids:
        left = set(wanted)
        for coll in (C.session_raw(sid), C.session(sid)):
            for rec in backend.get_many(coll, sorted(left)):
                if rec.id in left and rec.metadata.get("type") not in _NOT_TURNS:
                    out.append((sid, rec.id, rec))
                    left.discard(rec.id)
            if not left:
                break
    return out


async def _resolve_record(store: AsyncStore, ns: str, ref: RecordRef, plan: _Plan) -> None:
    if ref.collection in C.AUTHORED_COLLECTIONS:
        raise MemoryInputError(
            f"{ref.collection} holds authored rules: remove them with authored.delete"
        )
    if ref.collection in SHARED_COLLECTIONS:
        raise MemoryInputError(
            f"{ref.collection} holds memory shared by every namespace: a namespace's forget "
            "never deletes it (remove a shared record with the v1 delete method)"
        )
    if ref.collection.startswith(C.SESSION_SUMMARY_PREFIX):
        raise MemoryInputError(
            f"{ref.id!r} is a summary: forget the turns it covers (expand lists them) and "
            "it is rebuilt without them"
        )
    allowed = await readable_by(store, ns, ref.collection)
    rec = await store.get(ref.collection, ref.id) if allowed else None
    if rec is None:
        plan.missing.append(ref)  # "not yours" and "absent" look the same
        return
    turn = _turn_of_copy(rec)
    if turn is not None:
        sid, tid = turn
        raw = await _turn_record(store, sid, tid)
        if raw is not None and await session_namespace(store, sid, None, None) == ns:
            plan.turns.setdefault(sid, {})[tid] = raw
            return
    plan.plain[(rec.collection, rec.id)] = rec


# ---------------------------------------------------------------------- forgetting


async def forget_items(
    svc: MemoryService,
    namespace: str,
    *,
    message_ids: Sequence[str] = (),
    records: Sequence[RecordRef] = (),
    dry_run: bool = False,
) -> ItemsOutcome:
    """Forget the given turns and records of ``namespace`` (module doc)."""
    if not isinstance(namespace, str) or not namespace.strip():
        raise MemoryInputError("namespace or userId is required")
    if len(message_ids) + len(records) > MAX_ITEMS:
        raise MemoryInputError(f"at most {MAX_ITEMS} messages and records per forget")
    store = svc.store
    plan = await _resolve(store, namespace, message_ids, records)
    if dry_run:
        plain = {k: len(await _plain_deletes(store, r)) for k, r in plan.plain.items()}
        return _outcome(plan, await _count_copies(svc, namespace, plan), plain)
    async with contextlib.AsyncExitStack() as held:
        sids = sorted(plan.turns)
        for sid in sids:
            await held.enter_async_context(svc.compaction_lock(sid))
        for sid in sids:
            await held.enter_async_context(svc.ingest_lock(sid))
        await held.enter_async_context(svc.namespace_lock(namespace))
        # Resolved again under the locks, in the sessions found (a cheap keyed read): an
        # ingest, a compaction or an update (here or in another daemon on the same
        # database) may have finished between the first look and the locks.
        plan = await _resolve(store, namespace, message_ids, records, sids)
        return await _forget_locked(svc, namespace, plan)


async def _count_copies(
    svc: MemoryService, namespace: str, plan: _Plan
) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for sid, recs in plan.turns.items():
        for tid, rec in recs.items():
            counts[(sid, tid)] = len(await _turn_copies(svc.store, namespace, sid, rec))
    return counts


async def _plain_deletes(store: AsyncStore, rec: Record) -> list[Delete]:
    """The record and its ``memory.update`` versions."""
    return [
        Delete(rec.collection, rec.id),
        *await version_deletes(store, [(rec.collection, rec.id)]),
    ]


async def _turn_copies(store: AsyncStore, namespace: str, sid: str, raw: Record) -> list[Delete]:
    """Deletes of every stored copy of the raw turn ``raw`` of ``sid``, and of the
    ``memory.update`` versions of its durable copies (never another turn's records: a
    statement it superseded is another fact, ``forget_related``)."""
    user = raw.metadata.get("userId")
    deletes = _copy_deletes(namespace, sid, user if isinstance(user, str) else "", raw.id)
    nid = C.namespace_turn_id(sid, raw.id)
    durable = [(d.collection, nid) for d in deletes if d.collection.startswith(C.USER_PREFIX)]
    return await _present(store, deletes) + await version_deletes(store, durable)


async def _present(store: AsyncStore, deletes: Sequence[Delete]) -> list[Delete]:
    return [d for d in deletes if await store.get(d.collection, d.id) is not None]


def _outcome(
    plan: _Plan, copies: dict[tuple[str, str], int], plain: dict[tuple[str, str], int]
) -> ItemsOutcome:
    """``copies``: records per turn (session, turn id); ``plain``: per plain record
    (collection, id), its versions included."""
    out = ItemsOutcome(missing=list(plan.missing))
    for sid, recs in plan.turns.items():
        for tid, rec in recs.items():
            n = copies.get((sid, tid), 1)
            out.items.append(Forgotten(rec.collection, tid, rec.text, sid, n))
    for key, rec in plan.plain.items():
        out.items.append(Forgotten(rec.collection, rec.id, rec.text, copies=plain.get(key, 1)))
    return out


async def _forget_locked(svc: MemoryService, namespace: str, plan: _Plan) -> ItemsOutcome:
    store = svc.store
    ops: list[Op] = []
    copies: dict[tuple[str, str], int] = {}
    out_counts = ItemsOutcome()
    for sid, recs in plan.turns.items():
        session_ops, n_copies = await _session_ops(svc, namespace, sid, recs, out_counts)
        ops += session_ops
        copies.update({(sid, tid): n for tid, n in n_copies.items()})
    plain: dict[tuple[str, str], int] = {}
    for key, rec in plan.plain.items():
        deletes = await _plain_deletes(store, rec)
        plain[key] = len(deletes)
        ops += deletes
    doomed = {(op.collection, op.id) for op in ops if isinstance(op, Delete)}
    raws = [(sid, raw) for sid, recs in plan.turns.items() for raw in recs.values()]
    ops += await marks_to_clear(store, namespace, raws, doomed)
    out = _outcome(plan, copies, plain)
    out.summaries_rebuilt = out_counts.summaries_rebuilt
    out.summaries_removed = out_counts.summaries_removed
    keys = _tombstone_keys(ops, plan)
    if keys:
        # Tombstones first: a crash before the write leaves the records and their
        # tombstones, and forgetting again finishes the job; never the reverse.
        out.tombstones = await store.add_tombstones(namespace, keys, C.TOMBSTONE_REASON_FORGET)
    if ops:
        results = await store.write(ops)
        out.deleted = sum(
            1 for op, r in zip(ops, results, strict=True) if isinstance(op, Delete) and r.changed
        )
    _announce(svc, namespace, plan)
    return out


def _tombstone_keys(ops: Iterable[Op], plan: _Plan) -> list[str]:
    keys = [C.tombstone_key(op.collection, op.id) for op in ops if isinstance(op, Delete)]
    for rec in plan.plain.values():
        if rec.collection.startswith(C.DREAM_PREFIX):  # dream ids are positional
            keys.append(C.tombstone_key(rec.collection, C.content_tombstone_id(rec.text)))
    # A turn's raw key also under both raw names, so neither v1 nor v2 re-ingests it.
    for sid, recs in plan.turns.items():
        keys += C.tombstone_keys(C.session_raw(sid), recs)
    return list(dict.fromkeys(keys))


def _announce(svc: MemoryService, namespace: str, plan: _Plan) -> None:
    from sidecar.memory.service import InvalidationEvent

    users = {
        str(r.metadata.get("userId"))
        for recs in plan.turns.values()
        for r in recs.values()
        if isinstance(r.metadata.get("userId"), str) and r.metadata.get("userId")
    }
    for ns in {namespace, *users}:
        svc.publish(InvalidationEvent("forget", namespace=ns))
    for sid in plan.turns:
        epoch = svc.barrier.advance(sid)
        svc.publish(InvalidationEvent("forget", session_id=sid, namespace=namespace, epoch=epoch))


# ---------------------------------------------------------------------- one session


def _copy_deletes(namespace: str, sid: str, user: str, tid: str) -> list[Delete]:
    nid = C.namespace_turn_id(sid, tid)
    shard = L.guidance_shard_id(sid, tid)
    targets = [
        (C.session_raw(sid), tid),
        (C.session(sid), tid),
        (C.turns(namespace), nid),
        (C.user(namespace), nid),
        (C.elevated_session(sid), shard),
        (C.elevated_user(namespace), shard),
    ]
    if user and user != namespace:
        targets += [(C.user(user), nid), (C.elevated_user(user), shard), (C.turns(user), nid)]
    return [Delete(c, i) for c, i in dict.fromkeys(targets)]


async def _session_ops(
    svc: MemoryService, namespace: str, sid: str, doomed: dict[str, Record], counts: ItemsOutcome
) -> tuple[list[Op], dict[str, int]]:
    """Deletes of every copy of the doomed turns, and the summary rebuilds of ``sid``."""
    ops: list[Op] = []
    copies: dict[str, int] = {}
    for tid, raw in doomed.items():
        present = await _turn_copies(svc.store, namespace, sid, raw)
        ops += present
        copies[tid] = len(present)
    turns, summaries, graph = await load_session(svc, sid)
    ops += await _rebuild_summaries(svc, sid, set(doomed), turns, summaries, graph, counts)
    return ops, copies


async def _rebuild_summaries(
    svc: MemoryService,
    sid: str,
    doomed: set[str],
    turns: Sequence[TurnRec],
    summaries: dict[str, SummaryRec],
    graph: L.LineageGraph,
    counts: ItemsOutcome,
) -> list[Op]:
    """Rebuild every summary over a doomed turn, lowest level first (module doc)."""
    affected = [s for s in graph.summaries if doomed.intersection(graph.leaves(s))]
    affected.sort(key=lambda s: (graph.node(s).level, s))
    if not affected:
        return []
    by_id = {t.turn.id: t for t in turns}
    edges = await _edges_by_parent(svc.store, sid)
    replaced: dict[str, SummaryRec | None] = {}
    ops: list[Op] = []
    now = int(time.time() * 1000)
    for s in affected:
        ops.append(Delete(C.session_summary(sid), s))
        ops += [Delete(C.session_edge(sid), eid) for eid in edges.get(s, [])]
        kept = _remaining(graph.node(s), doomed, by_id, summaries, replaced)
        if not kept.items:
            replaced[s] = None
            counts.summaries_removed += 1
            continue
        text, method, confidence = _rebuilt_text(kept, K.DEFAULT_MAX_OUTPUT_TOKENS)
        rec = L.build_summary_record(
            sid,
            kept.items,
            text=text,
            summary_tokens=estimate_tokens(text),
            method=method,
            confidence=confidence,
            generation=0,
            compacted_at=now,
            level=1 + max(kept.levels, default=0),
        )
        rec.metadata["rebuilt_after_forget"] = True
        vec = (await svc.embed([text], "document"))[0]
        replaced[s] = SummaryRec(
            rec.id,
            text,
            vec,
            int(rec.metadata["level"]),
            kept.items[0].ts_min,
            kept.items[-1].ts_max,
            estimate_tokens(text),
            sum(i.original_tokens for i in kept.items),
        )
        ops.append(Put(C.session_summary(sid), rec.id, rec.text, rec.metadata, vec))
        ops += edge_puts(sid, rec.id, kept.items, by_id, now)
        counts.summaries_rebuilt += 1
    return ops


async def _edges_by_parent(store: AsyncStore, sid: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in await store.list_records(C.session_edge(sid)):
        parent = e.metadata.get("parent_summary_id")
        if isinstance(parent, str):
            out.setdefault(parent, []).append(e.id)
    return out


@dataclass(slots=True)
class _Kept:
    """What a rebuilt summary keeps of its children."""

    items: list[L.SourceItem] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    vectors: list[F32 | None] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)  # of the summary children


def _remaining(
    node: L.SummaryNode,
    doomed: set[str],
    by_id: dict[str, TurnRec],
    summaries: dict[str, SummaryRec],
    replaced: dict[str, SummaryRec | None],
) -> _Kept:
    kept = _Kept()
    for child in node.children:
        if child.kind == "turn":
            t = by_id.get(child.id)
            if child.id in doomed or t is None:
                continue
            tokens = estimate_tokens(t.turn.text)
            kept.items.append(L.SourceItem(child, t.turn.ts, t.turn.ts, tokens, tokens, t.user_id))
            kept.texts.append(summary_view(t.turn.text, t.turn.role))
            kept.vectors.append(t.vector)
            continue
        kid = replaced[child.id] if child.id in replaced else summaries.get(child.id)
        if kid is None:
            continue
        ref = L.summary_ref(kid.id)
        item = L.SourceItem(ref, kid.ts_min, kid.ts_max, kid.tokens, kid.original_tokens)
        kept.items.append(item)
        kept.texts.append(summary_view(kid.text, "summary"))
        kept.vectors.append(kid.vector)
        kept.levels.append(kid.level)
    return kept


def _rebuilt_text(kept: _Kept, max_output_tokens: int) -> tuple[str, str, float]:
    """(text, method, confidence) of a rebuilt summary, made only from what remains: the
    extractive ladder over the stored vectors, or the remaining text verbatim (confidence
    0) when the ladder cannot shorten it (one short child) or a vector is missing."""
    vectors = kept.vectors
    if all(v is not None for v in vectors):
        stacked = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
        draft = run_draft_ladder(kept.texts, kept.texts, stacked, None, max_output_tokens, None)
        if draft is not None and draft.text.strip():
            confidence = draft.raw_confidence if draft.method == "extractive" else 0.0
            return draft.text, draft.method, confidence
    return SUMMARY_JOINER.join(kept.texts), "verbatim", 0.0
