"""The in-memory view of the collections ``assemble`` and ``search`` read.

**Caches.** One :class:`CollectionView` per collection name (records, unit vectors as one
matrix, a :class:`~sidecar.memory.core.lexical.BM25Index`, candidates), held by
:class:`~sidecar.assembly.service.Retrieval` in an LRU. Nothing is reloaded or rescanned
per call while the store's :class:`~sidecar.store.types.CollectionState` of the collection
is unchanged. Changes (the ``Retrieval`` module doc says which path a change takes):

* :meth:`CollectionView.catch_up` brings in the records put or patched since the state the
  view holds (``StoreBackend.changed_since``, O(changes)) when nothing was removed;
* :meth:`CollectionView.reload` reads the collection again; the BM25 index is updated by
  diff (removed ids out, new or changed ids in);
* :meth:`CollectionView.refresh` (records were removed from a store other daemons write
  too) compares the records by ``seq`` and fetches only the changed ones with their
  vectors.

:class:`Twins` maps durable memories to their copies in the raw history, so the durable
scope is ranked through the history's int8 scan. :func:`authored_nodes` and
:func:`message_turns` turn cached records and the host's messages into planner input.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import Candidate, text_label
from sidecar.assembly.scoring import F32
from sidecar.assembly.view_graph import GraphParams, ViewGraph
from sidecar.engines import int8scan
from sidecar.engines.int8scan import Int8Rows, Scan
from sidecar.memory.core import layout as C
from sidecar.memory.core.lexical import BM25Index, LexicalIndex
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState, Record

TOUCHED_MAX = 100_000  # ids logged by incremental updates before a forced rebuild
#: From this many records a collection's dense candidates come from the store's ANN index
#: (hnswlib on SQLite, pgvector HNSW on PostgreSQL) instead of a scan of every cached
#: vector: the int8-prefiltered scan costs 18 ms per query at 100k rows and grows with
#: the collection, an HNSW search about 1 ms and grows with its logarithm. Below it the
#: scan is exact and cheap. (LoCoMo conversations are far below it: no recall figure of
#: ``make eval`` depends on the index.)
ANN_MIN_ROWS = 100_000

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


def _lineage(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """A summary's lineage fields: the ``continuity_lineage`` block over the top level."""
    block = meta.get("continuity_lineage")
    return {**meta, **block} if isinstance(block, dict) else meta


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


class SharedLexical(LexicalIndex):
    """A :class:`LexicalIndex` view over the cached per-collection BM25 indexes."""

    def attach(self, name: str, index: BM25Index) -> None:
        self._indexes[name] = index


