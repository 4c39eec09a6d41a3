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

``view_inputs.py`` reads planner input from these views (the durable->history twins,
authored nodes, the host's messages).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from sidecar.assembly import graph_file, view_snapshot, view_terms
from sidecar.assembly.candidates import Candidate, text_label
from sidecar.assembly.density import SavedDensity
from sidecar.assembly.scoring import F32
from sidecar.assembly.view_graph import GraphParams, ViewGraph
from sidecar.assembly.view_load import load_rows, read_rows, unit, with_room
from sidecar.assembly.view_matrix import dtype_for, full, positive_rows, settled
from sidecar.assembly.view_metas import LeanMetas
from sidecar.assembly.view_rows import (
    FULL,
    HALF,
    NONE,
    SUMMARY,
    TURN,
    CandidateRows,
    Matrix,
    RecordRows,
    ViewRows,
    candidate_of,
    lineage,
    row_fields,
)
from sidecar.assembly.view_rows import scope_of as scope_of  # where callers import it
from sidecar.assembly.view_snapshot import Bases

if TYPE_CHECKING:
    from sidecar.assembly.density import Density
from sidecar.assembly.view_terms import SAVE_MIN_ANALYZED
from sidecar.engines import int8scan
from sidecar.engines.int8scan import Int8Rows, Scan
from sidecar.memory.core.lexical import BM25Index
from sidecar.memory.core.lexical_index import LexicalIndex
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState, Record
from sidecar.store.view_place import ViewPlace

TOUCHED_MAX = 100_000  # ids logged by incremental updates before a forced rebuild
#: From this many records a collection's dense candidates come from the store's ANN index
#: (hnswlib on SQLite, pgvector HNSW on PostgreSQL) instead of a scan of every cached
#: vector: the int8-prefiltered scan costs 18 ms per query at 100k rows and grows with
#: the collection, an HNSW search about 1 ms and grows with its logarithm. Below it the
#: scan is exact and cheap. (LoCoMo conversations are far below it: no recall figure of
#: ``make eval`` depends on the index.)
ANN_MIN_ROWS = 100_000


class SharedLexical(LexicalIndex):
    """A :class:`LexicalIndex` view over the cached per-collection BM25 indexes."""

    def attach(self, name: str, index: BM25Index) -> None:
        self._indexes[name] = index


@dataclass
class CollectionView:
    """The in-memory view of one collection.

    Rows (``rows``: :class:`~sidecar.assembly.view_rows.ViewRows`, the unit-vector
    ``matrix``) only ever grow at the end between full reloads: an incremental
    :meth:`catch_up` appends new ids and rewrites changed rows in place. ``records`` and
    ``cands`` read the rows as records and candidates; a row's candidate is built on first
    use and kept (``_made``) until the row changes or :meth:`trim` drops the built ones
    between requests. ``state`` is the store's state of the collection read before the
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
    rows: ViewRows = field(default_factory=ViewRows)
    by_id: dict[str, int] = field(default_factory=dict)
    bm25: BM25Index = field(default_factory=BM25Index)
    by_pos: dict[tuple[str, int], int] = field(default_factory=dict)
    gen: int = 0
    reloads: int = 0
    stamp: int = -1
    touched: list[str] = field(default_factory=list)
    analyzed: int = 0  # texts the last full load analyzed (not saved, not a twin's copy)
    _mat: Matrix | None = None  # capacity rows; the first len(rows) are live
    _shadow: Int8Rows | None = None  # int8 copy of the live rows (large collections)
    _made: dict[int, Candidate] = field(default_factory=dict)  # candidates built, by row
    _metas: LeanMetas = field(default_factory=LeanMetas)  # lean rows' metadata (the store)
    # summaries' covered turns with their parents' (resolved transitively), by row
    _covered: dict[int, tuple[str, ...]] = field(default_factory=dict)
    _turns: list[Candidate] | None = None  # chronological turns, cached
    _speakers: Counter[str] | None = None  # speaker -> records, counted on first use
    _top_speakers: list[str] | None = None  # the most frequent of them, cached
    _ann: StoreBackend | None = None  # the store whose ANN index ranks it (ann_min_rows on)
    _graph: ViewGraph | None = None  # over this layout's rows (large views, graph_params)
    layout: str = ""  # the rows' layout token: which saved graph labels them (graph_file.py)
    layout_bases: Bases = ()  # the layouts its first rows are (a database's saved view)
    _unsaved: int = 0  # texts analyzed since the terms were last saved (view_terms.py)
    _saving: threading.Thread | None = None  # the save of the terms running
    snapshot_min_rows: int = view_snapshot.MIN_ROWS  # rows saved from this many
    _file: view_snapshot.RowsFile | None = None
    restored: int = 0  # rows the last full load took from the file
    saved_density: SavedDensity | None = None  # the file's, until the density is synced
    _rows_place: ViewPlace | None = None  # where the rows are saved (None: nowhere)

    @property
    def ids(self) -> list[str]:
        """The records' ids, by row."""
        return self.rows.ids

    @property
    def records(self) -> RecordRows:
        """The rows as the store's records (each built when read; no vectors)."""
        return RecordRows(self)

    @property
    def cands(self) -> CandidateRows:
        """The rows as candidates (built on first use, then kept: the same object)."""
        return CandidateRows(self)

    @property
    def made(self) -> int:
        """How many rows' candidates are built and kept."""
        return len(self._made)

    def candidate(self, i: int) -> Candidate:
        """Row ``i``'s candidate (the same object until the row changes or :meth:`trim`)."""
        c = self._made.get(i)
        if c is None:
            c = self._made[i] = self._make(i)
        return c

    def built(self, i: int) -> Candidate | None:
        """Row ``i``'s candidate when it is built (nothing is read or built)."""
        return self._made.get(i)

    def candidates(self, rows: Iterable[int]) -> list[Candidate]:
        """The candidates of ``rows``; lean rows read the metadata of those not built yet
        with one query (view_metas.py)."""
        rows = list(rows)
        self._metas.prefetch(self.name, self.rows, (i for i in rows if i not in self._made))
        out = [self.candidate(i) for i in rows]
        self._metas.clear()
        return out

    def record(self, i: int) -> Record:
        """Row ``i``'s record, without its vector (lean rows: metadata from the store)."""
        rows = self.rows
        meta = self._metas.take(self.name, rows, i) if rows.lean else None
        return rows.record(self.name, i, meta)

    def _make(self, i: int, resolved: bool = True) -> Candidate:
        assert self._mat is not None  # rows exist only in a loaded view
        rec = self.record(i)
        c = candidate_of(self.name, rec, full(self._mat[i]), bool(self.rows.has_vector[i]))
        covered = self._covered.get(i) if resolved else None
        return c if covered is None else replace(c, turn_ids=covered)

    def trim(self, keep: int) -> bool:
        """Drop the built candidates when more than ``keep`` are kept (between requests:
        a request's candidates must stay the view's own while it runs); True if dropped."""
        if len(self._made) <= keep:
            return False
        self._made = {}
        self._turns = None
        return True

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
        """Stop and drop the in-process graph and let a save of the terms finish (the
        view is evicted or the daemon stops)."""
        if self._graph is not None:
            self._graph.close()
            self._graph = None
        if self._saving is not None:
            self._saving.join(SAVE_WAIT_S)
            self._saving = None
        if self._file is not None:
            self._file.close(SAVE_WAIT_S)

    @property
    def matrix(self) -> Matrix | None:
        """Unit rows, one per record (zero rows for vectorless records): float32, or
        float16 in a view the store's index ranks (view_matrix.py)."""
        return None if self._mat is None else self._mat[: len(self.rows)]

    def _settle_dtype(self) -> None:
        """The matrix in the type the rows' count calls for; float16 rows are lean."""
        if (mat := settled(self._mat, len(self.rows), self.ann_min_rows)) is not self._mat:
            self._mat, self._made = mat, {}  # candidates hold rows of the old matrix
        if self._mat is not None and self._mat.dtype == HALF:
            self.rows.drop_metas()

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
        its twin's text takes the twin's analyzed terms instead of analyzing them again, and
        the twin's id and text strings (``ViewRows.share_strings``)."""
        dims = store.embed_dims
        got, since, rows_place = None, 0, store.view_place()
        if recs is None and self.state is None:  # a start: the rows the store saved, if any
            got = view_snapshot.load(rows_place, self.name, state, dims, self.snapshot_min_rows)
            if got is not None and got.matrix.dtype != FULL and len(got.rows) < self.ann_min_rows:
                got = None  # rounded rows where the exact scan needs the store's: read again
        if state.count >= self.ann_min_rows and not (  # a saved graph labels saved rows only
            got is not None
            and graph_file.resumable(store.graph_place(), self.name, self.graph_params is not None)
        ):
            store.prefetch_index(self.name)  # it ranks until a graph is built: load it now
        want = dtype_for(state.count if recs is None else len(recs), self.ann_min_rows)
        self.restored, self.saved_density = 0, None
        self._metas.store = store
        self._metas.clear()
        lean = want == HALF  # as the float16 matrix: metadata read from the store
        self.layout = got.layout if got is not None and got.layout else graph_file.new_layout()
        self.layout_bases = got.bases if got is not None else ()
        if got is not None:
            rows, mat, since, self.saved_density = got[:4]
            self.restored = len(rows)
        elif recs is None:  # paged: one page of columns at a time, straight into the rows
            rows, mat = read_rows(store, self.name, state.count, dims, want, lean)
        else:
            rows, mat = load_rows(self.name, [recs], len(recs), dims, want, lean)
        if twin is not None:  # before anything keys by them: the copies are let go
            rows.share_strings(twin.rows, twin.by_id)
        gone, docs = rows.texts_not_in(self.rows)  # ids whose text changed leave the index
        for rid in gone:
            self.bm25.remove(rid)
        other = twin.bm25 if twin is not None else None  # its term strings shared, or copied
        in_order = self.bm25.empty and not len(self.rows)  # then slot i is row i
        place = store.terms_place()
        saved = view_terms.load(place, self.name, state, self.bm25, other) if place else None
        self.analyzed, self._unsaved = view_terms.index_texts(
            self.bm25,
            docs,
            saved,
            other,
            None if twin is None else view_terms.twin_text(twin.by_id, twin.rows.record_text),
            BM25_PART,
            None if got is None else got.digests,  # of every row: taken when docs are all
        )
        del docs, saved
        self.bm25.warm()  # a large index: the first queries do not weigh its common terms
        self.rows, in_order = rows, in_order and len(self.bm25) == len(rows)
        self.by_id = self.bm25.slot_map() if in_order else {r: i for i, r in enumerate(rows.ids)}
        self._made = {}
        self._mat = mat
        self._settle_dtype()
        n = len(rows)
        self._ann = store if n >= self.ann_min_rows else None
        self._restart_graph(dims, state, since if got is not None else None)
        self._shadow = None
        self._sync_shadow(0)
        self.by_pos = {}
        seqs, session, names = rows.turn_seq, rows.session, rows.sessions.names
        for i in rows.rows_of_kind(TURN):
            if (s := seqs[i]) != NONE:
                self.by_pos[(names[session[i]], s)] = i
        self._resolve_summaries()
        self.state, self.stale = state, False
        self.gen += 1
        self.reloads += 1
        self.stamp = next(_STAMPS)
        self.touched = []
        self._turns = self._speakers = self._top_speakers = None
        self._save_terms(store, state)
        file = self.file
        file.loaded(self.gen, n, got)
        file.store = store
        if got is not None:  # then what was put or patched since the file was saved
            changed = store.changed_since(self.name, since, include_vectors=True)
            self._upsert(store, changed)
            file.changed = len(changed)
            if len(self.rows) < state.count and rows_place is not None:  # no removal: be safe
                rows_place.remove(self.name)
                return self.reload(store, state)
        self._rows_place = rows_place
        file.save(rows_place, self, state)
        return len(self.rows)

    @property
    def file(self) -> view_snapshot.RowsFile:
        """When the rows are saved beside the store (view_snapshot.py)."""
        if self._file is None:
            self._file = view_snapshot.RowsFile(self.snapshot_min_rows)
        return self._file

    def density_synced(self, density: Density) -> None:
        """The implicit-recall density was synced with these rows (density.py): the file's
        is taken or dropped, and it is saved with the rows."""
        self.saved_density = None
        self.file.density_synced(self._rows_place, self, self.state, density)

    def _save_terms(self, store: StoreBackend, state: CollectionState) -> None:
        """Save the BM25 terms in the store's place (view_terms.py) when enough texts were
        analyzed since the last save and no save of this view is running."""
        place = store.terms_place()
        if place is None or self._unsaved < max(SAVE_MIN_ANALYZED, len(self.rows) // 10):
            return
        if self._saving is not None and self._saving.is_alive():
            return
        rows = self.rows
        texts = [rows.record_text(i) for i in range(len(rows))]
        snap = view_terms.snapshot(self.name, state, self.bm25, rows.ids, texts)
        if snap is not None:
            self._saving = view_terms.save_in_background(place, snap)
            self._unsaved = 0

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
        if len(self.rows) < state.count:  # cannot happen without a removal: be safe
            return self.reload(store, state)
        self.state, self.stale = state, False
        self.file.changed += len(recs)
        self._save_terms(store, state)
        self.file.save(store.view_place(), self, state)
        return len(recs)

    def _upsert(self, store: StoreBackend, recs: Sequence[Record]) -> None:
        """Append the records of new ids, rewrite the rows of known ones (with vectors)."""
        assert self._mat is not None
        if not recs:
            return
        added = sum(1 for r in recs if r.id not in self.by_id)
        dims = store.embed_dims
        rows = self.rows
        n = len(rows)
        if n + added > self._mat.shape[0]:
            self._grow(n + added)
        summaries = False
        replaced: list[int] = []
        for r in recs:
            i = self.by_id.get(r.id)
            if i is None:
                i = len(rows)
                self.by_id[r.id] = i
                self._mat[i] = unit(r.vector, dims)
                r.vector = None
                c = row_fields(self.name, r)
                rows.append(r, c, bool(np.any(self._mat[i])))
                self.bm25.add(r.id, r.text)
                self._unsaved += 1
            else:
                replaced.append(i)
                seq = rows.turn_seq[i]
                pos = (rows.session_of(i), seq) if seq != NONE else None
                if rows.kind[i] == TURN and pos is not None and self.by_pos.get(pos) == i:
                    del self.by_pos[pos]
                if rows.record_text(i) != r.text:
                    self.bm25.add(r.id, r.text)  # replaces the earlier version
                    self._unsaved += 1
                self._count_speaker(rows.texts[i], -1)
                self._mat[i] = unit(r.vector, dims)
                r.vector = None
                summaries = summaries or rows.kind[i] == SUMMARY  # one no longer may be
                c = row_fields(self.name, r)
                rows.rewrite(i, r, c, bool(np.any(self._mat[i])))
                self._made.pop(i, None)
            self._count_speaker(c.text, 1)
            if c.kind == "turn" and c.seq is not None:
                self.by_pos[(rows.session_of(i), c.seq)] = i
            summaries = summaries or c.kind == "summary"
        if summaries:
            self._resolve_summaries()
        if self._ann is None and len(rows) >= self.ann_min_rows:
            self._ann = store
            self._settle_dtype()
            self.layout = graph_file.new_layout()  # rows past what it took: its own order
            self._restart_graph(dims, self.state or CollectionState())
        elif self._graph is not None:
            self._graph.note(itertools.chain(replaced, range(n, len(rows))))
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
        rows = self.rows
        cached = dict(zip(rows.ids, rows.seq, strict=True))
        changed = [r.id for r in listed if (s := cached.get(r.id)) is None or s != r.seq]
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
            if r.id not in redo:  # the record of the cached row, whose vector is the row's
                r.vector = self._mat[self.by_id[r.id]].copy()
                recs.append(r)
            elif r.id in fresh:  # else deleted since it was listed
                recs.append(fresh[r.id])
        return self.reload(store, state, recs)

    def _restart_graph(self, dims: int, state: CollectionState, seq: int | None = None) -> None:
        """A new in-process graph over the current rows (a large view with graph params),
        loaded from where it was saved or built in the background (``seq``: the rows were
        taken from a saved view and hold their records as of it, graph_file.py; None: a
        new layout, which no saved graph labels); the old one, over another, is dropped."""
        self.close()
        if self._ann is not None and self.graph_params is not None and self._mat is not None:
            n, at = len(self.rows), state.max_seq if seq is None else seq
            stamp = graph_file.GraphStamp(self.layout, state.cid, state.removals, at, n)
            seqs = self.rows.seq[:n]  # a copy: the build reads it while rows grow
            place, bases = self._ann.graph_place(), self.layout_bases
            resume, save = graph_file.hooks(
                place, self.name, self._ann, stamp, seqs, dims, self.graph_params, bases
            )
            self._graph = ViewGraph(self.name, dims, self.graph_params)
            # a search waits for a saved graph's load where the store's own index would
            # have to load too (SQLite), not where the server's answers at once
            wait = self._ann.ann_loads
            self._graph.start(self._mat, n, None if seq is None else resume, save, wait)

    def _grow(self, rows: int) -> None:
        """A larger matrix; the candidates built over the old one are dropped (no stale
        views)."""
        assert self._mat is not None
        self._mat = with_room(self._mat, len(self.rows), rows)
        self._made = {}

    def _resolve_summaries(self) -> None:
        """Condensed summaries cover the turns of their parent summaries (transitively)."""
        self._covered = {}
        summaries = self.rows.rows_of_kind(SUMMARY)
        if not summaries:
            return
        self._metas.prefetch(self.name, self.rows, summaries)
        base: dict[int, Candidate] = {}
        memo: dict[str, tuple[str, ...]] = {}

        def own(i: int) -> Candidate:
            if i not in base:
                base[i] = self._make(i, resolved=False)
            return base[i]

        def covered(i: int, depth: int = 0) -> tuple[str, ...]:
            c = own(i)
            if c.id in memo:
                return memo[c.id]
            ids = list(c.turn_ids)
            if depth < 16:
                for p in lineage(c.metadata).get("parent_summary_ids", ()) or ():
                    j = self.by_id.get(p) if isinstance(p, str) else None
                    if j is not None:
                        ids.extend(covered(j, depth + 1))
            memo[c.id] = tuple(dict.fromkeys(ids))
            return memo[c.id]

        for i in summaries:
            t = covered(i)
            if t != own(i).turn_ids:
                self._covered[i] = t
            self._made.pop(i, None)
        self._metas.clear()

    def _sync_shadow(self, first_new: int, replaced: Sequence[int] = ()) -> None:
        """Bring the int8 shadow in step after rows ``first_new..`` were appended and
        ``replaced`` rewritten; create it when the collection reaches
        :data:`~sidecar.engines.int8scan.MIN_ROWS` rows."""
        if self._mat is None or len(self.rows) < int8scan.MIN_ROWS or self._ann is not None:
            self._shadow = None  # no scan
            return
        mat, n = full(self._mat), len(self.rows)  # an exact scan's view: float32
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
        if qvec is None or mat is None or not len(self.rows) or self._ann is not None:
            return None
        return Scan(full(mat), qvec, self._shadow)

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
        out: list[int] = []
        for c in turns:
            if c.seq is None:
                continue
            for d in (-1, 1):
                j = self.by_pos.get((c.session_id, c.seq + d))
                if j is not None:
                    out.append(j)
        return self.candidates(out)

    def speakers(self, limit: int) -> list[str]:
        """The ``limit`` most frequent speakers whose label starts a record's text
        (:func:`text_label`), counted on first use and kept up to date by :meth:`catch_up`."""
        if self._speakers is None:
            self._speakers = Counter(s for t in self.rows.texts if (s := text_label(t)))
        if self._top_speakers is None or len(self._top_speakers) < min(limit, len(self._speakers)):
            self._top_speakers = [s for s, _ in self._speakers.most_common(limit)]
        return self._top_speakers[:limit]

    def _count_speaker(self, text: str, step: int) -> None:
        if self._speakers is None or not (s := text_label(text)):
            return
        self._speakers[s] += step
        if self._speakers[s] <= 0:
            del self._speakers[s]
        self._top_speakers = None

    def session_turns(self) -> list[Candidate]:
        """The collection's turns in session order (cached until it changes)."""
        if self._turns is None:
            rows = self.rows
            seqs, times = rows.turn_seq, rows.ts

            def order(i: int) -> tuple[int, int]:
                seq, ts = seqs[i], times[i]
                return (0 if seq == NONE else seq, 0 if ts == NONE else ts)

            self._turns = self.candidates(sorted(rows.rows_of_kind(TURN), key=order))
        return self._turns


_STAMPS = itertools.count()


#: How long closing a view waits for a save of its terms to finish (a file cut short is
#: a temporary file, never a damaged one).
SAVE_WAIT_S = 30.0

#: Documents a load hands the BM25 index at once: their term counts (a ``Counter`` each)
#: and flat postings are held together while it sorts them.
BM25_PART = 16_384
