"""Candidate gathering for the ``assemble`` and ``search`` RPCs (issue 6).

:class:`Retrieval` is the App component between the store and the pure planner
(:mod:`sidecar.memory.assemble`). Per call it

1. embeds the query **once** (``kind="query"``);
2. syncs the in-memory view of the collections the call reads (:class:`_Coll`: records,
   unit vectors as one matrix, a :class:`~sidecar.memory.lexical.BM25Index`);
3. builds the pool the way ``scripts/eval_locomo.py --inprocess`` does: for every scope,
   the exact dense top-k (one matrix product over the cached vectors) plus the BM25
   top-k of the query's content terms, each candidate carrying its vector;
4. calls :func:`~sidecar.memory.assemble.plan_assembly` (or ``plan_search``) with hooks
   for neighbour turns (``seq +- 1`` of ``turns:<ns>``), hop targets (authored variant by
   id), summary expansion (the summary's covered turns) and recovery (a deeper search of
   the raw history);
5. bumps ``access_count`` of the injected stored records (fire-and-forget).

**Caches.** One :class:`_Coll` per collection name, in an LRU bounded by
:data:`MAX_COLLECTIONS` collections. A view is reused while the store's record count of
the collection is unchanged and it is not marked stale; a changed count (ingest adds,
forget and authored delete remove) reloads the collection and updates its BM25 index
incrementally (removed ids out, new or changed ids in). Compaction and forget events of
:meth:`MemoryService.subscribe` mark the affected collections stale. Authored collections
(small) are also reloaded whenever the store's sequence moved, so an authored replace
with the same node count is never served stale.

Not thread-safe by itself: every call holds :attr:`Retrieval.lock`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.memory import collections as C
from sidecar.memory.assemble import (
    AssemblyConfig,
    AssemblyPlan,
    AuthoredNode,
    SearchHit,
    plan_assembly,
    plan_search,
)
from sidecar.memory.budget import BudgetConfig
from sidecar.memory.lexical import BM25Index, LexicalIndex
from sidecar.memory.scoring import F32, Candidate
from sidecar.memory.temporal import plan_temporal
from sidecar.memory.tokens import estimate_tokens, message_text
from sidecar.store.types import Record

if TYPE_CHECKING:
    from sidecar.app import App
    from sidecar.memory.service import InvalidationEvent, MemoryService
    from sidecar.store.store import Store

MAX_COLLECTIONS = 512
DENSE_K = 50  # per scope, as the in-process evaluation's pool
LEXICAL_K = 50
SIDE_K = 20  # durable, global, authored variant, summaries, dream, elevated
RECOVER_K = 100

#: The rendering envelope of one recalled entry (``[M12] <entry role="assistant"
#: source="recalled">`` ... ``</entry>`` plus the line break), charged to the memory
#: budget per item (lead decision: the injected total never exceeds the memory budget).
ENTRY_OVERHEAD_TOKENS = estimate_tokens(
    '[M12] <entry role="assistant" source="recalled"></entry>\n'
)

DAEMON_ASSEMBLY = AssemblyConfig(budget=BudgetConfig(entry_overhead_tokens=ENTRY_OVERHEAD_TOKENS))

_SCOPE_OF_PREFIX: tuple[tuple[str, str, str], ...] = (
    (C.TURNS_PREFIX, "history", "turn"),
    (C.USER_PREFIX, "durable", "memory"),
    (C.DREAM_PREFIX, "dream", "dream"),
    (C.SESSION_SUMMARY_PREFIX, "summary", "summary"),
    (C.SESSION_RAW_PREFIX, "session", "turn"),
    (C.ELEVATED_USER_PREFIX, "elevated", "guidance"),
    (C.ELEVATED_SESSION_PREFIX, "elevated", "guidance"),
    (C.AUTHORED_VARIANT, "authored", "authored"),
    (C.GLOBAL, "global", "memory"),
)

#: ``search`` scope names -> collections (``<ns>``/``<sid>`` filled in).
SEARCH_SCOPES = ("history", "durable", "summary", "global", "authored", "dream", "elevated")


def scope_of(collection: str) -> tuple[str, str]:
    """``(scope, kind)`` of a collection's records."""
    for prefix, scope, kind in _SCOPE_OF_PREFIX:
        if collection.startswith(prefix):
            return scope, kind
    return "history", "memory"


