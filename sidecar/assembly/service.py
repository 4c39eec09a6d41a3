"""Candidate gathering for the ``assemble`` and ``search`` RPCs.

:class:`Retrieval` is the App component between the store and the pure planner
(:mod:`sidecar.assembly.plan`). Per ``assemble`` call it

1. starts embedding the query **once** (``kind="query"``) and, while the embedder runs,
   syncs the in-memory view of the collections the call reads (:class:`CollectionView`: records,
   unit vectors as one matrix, a :class:`~sidecar.memory.core.lexical.BM25Index`) and takes
   every scope's BM25 top-k of the query's content terms, the temporal plan, the authored
   rules and the session's turns (:meth:`Retrieval._prepare`: nothing there needs the
   vector);
2. builds the pool the way ``scripts/eval_locomo.py --inprocess`` does: for every scope,
   the exact dense top-k (a float32 product over the cached vectors, int8-prefiltered
   from 8,192 rows, :mod:`sidecar.engines.int8scan`; durable memories ranked through the
   history's scan, :class:`Twins`; from ``store.assemble_ann_rows`` records the store's
   ANN index instead) merged with the lexical top-k, each candidate with its vector;
3. calls :func:`~sidecar.assembly.plan.plan_assembly` (or ``plan_search``) with hooks
   for neighbour turns (``seq +- 1`` of ``turns:<ns>``), hop targets (authored variant by
   id), summary expansion (the summary's covered turns) and recovery (a deeper search of
   the raw history);
4. counts ``access_count`` bumps of the injected records (coalesced: ``access_bumps``).

**Caches.** One :class:`CollectionView` per collection name, in an LRU bounded by
:data:`MAX_COLLECTIONS` collections. Nothing is reloaded or rescanned per call while the
collection is unchanged: the BM25 index, the matrix and the candidates persist. A view
remembers the store's :class:`~sidecar.store.types.CollectionState` it was brought up to
date at (``StoreBackend.collection_states``, one call per request for every collection it
reads, taken before the records are read; any put, patch or delete of a record changes
it, in any process); an unchanged state costs nothing more. A changed one:

* only puts and patches since (the same collection, its ``removals`` counter unmoved): the
  view reads ``changed_since`` its state's ``max_seq`` and appends or rewrites just those
  records (matrix rows, BM25 postings, candidates), O(changes), on both backends and for
  any writer (this daemon's ingest, a v1 write, another daemon on a shared database);
* records removed (forget, deletes): the collection is read again, the BM25 index updated
  by diff; on a shared PostgreSQL store the records are listed without vectors and
  compared by ``seq``, and only the changed ones fetched (:meth:`CollectionView.refresh`);
* :meth:`Retrieval.invalidate` marks a view stale: it is read again on the next call.
  Stale marks are taken before the store is read (one arriving during a sync is kept).
  Not thread-safe otherwise: every call holds :attr:`Retrieval.lock`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from sidecar.assembly.access_bumps import AccessBumps
from sidecar.assembly.budget import BudgetConfig
from sidecar.assembly.cache import ANN_MIN_ROWS, CollectionView, SharedLexical
from sidecar.assembly.candidates import Candidate
from sidecar.assembly.heap import HeapSettler, paused
from sidecar.assembly.implicit_source import Densities, implicit_inputs
from sidecar.assembly.plan import PlanHead, SearchHit, plan_assembly, plan_head
from sidecar.assembly.render import RenderStyle, entry_overhead
from sidecar.assembly.scoring import F32
from sidecar.assembly.search import (
    DENSE_K,
    SearchRequest,
    collections_for,
    run_search,
    terms_lookup,
)
from sidecar.assembly.selection import AssemblyConfig, AssemblyPlan
from sidecar.assembly.speaker_focus import LabelVectors, named_in
from sidecar.assembly.view_budget import DEFAULT_MAX_BYTES, CacheFigures, evict
from sidecar.assembly.view_graph import GraphParams
from sidecar.assembly.view_inputs import Twins, authored_nodes, durable_top, message_turns
from sidecar.assembly.view_neighbours import graph_neighbours
from sidecar.engines.int8scan import Scan
from sidecar.memory.core import layout as C
from sidecar.memory.core.shared_locks import is_shared
from sidecar.store.types import CollectionState

if TYPE_CHECKING:
    from protocol.core import ComponentState
    from sidecar.memory.service import Address, MemoryService

log = structlog.get_logger(__name__)

MAX_COLLECTIONS = 512
LEXICAL_K = 50
SIDE_K = 20  # durable, global, authored variant, summaries, dream, elevated
RECOVER_K = 100
EMBED_HEAD_START = 2  # event-loop iterations given to the query embedding (see assemble)

#: v2 ``assemble`` writes compact entries (``[M3] user: TEXT``) under one line per day
#: (render module doc). Each item is charged its envelope (:func:`entry_overhead`: 4
#: tokens compact, 15 for the tagged styles); the day lines are not charged per entry
#: (that cost 0.7 points of LoCoMo recall): the rendered total is checked at the end and
#: the weakest items give way if the lines do not fit.
DAEMON_ASSEMBLY = AssemblyConfig(
    budget=BudgetConfig(entry_overhead_tokens=entry_overhead("compact")), render="compact"
)


@dataclass
class _Prepared:
    """What one ``assemble`` reads before the query vector is there (one cache sync)."""

    session_id: str
    ns: str
    query: str
    now: int
    colls: dict[str, CollectionView]
    lex_query: str
    lexical: SharedLexical
    lex: dict[str, list[int]]  # collection -> rows of its lexical top-k
    original: list[Any]  # the host's messages (copies)
    head: PlanHead  # plan steps 1-4: rules and the tail
    config: AssemblyConfig = DAEMON_ASSEMBLY
    prepare_ms: float = 0.0
    speakers: Sequence[str] = ()  # the history's speakers the query names
    # whether it names any (whatever the focus weight), and the history's most frequent
    # speakers, whose labels implicit recall takes out of the turn vectors
    names_speaker: bool = False
    labels: Sequence[str] = ()


class Retrieval:
    """The App component behind ``assemble`` and ``search`` (module doc)."""

    def __init__(
        self,
        memory: MemoryService,
        config: AssemblyConfig = DAEMON_ASSEMBLY,
        *,
        ann_min_rows: int = ANN_MIN_ROWS,
        graph: str = "auto",
        graph_params: GraphParams | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.memory = memory
        self.config = config
        self.ann_min_rows = ann_min_rows
        # in-process graphs for large views: "on" (as "auto"), or "off" (the store's own
        # index ranks them)
        self.graph = graph
        self.graph_params = graph_params or GraphParams()
        self.lock = asyncio.Lock()
        # the views' memory budget (view_budget.py) and the figures status shows
        self.figures = CacheFigures(max_bytes=max_bytes)
        self._colls: OrderedDict[str, CollectionView] = OrderedDict()
        self._bumps = AccessBumps(lambda updates: self.memory.store.increment(updates))
        # stale marks from the event loop, consumed by the sync in a worker thread
        self._marks_lock = threading.Lock()
        self._dirty: set[str] = set()  # collections to reload
        self._dirty_all = False
        self._twins: dict[str, Twins] = {}
        self._densities = Densities()  # implicit recall's, per raw history view
        self.heap = HeapSettler()  # keeps the collector's full passes off these caches
        self._ann_pool = ThreadPoolExecutor(1, thread_name_prefix="libravdb-ann")
        self._labels = LabelVectors(lambda texts: memory.embed(texts, "document"))

    # ---- invalidation ------------------------------------------------------------------

    def invalidate(self, name: str | None = None) -> None:
        """Mark one collection (all when None) stale: the next call reads it anew. Nothing
        needs it to see a change (the states do); it drops what a view holds."""
        with self._marks_lock:
            if name is None:
                self._dirty_all = True
            else:
                self._dirty.add(name)

    # ---- sync --------------------------------------------------------------------------

    def _take_marks(self) -> tuple[set[str], bool]:
        with self._marks_lock:
            out = (self._dirty, self._dirty_all)
            self._dirty, self._dirty_all = set(), False
        return out

    def _twin(self, name: str) -> CollectionView | None:
        """The loaded history view of a durable collection (same ids, mostly the same
        texts; ``_sync`` brings the history up to date first)."""
        if not name.startswith(C.USER_PREFIX):
            return None
        twin = self._colls.get(C.TURNS_PREFIX + name[len(C.USER_PREFIX) :])
        return twin if twin is not None and twin.state is not None and not twin.stale else None

    def _sync(self, names: Iterable[str], *, loads: bool = True) -> dict[str, CollectionView]:
        """Bring the named collections up to date (runs in a worker thread). ``loads``
        False: only views loaded already and behind by puts and patches alone; the others
        are left out.

        The stale marks and the collections' states are taken *before* the store is read,
        so a change that lands meanwhile is seen by the next call."""
        names = list(dict.fromkeys(names))
        dirty, dirty_all = self._take_marks()
        if dirty_all:
            for c in self._colls.values():
                c.stale = True
        for name in dirty:
            if name in self._colls:
                self._colls[name].stale = True
        store = self.memory.store.store
        shared = is_shared(store)
        states = store.collection_states(names)  # one read for every collection
        out: dict[str, CollectionView] = {}
        with paused():  # no collections while the caches grow (heap.py)
            for name in names:
                coll = self._colls.get(name)
                state = states.get(name, CollectionState())
                if not loads and (coll is None or _needs_load(coll, state, shared)):
                    continue
                if coll is None:
                    coll = CollectionView(name, self.ann_min_rows, self._graph_params())
                    self._colls[name] = coll
                self._colls.move_to_end(name)
                old = coll.state
                full = _needs_load(coll, state, shared)
                t0 = time.perf_counter()
                loaded = 0  # rows (re)loaded: the heap is settled after each view
                if full or old is None:  # never loaded, marked, or records were removed
                    loaded = coll.reload(store, state, twin=self._twin(name))
                elif state.unchanged_since(old):
                    pass
                elif state.appended_since(old):  # puts and patches only: O(changes)
                    loaded = coll.catch_up(store, state)
                else:  # removals, other daemons write too: compared record by record
                    loaded = coll.refresh(store, state)
                self.heap.loaded(loaded)
                fig = self.figures
                if full:
                    fig.loads += 1
                    fig.load_ms += (time.perf_counter() - t0) * 1000
                else:
                    fig.hits += 1
                out[name] = coll
        self._evict(out)
        return out

    def _evict(self, keep: Mapping[str, CollectionView]) -> None:
        """Views past :data:`MAX_COLLECTIONS` or the byte budget dropped (view_budget.py),
        never those of a namespace the request reads: a request for one of them (a search,
        ``debug.denseTop``) would drop the others, and alternate ones reload each other."""
        spaces = {C.namespace_of(name) for name in keep} - {None}
        held = {*keep, *(n for n in self._colls if C.namespace_of(n) in spaces)}
        for name in evict(self._colls, held, self.figures, MAX_COLLECTIONS):
            self._twins.pop(name, None)
            self._densities.drop(name)

    def _graph_params(self) -> GraphParams | None:
        # on both backends: int8 rows (view_graph.py) cost a third of the store's float32
        # graph, and a saved one (graph_file.py, both backends) spares a start building it
        return None if self.graph == "off" else self.graph_params

    async def neighbour_ids(
        self, name: str, vecs: F32, k: int, role: str | None
    ) -> list[list[str]] | None:
        """Ingest's candidate neighbours of ``vecs`` in ``name`` (``role``: of that role),
        from its loaded view's graph (view_neighbours.py); None when no such view answers
        (none is loaded for it: only one behind by puts and patches is brought up to date)."""
        held = self._colls.get(name)  # a look without the lock: small views never wait
        if held is None or held.dense_mode != "graph":
            return None
        async with self.lock:
            return await asyncio.to_thread(self._neighbour_ids_sync, name, vecs, k, role)

    def _neighbour_ids_sync(
        self, name: str, vecs: F32, k: int, role: str | None
    ) -> list[list[str]] | None:
        view = self._sync([name], loads=False).get(name)
        return None if view is None else graph_neighbours(view, vecs, k, role)

    async def embed_query(self, query: str) -> F32 | None:
        if not query.strip():
            return None
        vec = (await self.memory.embed([query], "query"))[0]
        n = float(np.linalg.norm(vec))
        return (vec / n).astype(np.float32) if n > 1e-12 else None

    # ---- assemble ----------------------------------------------------------------------

    async def assemble(  # noqa: PLR0913 - keyword-only options of one request
        self,
        *,
        who: Address,
        query: str,
        token_budget: float,
        memory_fraction: float,
        messages: Sequence[Mapping[str, Any]] | None,
        now_ms: int | None = None,
        tail_in_messages: bool | None = None,
        render: RenderStyle | None = None,
        explain: bool = False,
    ) -> tuple[AssemblyPlan, dict[str, float]]:
        """``tail_in_messages`` (default: when ``messages`` are given): the recent tail
        stays in the returned messages and is not rendered; otherwise it is rendered in
        the addition and removed from the returned messages. Either way no turn appears
        twice, and no message is recalled as a memory. ``render``: the entries' style
        (default: the configured one; "reference" gives the reference's bytes).
        ``explain``: list what was left out. ``who``: the session, maybe a namespace."""
        t0 = time.perf_counter()
        now = int(time.time() * 1000) if now_ms is None else now_ms
        # Before any work: a session of another namespace is refused (-32012) unembedded.
        namespace = await self.memory.session_namespace(who)
        embed_ms = 0.0

        async def embed() -> F32 | None:
            nonlocal embed_ms
            s = time.perf_counter()
            try:
                return await self.embed_query(query)
            finally:
                embed_ms = (time.perf_counter() - s) * 1000

        # The query is embedded while the caches are synced and the lexical side of the
        # pool is gathered (neither needs the vector).
        embedding = asyncio.ensure_future(embed())
        try:
            # Let the embedding reach its worker thread first (one loop iteration for the
            # task to queue the request, one for the batcher to dispatch it), so that the
            # worker tokenizes before the prepare thread holds the interpreter lock:
            # 0.2-0.6 ms less per call, measured side by side.
            for _ in range(EMBED_HEAD_START):
                await asyncio.sleep(0)
            async with self.lock:
                prep = await asyncio.to_thread(
                    self._prepare,
                    who.session_id or "",
                    namespace,
                    query,
                    now,
                    token_budget,
                    memory_fraction,
                    messages,
                    messages is not None if tail_in_messages is None else tail_in_messages,
                    self._config(render, explain),
                )
                w = prep.config.speaker_label_weight  # a named speaker's share taken out
                raw = await embedding
                qvec = await self._labels.focus(raw, prep.speakers, w)
                labels: dict[str, F32] = {}
                if prep.labels:  # implicit recall takes them out of the turn vectors
                    got = await self._labels.get(prep.labels)
                    labels = dict(zip(prep.labels, got, strict=True))
                t_vec = time.perf_counter()
                plan, gathered_ms = await asyncio.to_thread(
                    self._assemble_sync, prep, qvec, raw, labels
                )
        finally:
            if not embedding.done():
                embedding.cancel()
            elif not embedding.cancelled():
                embedding.exception()  # retrieved (raised above when it mattered)
        self._bumps.bump(plan, self._colls)
        t_end = time.perf_counter()
        timings = {
            "embedMs": embed_ms,
            "prepareMs": prep.prepare_ms,  # overlaps the embedding
            "waitMs": (t_vec - t0) * 1000,  # until both were done
            "gatherMs": gathered_ms,
            "totalMs": (t_end - t0) * 1000,
        }
        return plan, timings

    def _config(self, render: RenderStyle | None, explain: bool) -> AssemblyConfig:
        config = self.config
        if render is not None and render != config.render:
            # each style is charged its own entry envelope
            budget = replace(config.budget, entry_overhead_tokens=entry_overhead(render))
            config = replace(config, render=render, budget=budget)
        return replace(config, explain=True) if explain else config

    def _prepare(  # noqa: PLR0913 - one request's inputs, handed to a worker thread
        self,
        session_id: str,
        ns: str,
        query: str,
        now: int,
        token_budget: float,
        memory_fraction: float,
        messages: Sequence[Mapping[str, Any]] | None,
        tail_in_messages: bool,
        config: AssemblyConfig,
    ) -> _Prepared:
        """What does not need the query vector: synced caches, the lexical hits of every
        scope, the temporal plan, authored rules, the session's turns and the plan's
        steps 1-4 (rules and the tail)."""
        t0 = time.perf_counter()
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
        hard = authored_nodes(colls[C.AUTHORED_HARD], 1)
        soft = authored_nodes(colls[C.AUTHORED_SOFT], 2)
        session_turns = colls[C.session_raw(session_id)].session_turns()
        original: list[Any] = []
        present: list[Candidate] = []
        if messages is not None:
            session_turns = present = message_turns(messages, session_id, now, session_turns)
            original = [dict(m) for m in messages]
        head = plan_head(
            present=present,
            tail_in_addition=not (tail_in_messages and messages is not None),
            query=query,
            token_budget=token_budget,
            memory_fraction=memory_fraction,
            session_turns=session_turns,
            hard=hard,
            soft=soft,
            now_ms=now,
            config=config,
        )
        lex_query = head.plan.content_query or query
        lexical = SharedLexical()
        for name, coll in colls.items():
            lexical.attach(name, coll.bm25)
        lex: dict[str, list[int]] = {}
        for name, k in (
            (C.turns(ns), LEXICAL_K),
            (C.user(ns), SIDE_K),
            (C.session_summary(session_id), SIDE_K),
            (C.GLOBAL, SIDE_K),
            (C.AUTHORED_VARIANT, SIDE_K),
            (C.elevated_user(ns), SIDE_K),
            (C.elevated_session(session_id), SIDE_K),
            *([(C.dream(ns), SIDE_K)] if head.dream else []),
        ):
            lex[name] = colls[name].lexical_top(lex_query, k)
        return _Prepared(
            session_id=session_id,
            ns=ns,
            query=query,
            now=now,
            colls=colls,
            lex_query=lex_query,
            lexical=lexical,
            lex=lex,
            original=original,
            head=head,
            config=config,
            prepare_ms=(time.perf_counter() - t0) * 1000,
            speakers=named_in(query, colls[C.turns(ns)].speakers, config.speaker_label_weight),
            **implicit_inputs(config, query, colls[C.turns(ns)]),
        )

    def _gather(
        self, p: _Prepared, qvec: F32 | None
    ) -> tuple[list[Candidate], list[Candidate], Scan | None]:
        """The retrieval pool and the elevated candidates: per scope the exact dense top-k
        (one scan per collection; the durable memories are ranked through the history's
        scan) merged with the lexical top-k."""
        colls, ns, sid = p.colls, p.ns, p.session_id
        turns_coll = colls[C.turns(ns)]
        user_coll = colls[C.user(ns)]
        tscan = turns_coll.scan(qvec)

        def pick(name: str, dk: int, dense: list[int] | None = None) -> list[Candidate]:
            coll = colls[name]
            if dense is None:
                dense = coll.dense_top(qvec, dk)
            return coll.candidates(dict.fromkeys(dense + p.lex[name]))

        # two large collections: their ANN searches (store round trips on PostgreSQL) and
        # the reads of their candidates' metadata (lean rows: view_metas.py) run side by side
        uann = self._ann_pool.submit(pick, C.user(ns), SIDE_K) if user_coll.ann else None
        cands: list[Candidate] = pick(
            C.turns(ns), DENSE_K, turns_coll.dense_top(qvec, DENSE_K, tscan)
        )
        # a durable copy of a turn the raw history holds stands in as that raw turn: one
        # record per source (dedupe), and the pool's lexical normalisation is not skewed
        # by the small durable collection's BM25 statistics
        udense = (
            durable_top(self._twins, user_coll, turns_coll, qvec, tscan, SIDE_K)
            if qvec is not None and tscan is not None and user_coll.records and uann is None
            else None  # ranked on its own: exactly, or by the store's ANN index when large
        )
        seen = {c.key for c in cands}
        durable = uann.result() if uann is not None else pick(C.user(ns), SIDE_K, udense)
        twins = [
            turns_coll.by_id.get(C.namespace_turn_id(c.session_id, c.turn_ids[0]))
            if c.turn_ids
            else None
            for c in durable
        ]
        twin_cands = iter(turns_coll.candidates(j for j in twins if j is not None))
        for c, j in zip(durable, twins, strict=True):
            d = next(twin_cands) if j is not None else c
            if d.key not in seen:
                seen.add(d.key)
                cands.append(d)
        for name in (C.session_summary(sid), C.GLOBAL, C.AUTHORED_VARIANT):
            cands += pick(name, SIDE_K)
        if p.head.dream:
            cands += pick(C.dream(ns), SIDE_K)
        elevated = pick(C.elevated_user(ns), SIDE_K) + pick(C.elevated_session(sid), SIDE_K)
        return cands, elevated, tscan

    def _assemble_sync(
        self, p: _Prepared, qvec: F32 | None, raw: F32 | None, labels: Mapping[str, F32]
    ) -> tuple[AssemblyPlan, float]:
        t0 = time.perf_counter()
        session_id, ns, now = p.session_id, p.ns, p.now
        candidates, elevated, tscan = self._gather(p, qvec)
        implicit = self._densities.pool(
            p.config.implicit, p.colls[C.turns(ns)], p.names_speaker, bool(p.labels),
            raw, labels, tscan, raw is qvec, candidates,
        )  # fmt: skip
        turns_coll = p.colls[C.turns(ns)]
        variant = p.colls[C.AUTHORED_VARIANT]
        gathered_ms = (time.perf_counter() - t0) * 1000

        def hops(ids: Sequence[str]) -> list[Candidate]:
            return variant.candidates(variant.by_id[i] for i in ids if i in variant.by_id)

        def expand(summary_id: str) -> list[Candidate]:
            summ = p.colls[C.session_summary(session_id)]
            j = summ.by_id.get(summary_id)
            if j is None:
                return []
            s = summ.cands[j]
            ks = [turns_coll.by_id.get(C.namespace_turn_id(s.session_id, t)) for t in s.turn_ids]
            out = turns_coll.candidates(k for k in ks if k is not None)
            return sorted(out, key=lambda c: c.seq or 0)

        def recover() -> list[Candidate]:
            idx = dict.fromkeys(
                turns_coll.dense_top(qvec, RECOVER_K, tscan)
                + turns_coll.lexical_top(p.lex_query, RECOVER_K)
            )
            return turns_coll.candidates(idx)

        plan = plan_assembly(
            query=p.query,
            query_vector=qvec,
            session_id=session_id,
            head=p.head,
            elevated=elevated,
            candidates=candidates,
            original_messages=p.original,
            now_ms=now,
            lexical=p.lexical,
            terms_of=terms_lookup(p.colls),
            neighbors=turns_coll.neighbours,
            hops=hops,
            expand=expand,
            recover=recover,
            config=p.config,
            implicit=implicit,
        )
        return plan, gathered_ms

    async def flush_bumps(self) -> None:
        """Write the pending access-count bumps now (:mod:`access_bumps`)."""
        await self._bumps.flush()

    # ---- component ---------------------------------------------------------------------

    name = "retrieval"

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        """Flush the access-count bumps and stop listening (before the store closes)."""
        await self._bumps.close()
        self._ann_pool.shutdown(wait=False)
        for view in self._colls.values():
            view.close()

    def states(self) -> dict[str, ComponentState]:
        return {}

    async def counts(self) -> dict[str, int]:
        return {}

    # ---- search ------------------------------------------------------------------------

    async def search_as(self, who: Address, req: Callable[[str], SearchRequest]) -> list[SearchHit]:
        """``search`` in the namespace ``who`` works in: ``req`` builds it once known."""
        return await self.search(req(await self.memory.namespace_of(who)))

    async def search(self, req: SearchRequest) -> list[SearchHit]:
        qvec = await self.embed_query(req.query)
        async with self.lock:
            return await asyncio.to_thread(self._search_sync, req, qvec)

    def _search_sync(self, req: SearchRequest, qvec: F32 | None) -> list[SearchHit]:
        return run_search(req, qvec, self._sync(collections_for(req)), self.config)

    # ---- diagnostics -------------------------------------------------------------------

    async def dense_probe(self, collection: str, query: str, k: int) -> DenseProbe:
        """The dense top ``k`` ids of one collection as ``assemble`` ranks them (the
        view's scan, in-process graph or store index), for recall checks."""
        qvec = await self.embed_query(query)
        async with self.lock:
            return await asyncio.to_thread(self._dense_probe_sync, collection, qvec, k)

    def _dense_probe_sync(self, collection: str, qvec: F32 | None, k: int) -> DenseProbe:
        view = self._sync([collection])[collection]
        rows = view.dense_top(qvec, k)
        graph = view.graph
        return DenseProbe(
            ids=[view.ids[i] for i in rows],
            mode=view.dense_mode,
            graph_state=graph.state if graph is not None else "none",
            graph_rows=graph.built_rows if graph is not None else 0,
            rows=len(view.rows),
        )


def _needs_load(coll: CollectionView, state: CollectionState, shared: bool) -> bool:
    """Whether ``coll`` must be read anew to reach ``state``: never loaded, marked stale,
    or records removed since (in a store only this daemon writes)."""
    old = coll.state
    return (
        old is None
        or coll.stale
        or not (state.unchanged_since(old) or state.appended_since(old) or shared)
    )


@dataclass(frozen=True, slots=True)
class DenseProbe:
    ids: list[str]
    mode: str  # exact | graph | store
    graph_state: str  # none | building | ready | skipped | failed | closed
    graph_rows: int  # rows the graph's build has inserted
    rows: int  # the view's rows