@dataclass
class CollectionView:
    """The in-memory view of one collection.

    Rows (``records``, ``cands``, the unit-vector ``matrix``) only ever grow at the end
    between full reloads: an incremental :meth:`catch_up` appends new ids and rewrites
    changed rows in place. ``state`` is the store's state of the collection read before the
    view was last brought up to date (None: never loaded). ``gen`` counts every change,
    ``reloads`` the full reloads and ``stamp`` is unique per row layout (process-wide: a
    new layout, also of an evicted and re-created view, never repeats an old stamp);
    ``touched`` logs the ids changed incrementally since the last full reload (read by
    derived structures such as the durable->history twin map).
    """

    name: str
    ann_min_rows: int = ANN_MIN_ROWS  # from this many records: the store's ANN index
    # large views only: an in-process graph over the matrix ranks them once it is built
    # (view_graph.py); None: the store's index answers every search
    graph_params: GraphParams | None = None
    state: CollectionState | None = None
    stale: bool = True
    records: list[Record] = field(default_factory=list)
    by_id: dict[str, int] = field(default_factory=dict)
    bm25: BM25Index = field(default_factory=BM25Index)
    cands: list[Candidate] = field(default_factory=list)
    by_pos: dict[tuple[str, int], int] = field(default_factory=dict)
    gen: int = 0
    reloads: int = 0
    stamp: int = -1
    touched: list[str] = field(default_factory=list)
    _mat: F32 | None = None  # capacity rows; the first len(records) are live
    _shadow: Int8Rows | None = None  # int8 copy of the live rows (large collections)
    _turns: list[Candidate] | None = None  # chronological turns, cached
    _speakers: Counter[str] | None = None  # speaker -> records, counted on first use
    _top_speakers: list[str] | None = None  # the most frequent of them, cached
    # the store whose ANN index ranks this collection (ANN_MIN_ROWS records and more)
    _ann: StoreBackend | None = None
    _graph: ViewGraph | None = None  # over this layout's rows (large views, graph_params)

    @property
    def ann(self) -> bool:
        """Whether dense candidates come from the store's ANN index."""
        return self._ann is not None

    @property
    def dense_mode(self) -> str:
        """How :meth:`dense_top` ranks: ``exact`` (a scan of the cached vectors),
        ``graph`` (the in-process graph) or ``store`` (the store's ANN index, also while
        the graph is built)."""
        if self._ann is None:
            return "exact"
        return "graph" if self._graph is not None and self._graph.ready else "store"

    @property
    def scan_shadow(self) -> bool:
        """Whether the view keeps an int8 copy of its rows for the scan."""
        return self._shadow is not None

    @property
    def graph(self) -> ViewGraph | None:
        return self._graph

    def close(self) -> None:
        """Stop and drop the in-process graph (the view is evicted or the daemon stops)."""
        if self._graph is not None:
            self._graph.close()
            self._graph = None

    @property
    def matrix(self) -> F32 | None:
        """Unit rows, one per record (zero rows for vectorless records)."""
        return None if self._mat is None else self._mat[: len(self.records)]

    # ---- loading -----------------------------------------------------------------------

    def reload(
        self,
        store: StoreBackend,
        state: CollectionState,
        recs: list[Record] | None = None,
        *,
        twin: CollectionView | None = None,
    ) -> int:
        """Load every record anew (or take ``recs``, with vectors) at ``state`` (read before
        the records); returns how many. ``twin``: a loaded view whose records share ids and
        texts with many of these (the history beside the durable memories): a record with
        its twin's text takes the twin's analyzed terms instead of analyzing them again."""
        dims = store.embed_dims
        if recs is None:  # paged: one page of vectors at a time, straight into the matrix
            recs, mat = _read_rows(store, self.name, state.count)
        else:
            mat = np.zeros((_capacity(len(recs)), dims), dtype=np.float32)
            for i, r in enumerate(recs):
                mat[i] = _unit(r.vector, dims)
                r.vector = None  # the matrix holds it (half the memory of a large view)
        old = {r.id: r.text for r in self.records}
        new = {r.id: r.text for r in recs}
        for rid, text in old.items():
            if new.get(rid) != text:
                self.bm25.remove(rid)
        shared = _shared_terms(self.bm25, twin)
        analyze = self.bm25.analyze
        self.bm25.add_bulk(
            (
                (rid, slot if (slot := shared(rid, text)) is not None else Counter(analyze(text)))
                for rid, text in new.items()
                if old.get(rid) != text
            ),
            twin.bm25 if twin is not None else None,
        )
        self.bm25.warm()  # a large index: the first queries do not weigh its common terms
        self.records = recs
        self.by_id = {r.id: i for i, r in enumerate(recs)}
        self._mat = mat
        self._ann = store if len(recs) >= self.ann_min_rows else None
        self._restart_graph(dims)
        self._shadow = None
        self._sync_shadow(0)
        nonzero: list[bool] = np.any(mat[: len(recs)], axis=1).tolist()
        self.cands = [self._candidate(r, mat[i], nonzero[i]) for i, r in enumerate(recs)]
        self.by_pos = {}
        for i, c in enumerate(self.cands):
            if c.kind == "turn" and c.seq is not None:
                self.by_pos[(c.session_id, c.seq)] = i
        self._resolve_summaries()
        self.state, self.stale = state, False
        self.gen += 1
        self.reloads += 1
        self.stamp = next(_STAMPS)
        self.touched = []
        self._turns = None
        self._speakers = self._top_speakers = None
        return len(recs)

    def catch_up(self, store: StoreBackend, state: CollectionState) -> int:
        """Bring in what was put or patched since :attr:`state` when nothing was removed
        since (``state.appended_since``): the records of ``changed_since`` are appended
        or rewritten in place, the rest stays. Returns how many rows were (re)loaded.

        ``changed_since`` may also return records written after ``state`` was read; they
        are taken too (and read again next time, harmlessly). A removal after it shows in
        the next state's ``removals``."""
        assert self.state is not None and self._mat is not None  # loaded: reload set both
        recs = store.changed_since(self.name, self.state.max_seq, include_vectors=True)
        self._upsert(store, recs)
        if len(self.records) < state.count:  # cannot happen without a removal: be safe
            return self.reload(store, state)
        self.state, self.stale = state, False
        return len(recs)

    def _upsert(self, store: StoreBackend, recs: Sequence[Record]) -> None:
        """Append the records of new ids, rewrite the rows of known ones (with vectors)."""
        assert self._mat is not None
        if not recs:
            return
        added = sum(1 for r in recs if r.id not in self.by_id)
        dims = store.embed_dims
        n = len(self.records)
        if n + added > self._mat.shape[0]:
            self._grow(n + added, dims)
        summaries = False
        replaced: list[int] = []
        for r in recs:
            i = self.by_id.get(r.id)
            if i is None:
                i = len(self.records)
                self.records.append(r)
                self.by_id[r.id] = i
                self._mat[i] = _unit(r.vector, dims)
                r.vector = None
                self.cands.append(self._candidate(r, self._mat[i]))
                self.bm25.add(r.id, r.text)
                self._count_speaker(self.cands[i], 1)
            else:
                replaced.append(i)
                old = self.cands[i]
                pos = (old.session_id, old.seq) if old.seq is not None else None
                if old.kind == "turn" and pos is not None and self.by_pos.get(pos) == i:
                    del self.by_pos[pos]
                if self.records[i].text != r.text:
                    self.bm25.add(r.id, r.text)  # replaces the earlier version
                self.records[i] = r
                self._mat[i] = _unit(r.vector, dims)
                r.vector = None
                self._count_speaker(old, -1)
                self.cands[i] = self._candidate(r, self._mat[i])
                self._count_speaker(self.cands[i], 1)
            c = self.cands[i]
            if c.kind == "turn" and c.seq is not None:
                self.by_pos[(c.session_id, c.seq)] = i
            summaries = summaries or c.kind == "summary"
        if summaries:
            self._resolve_summaries()
        if self._ann is None and len(self.records) >= self.ann_min_rows:
            self._ann = store
            self._restart_graph(dims)
        elif self._graph is not None:
            self._graph.note(itertools.chain(replaced, range(n, len(self.records))))
        self._sync_shadow(n, replaced)
        self.gen += 1
        self.touched.extend(r.id for r in recs)
        if len(self.touched) > TOUCHED_MAX:  # derived structures rebuild from scratch
            self.touched = []
            self.stamp = next(_STAMPS)
        self._turns = None

    def refresh(self, store: StoreBackend, state: CollectionState) -> int:
        """Bring the view in step with a collection records were removed from, in a store
        other processes write too (a shared PostgreSQL store): the records are listed
        without vectors and compared by ``seq`` (which every put or patch renews, a delete
        and re-put included); only the changed ones are fetched with their vectors.
        Returns how many rows were (re)loaded."""
        assert self._mat is not None  # only a loaded view is refreshed
        listed = store.list_records(self.name)
        cached = {r.id: r for r in self.records}
        changed = [r.id for r in listed if (c := cached.get(r.id)) is None or c.seq != r.seq]
        if len(listed) - sum(1 for i in changed if i not in cached) == len(cached):
            # nothing removed after all (re-created at the same records, or listed late)
            self._upsert(store, store.get_many(self.name, changed, include_vectors=True))
            self.state, self.stale = state, False
            return len(changed)
        # removals change the row layout: rebuilt, with the cached vectors of the records
        # that did not change
        fresh = {r.id: r for r in store.get_many(self.name, changed, include_vectors=True)}
        redo = set(changed)
        recs: list[Record] = []
        for r in listed:
            if r.id not in redo:  # its vector is the cached row (the records drop theirs)
                recs.append(replace(cached[r.id], vector=self._mat[self.by_id[r.id]].copy()))
            elif r.id in fresh:  # else deleted since it was listed
                recs.append(fresh[r.id])
        return self.reload(store, state, recs)

    def _restart_graph(self, dims: int) -> None:
        """A new in-process graph over the current rows (a large view with graph params),
        built in the background; the old one, over another layout, is dropped."""
        self.close()
        if self._ann is not None and self.graph_params is not None and self._mat is not None:
            self._graph = ViewGraph(self.name, dims, self.graph_params)
            self._graph.start(self._mat, len(self.records))

    def _grow(self, rows: int, dims: int) -> None:
        """A larger matrix; candidates are re-pointed at its rows (no stale views)."""
        assert self._mat is not None
        n = len(self.records)
        mat = np.zeros((_capacity(rows), dims), dtype=np.float32)
        mat[:n] = self._mat[:n]
        self._mat = mat
        self.cands = [
            c if c.vector is None else replace(c, vector=mat[i]) for i, c in enumerate(self.cands)
        ]

    def _candidate(self, r: Record, vec: F32, has_vector: bool | None = None) -> Candidate:
        """The candidate of a record whose unit vector is ``vec`` (``has_vector``: whether
        it is not all zeros, when the caller knows)."""
        scope, kind = scope_of(self.name)
        meta = r.metadata
        if meta.get("type") == C.TYPE_SUMMARY:
            kind = "summary"
        sid = _str(meta.get("sessionId")) or (C.session_id_of(self.name) or "")
        src = _str(meta.get("source_turn_id"))
        if kind == "turn":
            turn_ids: tuple[str, ...] = (src or r.id,)
        elif kind == "summary":
            # The lineage block holds the covered turns (the top level keeps the reference's
            # summary shape); parents are resolved transitively in _resolve_summaries.
            lineage = _lineage(meta)
            turn_ids = tuple(x for x in lineage.get("source_turn_ids", ()) if isinstance(x, str))
        else:
            turn_ids = (src,) if src else ()
        # A summary's time is the latest event it covers, not when it was compacted.
        ts = _int(meta.get("source_ts_max")) if kind == "summary" else None
        ts = ts if ts is not None else _int(meta.get("ts"))
        text = r.text or _str(meta.get("text"))
        return Candidate(
            kind=kind,
            collection=self.name,
            id=r.id,
            text=text,
            scope=scope,
            turn_ids=turn_ids,
            session_id=sid,
            role=_str(meta.get("role")),
            ts=ts if ts is not None else (r.ts_ms or None),
            seq=_int(meta.get("seq")),
            vector=vec if (bool(np.any(vec)) if has_vector is None else has_vector) else None,
            tokens=estimate_tokens(text),
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
                for p in _lineage(c.metadata).get("parent_summary_ids", ()) or ():
                    j = self.by_id.get(p) if isinstance(p, str) else None
                    if j is not None:
                        ids.extend(covered(j, depth + 1))
            memo[c.id] = tuple(dict.fromkeys(ids))
            return memo[c.id]

        for i, c in enumerate(self.cands):
            if c.kind == "summary":
                t = covered(i)
                if t != c.turn_ids:
                    self.cands[i] = replace(c, turn_ids=t)

    def _sync_shadow(self, first_new: int, replaced: Sequence[int] = ()) -> None:
        """Bring the int8 shadow in step after rows ``first_new..`` were appended and
        ``replaced`` rewritten; create it when the collection reaches
        :data:`~sidecar.engines.int8scan.MIN_ROWS` rows."""
        mat, n = self._mat, len(self.records)
        if mat is None or n < int8scan.MIN_ROWS or self._ann is not None:  # no scan
            self._shadow = None
            return
        if self._shadow is None:
            self._shadow = Int8Rows(mat.shape[1])
            self._shadow.assign(mat[:n])
            return
        for i in replaced:
            self._shadow.set_rows(i, mat[i : i + 1])
        self._shadow.set_rows(first_new, mat[first_new:n])

    # ---- queries -----------------------------------------------------------------------

    def scan(self, qvec: F32 | None) -> Scan | None:
        """The query against every row (exact top-k; int8-prefiltered when large); None
        for a collection ranked by the store's ANN index (:attr:`ann`)."""
        mat = self.matrix
        if qvec is None or mat is None or not len(self.records) or self._ann is not None:
            return None
        return Scan(mat, qvec, self._shadow)

    def dense_top(self, qvec: F32 | None, k: int, scan: Scan | None = None) -> list[int]:
        """Rows of the dense top ``k``, best first: exact (``scan``: this collection's
        :meth:`scan`, when the caller has it already), or from the store's ANN index for a
        large collection (hits the view does not hold yet, written since it was synced,
        are left for the next sync)."""
        if self._ann is not None:
            if qvec is None or k <= 0:
                return []
            if self._graph is not None and self._mat is not None:
                found = self._graph.search(self._mat, qvec, k)
                if found is not None:
                    return positive_rows(found[0], found[1], False)
            hits = self._ann.search(self.name, qvec, k)
            return [i for h in hits if h.score > 0.0 and (i := self.by_id.get(h.id)) is not None]
        if scan is None:
            scan = self.scan(qvec)
        if scan is None or k <= 0:
            return []
        rows, sims = scan.top(k)
        return positive_rows(rows, sims, k >= len(scan))

    def lexical_top(self, terms_query: str, k: int) -> list[int]:
        if k <= 0 or not len(self.bm25):
            return []
        return [self.by_id[i] for i, _ in self.bm25.search(terms_query, k) if i in self.by_id]

    def neighbours(self, turns: Sequence[Candidate]) -> list[Candidate]:
        """The turns just before and after each of ``turns`` in their session (the
        question before an answer, the answer after a question)."""
        out: list[Candidate] = []
        for c in turns:
            if c.seq is None:
                continue
            for d in (-1, 1):
                j = self.by_pos.get((c.session_id, c.seq + d))
                if j is not None:
                    out.append(self.cands[j])
        return out

    def speakers(self, limit: int) -> list[str]:
        """The ``limit`` most frequent speakers whose label starts a record's text
        (:func:`text_label`), counted on first use and kept up to date by :meth:`catch_up`."""
        if self._speakers is None:
            self._speakers = Counter(s for c in self.cands if (s := text_label(c.text)))
        if self._top_speakers is None or len(self._top_speakers) < min(limit, len(self._speakers)):
            self._top_speakers = [s for s, _ in self._speakers.most_common(limit)]
        return self._top_speakers[:limit]

    def _count_speaker(self, c: Candidate, step: int) -> None:
        if self._speakers is None or not (s := text_label(c.text)):
            return
        self._speakers[s] += step
        if self._speakers[s] <= 0:
            del self._speakers[s]
        self._top_speakers = None

    def session_turns(self) -> list[Candidate]:
        """The collection's turns in session order (cached until it changes)."""
        if self._turns is None:
            self._turns = sorted(
                (c for c in self.cands if c.kind == "turn"),
                key=lambda c: (c.seq if c.seq is not None else 0, c.ts or 0),
            )
        return self._turns


def _shared_terms(
    index: BM25Index, twin: CollectionView | None
) -> Callable[[str, str], int | None]:
    """A lookup of the slot of ``twin``'s BM25 index that holds an id with the same text
    (None: analyze), when both indexes analyze alike: its terms are copied instead of
    analyzed again (``BM25Index.add_bulk``)."""
    if twin is None or not twin.bm25.analyzes_like(index):
        return lambda _rid, _text: None
    by_id, records, bm25 = twin.by_id, twin.records, twin.bm25

    def lookup(rid: str, text: str) -> int | None:
        j = by_id.get(rid)
        if j is None or records[j].text != text:
            return None
        return bm25.slot(rid)

    return lookup


_STAMPS = itertools.count()


def positive_rows(rows: npt.NDArray[np.int64], sims: F32, keep_all: bool) -> list[int]:
    """``rows`` (ranked) without those of cosine <= 0, unless ``keep_all``."""
    if keep_all:
        return [int(i) for i in rows.tolist()]
    return [int(i) for i, s in zip(rows.tolist(), sims.tolist(), strict=True) if s > 0.0]


#: Records read per page when a view is loaded: their vectors go into the matrix page by
#: page, so a load never holds every record's vector twice (the store's rows and the
#: matrix; 300 MB more peak memory at 100k records before it was paged).
READ_PAGE = 2048


def _read_rows(store: StoreBackend, name: str, count: int) -> tuple[list[Record], F32]:
    """Every record of ``name`` (in id order, as ``list_records``) and the matrix of their
    unit vectors (the records keep none), read page by page."""
    dims = store.embed_dims
    mat = np.zeros((_capacity(count), dims), dtype=np.float32)
    recs: list[Record] = []
    for r in store.iter_records(name, include_vectors=True, batch=READ_PAGE):
        i = len(recs)
        if i >= mat.shape[0]:  # written since the state was read
            bigger = np.zeros((_capacity(i + 1), dims), dtype=np.float32)
            bigger[:i] = mat[:i]
            mat = bigger
        mat[i] = _unit(r.vector, dims)
        r.vector = None  # the matrix holds it (half the memory of a large view)
        recs.append(r)
    return recs, mat


def _capacity(rows: int) -> int:
    return max(16, rows + rows // 4)


def _unit(vector: Any, dims: int) -> F32:
    out = np.zeros(dims, dtype=np.float32)
    if vector is not None:
        v = np.asarray(vector, dtype=np.float32).reshape(-1)
        if v.shape[0] == dims:
            n = float(np.linalg.norm(v))
            if n > 1e-12:
                out[:] = v / n
    return out