def _int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v)


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


class _SharedLexical(LexicalIndex):
    """A :class:`LexicalIndex` view over the cached per-collection BM25 indexes."""

    def attach(self, name: str, index: BM25Index) -> None:
        self._indexes[name] = index


@dataclass
class _Coll:
    """The in-memory view of one collection."""

    name: str
    count: int = -1
    seq: int = -1
    stale: bool = True
    records: list[Record] = field(default_factory=list)
    by_id: dict[str, int] = field(default_factory=dict)
    matrix: F32 | None = None  # unit rows, zero rows for vectorless records
    bm25: BM25Index = field(default_factory=BM25Index)
    cands: list[Candidate] = field(default_factory=list)
    by_pos: dict[tuple[str, int], int] = field(default_factory=dict)

    def reload(self, store: Store, count: int, seq: int) -> None:
        recs = store.list_records(self.name, include_vectors=True)
        old = {r.id: r.text for r in self.records}
        new = {r.id: r.text for r in recs}
        for rid, text in old.items():
            if new.get(rid) != text:
                self.bm25.remove(rid)
        for rid, text in new.items():
            if old.get(rid) != text:
                self.bm25.add(rid, text)
        self.records = recs
        self.by_id = {r.id: i for i, r in enumerate(recs)}
        dims = store.embed_dims
        mat = np.zeros((len(recs), dims), dtype=np.float32)
        for i, r in enumerate(recs):
            if r.vector is not None:
                v = np.asarray(r.vector, dtype=np.float32).reshape(-1)
                if v.shape[0] == dims:
                    n = float(np.linalg.norm(v))
                    if n > 1e-12:
                        mat[i] = v / n
        self.matrix = mat
        self.cands = [self._candidate(r, mat[i]) for i, r in enumerate(recs)]
        self.by_pos = {}
        for i, c in enumerate(self.cands):
            if c.kind == "turn" and c.seq is not None:
                self.by_pos[(c.session_id, c.seq)] = i
        self._resolve_summaries()
        self.count, self.seq, self.stale = count, seq, False

    def _candidate(self, r: Record, vec: F32) -> Candidate:
        scope, kind = scope_of(self.name)
        meta = r.metadata
        if meta.get("type") == C.TYPE_SUMMARY:
            kind = "summary"
        sid = _str(meta.get("sessionId")) or (C.session_id_of(self.name) or "")
        src = _str(meta.get("source_turn_id"))
        if kind == "turn":
            turn_ids: tuple[str, ...] = (src or r.id,)
        elif kind == "summary":
            turn_ids = tuple(x for x in meta.get("source_turn_ids", ()) if isinstance(x, str))
        else:
            turn_ids = (src,) if src else ()
        ts = _int(meta.get("ts"))
        return Candidate(
            kind=kind,
            collection=self.name,
            id=r.id,
            text=r.text or _str(meta.get("text")),
            scope=scope,
            turn_ids=turn_ids,
            session_id=sid,
            role=_str(meta.get("role")),
            ts=ts if ts is not None else (r.ts_ms or None),
            seq=_int(meta.get("seq")),
            vector=vec if bool(np.any(vec)) else None,
            metadata=meta,
        )

    def _resolve_summaries(self) -> None:
        """Condensed summaries cover the turns of their parent summaries (transitively)."""
        if not any(c.kind == "summary" for c in self.cands):
            return
        memo: dict[str, tuple[str, ...]] = {}

        def covered(i: int, depth: int = 0) -> tuple[str, ...]:
            c = self.cands[i]
            if c.id in memo:
                return memo[c.id]
            ids = list(c.turn_ids)
            if depth < 16:
                for p in c.metadata.get("parent_summary_ids", ()) or ():
                    j = self.by_id.get(p) if isinstance(p, str) else None
                    if j is not None:
                        ids.extend(covered(j, depth + 1))
            memo[c.id] = tuple(dict.fromkeys(ids))
            return memo[c.id]

        for i, c in enumerate(self.cands):
            if c.kind == "summary":
                t = covered(i)
                if t != c.turn_ids:
                    self.cands[i] = Candidate(
                        kind=c.kind,
                        collection=c.collection,
                        id=c.id,
                        text=c.text,
                        scope=c.scope,
                        turn_ids=t,
                        session_id=c.session_id,
                        role=c.role,
                        ts=c.ts,
                        seq=c.seq,
                        vector=c.vector,
                        metadata=c.metadata,
                    )

    # ---- queries -----------------------------------------------------------------------

    def dense_top(self, qvec: F32 | None, k: int) -> list[int]:
        if qvec is None or self.matrix is None or not len(self.records) or k <= 0:
            return []
        sims = self.matrix @ qvec
        if k < len(sims):
            part = np.argpartition(-sims, k - 1)[:k]
            order = part[np.argsort(-sims[part], kind="stable")]
        else:
            order = np.argsort(-sims, kind="stable")
        return [int(i) for i in order if sims[i] > 0.0 or k >= len(sims)]

    def lexical_top(self, terms_query: str, k: int) -> list[int]:
        if k <= 0 or not len(self.bm25):
            return []
        return [self.by_id[i] for i, _ in self.bm25.search(terms_query, k) if i in self.by_id]


@dataclass
class Gathered:
    """Everything one call reads, consistent with one sync of the caches."""

    hard: list[AuthoredNode]
    soft: list[AuthoredNode]
    elevated: list[Candidate]
    candidates: list[Candidate]
    session_turns: list[Candidate]
    lexical: _SharedLexical
    colls: dict[str, _Coll]


class Retrieval:
    """The App component behind ``assemble`` and ``search`` (module doc)."""

    def __init__(self, memory: MemoryService, config: AssemblyConfig = DAEMON_ASSEMBLY) -> None:
        self.memory = memory
        self.config = config
        self.lock = asyncio.Lock()
        self._colls: OrderedDict[str, _Coll] = OrderedDict()
        self._pending: set[asyncio.Future[Any]] = set()
        self._unsubscribe = memory.subscribe(self._on_event)

    # ---- invalidation ------------------------------------------------------------------

    def _on_event(self, event: InvalidationEvent) -> None:
        if event.session_id:
            for name in C.session_collections(event.session_id):
                self.invalidate(name)
        if event.namespace:
            for name in C.namespace_collections(event.namespace):
                self.invalidate(name)

    def invalidate(self, name: str | None = None) -> None:
        """Mark one collection (all when None) stale: the next call reloads it."""
        if name is None:
            for c in self._colls.values():
                c.stale = True
        elif name in self._colls:
            self._colls[name].stale = True

    def detach(self) -> None:
        """Stop listening to MemoryService invalidation events."""
        self._unsubscribe()

    # ---- sync --------------------------------------------------------------------------

    def _sync(self, names: Iterable[str]) -> dict[str, _Coll]:
        """Bring the named collections up to date (runs in a worker thread)."""
        store = self.memory.store.store
        seq = store.max_seq()
        out: dict[str, _Coll] = {}
        for name in dict.fromkeys(names):
            coll = self._colls.get(name)
            if coll is None:
                coll = _Coll(name)
                self._colls[name] = coll
            self._colls.move_to_end(name)
            count = store.count(name)
            authored = name.startswith("authored:")
            if coll.stale or count != coll.count or (authored and seq != coll.seq):
                coll.reload(store, count, seq)
            out[name] = coll
        while len(self._colls) > MAX_COLLECTIONS:
            self._colls.popitem(last=False)
        return out

    async def embed_query(self, query: str) -> F32 | None:
        if not query.strip():
            return None
        vec = (await self.memory.embed([query], "query"))[0]
        n = float(np.linalg.norm(vec))
        return (vec / n).astype(np.float32) if n > 1e-12 else None

    # ---- assemble ----------------------------------------------------------------------

    async def assemble(
        self,
        *,
        session_id: str,
        namespace: str,
        query: str,
        token_budget: float,
        memory_fraction: float,
        messages: Sequence[Mapping[str, Any]] | None,
        now_ms: int | None = None,
    ) -> tuple[AssemblyPlan, dict[str, float]]:
        t0 = time.perf_counter()
        qvec = await self.embed_query(query)
        t_embed = time.perf_counter()
        async with self.lock:
            plan, gathered_ms = await asyncio.to_thread(
                self._assemble_sync,
                session_id,
                namespace,
                query,
                qvec,
                token_budget,
                memory_fraction,
                messages,
                now_ms,
            )
        self._bump(plan)
        t_end = time.perf_counter()
        timings = {
            "embedMs": (t_embed - t0) * 1000,
            "gatherMs": gathered_ms,
            "totalMs": (t_end - t0) * 1000,
        }
        return plan, timings

    def _gather(
        self, session_id: str, ns: str, query: str, qvec: F32 | None, now: int
    ) -> tuple[Gathered, str]:
        names = [
            C.turns(ns),
            C.user(ns),
            C.dream(ns),
            C.elevated_user(ns),
            C.elevated_session(session_id),
            C.session_summary(session_id),
            C.session_raw(session_id),
            C.GLOBAL,
            *C.AUTHORED_COLLECTIONS,
        ]
        colls = self._sync(names)
        tplan = plan_temporal(query, now, mention_slack_days=self.config.mention_slack_days)
        lex_query = tplan.content_query or query
        lexical = _SharedLexical()
        for name, coll in colls.items():
            lexical.attach(name, coll.bm25)

        def pick(coll: _Coll, dk: int, lk: int) -> list[Candidate]:
            idx = dict.fromkeys(coll.dense_top(qvec, dk) + coll.lexical_top(lex_query, lk))
            return [coll.cands[i] for i in idx]

        cands: list[Candidate] = []
        turns_coll = colls[C.turns(ns)]
        cands += pick(turns_coll, DENSE_K, LEXICAL_K)
        # a durable copy of a turn the raw history holds stands in as that raw turn: one
        # record per source (dedupe), and the pool's lexical normalisation is not skewed
        # by the small durable collection's BM25 statistics
        seen = {c.key for c in cands}
        for c in pick(colls[C.user(ns)], SIDE_K, SIDE_K):
            j = (
                turns_coll.by_id.get(C.namespace_turn_id(c.session_id, c.turn_ids[0]))
                if c.turn_ids
                else None
            )
            d = turns_coll.cands[j] if j is not None else c
            if d.key not in seen:
                seen.add(d.key)
                cands.append(d)
        for name in (
            C.session_summary(session_id),
            C.GLOBAL,
            C.AUTHORED_VARIANT,
        ):
            cands += pick(colls[name], SIDE_K, SIDE_K)
        if query.strip():
            from sidecar.memory.temporal import is_dream_query

            if is_dream_query(query):
                cands += pick(colls[C.dream(ns)], SIDE_K, SIDE_K)
        elevated = pick(colls[C.elevated_user(ns)], SIDE_K, SIDE_K) + pick(
            colls[C.elevated_session(session_id)], SIDE_K, SIDE_K
        )
        hard = _authored_nodes(colls[C.AUTHORED_HARD], 1)
        soft = _authored_nodes(colls[C.AUTHORED_SOFT], 2)
        raw = colls[C.session_raw(session_id)]
        session_turns = sorted(
            (c for c in raw.cands if c.kind == "turn"),
            key=lambda c: (c.seq if c.seq is not None else 0, c.ts or 0),
        )
        g = Gathered(hard, soft, elevated, cands, session_turns, lexical, colls)
        return g, lex_query

    def _assemble_sync(
        self,
        session_id: str,
        ns: str,
        query: str,
        qvec: F32 | None,
        token_budget: float,
        memory_fraction: float,
        messages: Sequence[Mapping[str, Any]] | None,
        now_ms: int | None,
    ) -> tuple[AssemblyPlan, float]:
        t0 = time.perf_counter()
        now = int(time.time() * 1000) if now_ms is None else now_ms
        g, lex_query = self._gather(session_id, ns, query, qvec, now)
        turns_coll = g.colls[C.turns(ns)]
        variant = g.colls[C.AUTHORED_VARIANT]
        if messages is not None:
            session_turns = _message_turns(messages, session_id, now)
            original: list[Any] = [dict(m) for m in messages]
        else:
            session_turns = g.session_turns
            original = []
        gathered_ms = (time.perf_counter() - t0) * 1000

        def neighbors(turns: Sequence[Candidate]) -> list[Candidate]:
            out: list[Candidate] = []
            for c in turns:
                if c.seq is None:
                    continue
                for d in (-1, 1):
                    j = turns_coll.by_pos.get((c.session_id, c.seq + d))
                    if j is not None:
                        out.append(turns_coll.cands[j])
            return out

        def hops(ids: Sequence[str]) -> list[Candidate]:
            return [variant.cands[variant.by_id[i]] for i in ids if i in variant.by_id]

        def expand(summary_id: str) -> list[Candidate]:
            summ = g.colls[C.session_summary(session_id)]
            j = summ.by_id.get(summary_id)
            if j is None:
                return []
            s = summ.cands[j]
            out = []
            for tid in s.turn_ids:
                k = turns_coll.by_id.get(C.namespace_turn_id(s.session_id, tid))
                if k is not None:
                    out.append(turns_coll.cands[k])
            return sorted(out, key=lambda c: c.seq or 0)

        def recover() -> list[Candidate]:
            idx = dict.fromkeys(
                turns_coll.dense_top(qvec, RECOVER_K) + turns_coll.lexical_top(lex_query, RECOVER_K)
            )
            return [turns_coll.cands[i] for i in idx]

        plan = plan_assembly(
            query=query,
            query_vector=qvec,
            token_budget=token_budget,
            memory_fraction=memory_fraction,
            session_id=session_id,
            session_turns=session_turns,
            hard=g.hard,
            soft=g.soft,
            elevated=g.elevated,
            candidates=g.candidates,
            original_messages=original,
            now_ms=now,
            lexical=g.lexical,
            terms_of=_terms_of(g.colls),
            neighbors=neighbors,
            hops=hops,
            expand=expand,
            recover=recover,
            config=self.config,
        )
        return plan, gathered_ms

    def _bump(self, plan: AssemblyPlan) -> None:
        """``access_count += 1`` for the injected stored records (fire-and-forget)."""
        updates: dict[str, list[str]] = {}
        for item in plan.selected:
            if item.part == "tail" and item.collection.startswith("session:"):
                continue
            if item.collection in self._colls:
                updates.setdefault(item.collection, []).append(item.id)
        if not updates:
            return
        fut = asyncio.ensure_future(self.memory.store.increment(updates))
        self._pending.add(fut)
        fut.add_done_callback(_drop_result(self._pending))

    # ---- search ------------------------------------------------------------------------

    async def search(
        self,
        *,
        query: str,
        namespace: str,
        session_id: str | None,
        scopes: Sequence[str] | None,
        k: int,
        role: str | None,
        since: int | None,
        until: int | None,
        kind: str | None,
    ) -> list[SearchHit]:
        qvec = await self.embed_query(query)
        async with self.lock:
            return await asyncio.to_thread(
                self._search_sync,
                query,
                qvec,
                namespace,
                session_id,
                scopes,
                k,
                role,
                since,
                until,
                kind,
            )

    def _search_sync(
        self,
        query: str,
        qvec: F32 | None,
        ns: str,
        session_id: str | None,
        scopes: Sequence[str] | None,
        k: int,
        role: str | None,
        since: int | None,
        until: int | None,
        kind: str | None,
    ) -> list[SearchHit]:
        wanted = set(scopes) if scopes else set(SEARCH_SCOPES)
        names: list[str] = []
        if "history" in wanted or "session" in wanted:
            names.append(C.turns(ns))
        if "durable" in wanted:
            names.append(C.user(ns))
        if "dream" in wanted:
            names.append(C.dream(ns))
        if "elevated" in wanted:
            names.append(C.elevated_user(ns))
        if session_id:
            if "summary" in wanted:
                names.append(C.session_summary(session_id))
            if "elevated" in wanted:
                names.append(C.elevated_session(session_id))
        if "global" in wanted:
            names.append(C.GLOBAL)
        if "authored" in wanted:
            names.append(C.AUTHORED_VARIANT)
        colls = self._sync(names)
        now = int(time.time() * 1000)
        tplan = plan_temporal(query, now, mention_slack_days=self.config.mention_slack_days)
        lex_query = tplan.content_query or query
        lexical = _SharedLexical()
        cands: list[Candidate] = []
        filtered = role is not None or since is not None or until is not None or kind is not None
        depth = max(DENSE_K, 4 * k)
        for name, coll in colls.items():
            lexical.attach(name, coll.bm25)
            if filtered:  # filters can empty a top-k: take the whole collection's matches
                idx = [i for i, c in enumerate(coll.cands) if _passes(c, role, since, until, kind)]
                if len(idx) > 4 * depth and qvec is not None and coll.matrix is not None:
                    sims = coll.matrix[idx] @ qvec
                    top = np.argsort(-sims, kind="stable")[:depth].tolist()
                    lex = set(coll.lexical_top(lex_query, 4 * depth))
                    keep = dict.fromkeys([idx[t] for t in top] + [i for i in idx if i in lex])
                    idx = list(keep)
            else:
                idx = list(
                    dict.fromkeys(coll.dense_top(qvec, depth) + coll.lexical_top(lex_query, depth))
                )
            cands += [coll.cands[i] for i in idx]
        if session_id and "session" in wanted and "history" not in wanted:
            cands = [c for c in cands if c.session_id == session_id or c.kind != "turn"]
        turns_coll = colls.get(C.turns(ns))

        def neighbors(turns: Sequence[Candidate]) -> list[Candidate]:
            if turns_coll is None:
                return []
            out: list[Candidate] = []
            for c in turns:
                if c.seq is None:
                    continue
                for d in (-1, 1):
                    j = turns_coll.by_pos.get((c.session_id, c.seq + d))
                    if j is not None:
                        out.append(turns_coll.cands[j])
            return out

        return plan_search(
            query=query,
            query_vector=qvec,
            candidates=cands,
            k=k,
            role=role,
            since=since,
            until=until,
            kind=kind,
            now_ms=now,
            lexical=lexical,
            terms_of=_terms_of(colls),
            neighbors=neighbors,
            config=self.config,
        )


def _passes(
    c: Candidate, role: str | None, since: int | None, until: int | None, kind: str | None
) -> bool:
    if role is not None and c.role != role:
        return False
    if kind is not None and c.kind != kind:
        return False
    if since is not None and (c.ts is None or c.ts < since):
        return False
    return not (until is not None and (c.ts is None or c.ts > until))


def _terms_of(colls: Mapping[str, _Coll]) -> Any:
    def terms_of(c: Candidate) -> Mapping[str, int]:
        coll = colls.get(c.collection)
        if coll is None or c.id not in coll.bm25:
            return {}
        return coll.bm25.doc_terms(c.id)

    return terms_of


def _authored_nodes(coll: _Coll, tier: int) -> list[AuthoredNode]:
    """Authored rules in authored order: by source document, then node ordinal."""

    def order(r: Record) -> tuple[str, int, str]:
        ordinal = _int(r.metadata.get("ordinal"))
        doc = _str(r.metadata.get("source_doc")) or r.id.rsplit("#", 1)[0]
        return (doc, ordinal if ordinal is not None else 0, r.id)

    out: list[AuthoredNode] = []
    for r in sorted(coll.records, key=order):
        text = r.text or _str(r.metadata.get("text"))
        if text.strip():
            out.append(AuthoredNode(r.id, text, tier, coll.name, metadata=r.metadata))
    return out


def _message_turns(
    messages: Sequence[Mapping[str, Any]], session_id: str, now: int
) -> list[Candidate]:
    """The host's current messages as session turns (the tail is taken from them)."""
    out: list[Candidate] = []
    n = len(messages)
    for i, m in enumerate(messages):
        try:
            text = message_text(m.get("content"))
        except TypeError:
            text = ""
        mid = m.get("id")
        tid = mid if isinstance(mid, str) and mid.strip() else f"msg:{i}"
        ts = _int(m.get("ts"))
        out.append(
            Candidate(
                kind="turn",
                collection=C.SESSION_PREFIX + session_id,
                id=tid,
                text=text,
                scope="session",
                turn_ids=(tid,),
                session_id=session_id,
                role=_str(m.get("role")),
                ts=ts if ts is not None else now - (n - i),
                seq=i,
            )
        )
    return out


def _drop_result(pending: set[asyncio.Future[Any]]) -> Any:
    def done(fut: asyncio.Future[Any]) -> None:
        pending.discard(fut)
        if not fut.cancelled():
            fut.exception()  # retrieve it: a failed access bump is not an error

    return done


def retrieval_for(app: App) -> Retrieval:
    """The App's retrieval component (created on first use)."""
    from sidecar.memory.service import MemoryService

    service = app.maybe_service(Retrieval)
    if service is None:
        service = Retrieval(app.service(MemoryService))
        app.provide(Retrieval, service)
    return service
