"""An in-process HNSW graph over a large view's cached vectors.

Why: a :class:`~sidecar.assembly.cache.CollectionView` of a large collection already
holds every unit vector in one matrix. On PostgreSQL the store's ANN search is a round
trip that walks index and heap pages of a table far larger than the server's buffers
(37 ms for the two searches of one ``assemble`` at 1M memories); a graph over the matrix
the daemon holds anyway answers the same question in under a millisecond, with a search
breadth this process chooses (:func:`~sidecar.store.index.scaled_ef`).

The graph is usearch's HNSW with its vectors in int8 (about 560 bytes a 384-dimension row
against hnswlib's 1.8 KB in float32): it proposes :data:`OVERSAMPLE` times the rows asked
for and the view's own rows rank them exactly, so the 8-bit rows cost no recall (on a
100k store's real vectors, recall@10 0.998 against 0.995 for hnswlib in float32 at the
same ``ef``).

Labels are the view's row numbers (rows only grow at the end or are rewritten in place
between full reloads; a reload starts a new graph). The graph is built in the background
(one build at a time, so one core stays free for requests; one from scratch at the lowest
CPU priority, :data:`_FRESH_BUILDS`) from the rows
present when it starts; rows appended or rewritten meanwhile are noted and inserted by
the next search. Until the graph is ready, and if it fails, :meth:`ViewGraph.search`
returns None and the view asks the store's index as before: the graph never makes an
answer wrong, it only makes it cheaper. Nor does it risk the process: a build starts only
when the system has the graph's memory (:func:`graph_bytes`) plus :data:`MEMORY_RESERVE`
available, else the view stays on the store's index (``skipped``).

A graph resumed from its saved file (graph_file.py) is mapped, not read, and so
read-only: the rows to insert again, and those appended or rewritten later, go into a
small graph beside it, and a rewritten row is masked in the mapped one (:func:`_put`);
a search asks both (:func:`_search`).

One lock covers searches and inserts (a rewritten row is removed and added again, which
a concurrent search must not see half done); the build thread inserts into a private
index and publishes it under the lock when done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import structlog
from usearch.index import Index

from sidecar.assembly.view_rows import Matrix
from sidecar.priority import lower_this_thread
from sidecar.store.index import scaled_ef

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
#: Loads a saved graph and names the rows to insert again (None: there is none that holds).
Resume = Callable[[], "tuple[Index, I64] | None"]
Saver = Callable[[Index], None]

#: Memory left to everything else when a graph is built (a daemon killed for memory loses
#: every request in flight; a skipped graph only costs latency).
MEMORY_RESERVE = 1 << 30
#: Rows the graph proposes per row asked for, ranked exactly by the view's matrix (int8
#: rows alone: recall@10 0.95; twice as many, re-ranked: 0.998).
OVERSAMPLE = 2
#: Its search breadth (``ef``) over the store's setting. On queries far from every row
#: (the means of three rows) recall@10 at 100k is 0.93 at ef 128 and 0.97 at 256, for
#: int8 rows and hnswlib's float32 alike: the breadth, not the 8 bits, bounds it. Through
#: ``bench_scale.py``: 1x gave 0.979 at 100k; 2x 0.991 at 100k and 0.990 at 1M, but
#: doubled the search's time at 1M (ef 809: the gather 7.9 -> 21 ms).
EF_FACTOR = 1.5
#: How long a search waits for a graph loading from its file (then the store answers).
LOAD_WAIT_S = 30.0
BUILD_CHUNK = 10_000  # rows per insert call: the build checks for cancellation between
# One build at a time, process-wide: a daemon with two large views (history and durable
# memories) keeps a core for the requests it serves meanwhile. A graph resumed from its
# file that a search waits for (SQLite) is built at the daemon's priority; one that
# nothing waits for (the store's index ranks meanwhile), built from scratch or loaded
# from the database, on a thread of the lowest priority: on PostgreSQL the history's
# build took a core from the durable view's load and the server's answers to it, and
# the loads of a 1M restart's two graphs (1 GB from the server) made its first
# `assemble` 4.7 s slower.
_BUILDS = ThreadPoolExecutor(1, thread_name_prefix="libravdb-view-graph")
_FRESH_BUILDS = ThreadPoolExecutor(
    1, thread_name_prefix="libravdb-view-graph-build", initializer=lower_this_thread
)


@dataclass(frozen=True, slots=True)
class GraphParams:
    """HNSW parameters (the store's ``hnsw_*`` settings) and the insert threads."""

    m: int = 16
    ef_construction: int = 100
    ef_search: int = 64
    threads: int = 1


class ViewGraph:
    """HNSW over the rows of one view (module doc). States: ``building``, ``ready``,
    ``skipped`` (not enough memory), ``failed``, ``closed``."""

    def __init__(self, name: str, dims: int, params: GraphParams) -> None:
        self.name = name
        self.dims = dims
        self.params = params
        self.state = "building"
        self.built_rows = 0  # rows the build has inserted (progress)
        self.total_rows = 0  # rows the build started from
        self._lock = threading.Lock()
        # the graph searched; beside a mapped base, the rows it lacks or holds an older
        # version of (inserted since its file was saved)
        self._index: Index | None = None
        self._base: Index | None = None  # a saved graph mapped from its file (read-only)
        self._masked: set[int] = set()  # the base's rows rewritten since (in _index now)
        self._pending: set[int] = set()
        self.loading = False  # resuming from a saved graph: ready in moments, worth a wait
        self.origin = ""  # once ready: "built", or "loaded" from its file
        self._cancel = threading.Event()
        self._done = threading.Event()  # the build ended: ready, skipped, failed or cancelled

    # ---- building ------------------------------------------------------------------------

    def start(
        self,
        mat: Matrix,
        rows: int,
        resume: Resume | None = None,
        save: Saver | None = None,
        wait: bool = True,
    ) -> None:
        """Build over ``mat[:rows]`` in the background. The caller keeps writing its own
        matrix and reports every row it appends or rewrites through :meth:`note`.
        ``resume``: loads a saved graph and names the rows to insert again (None: build
        from scratch), which searches wait for when ``wait``; ``save``: writes a graph that
        was built (or largely redone) before it answers (``graph_file.py``)."""
        self.total_rows = rows
        self.loading = resume is not None and wait
        (_BUILDS if self.loading else _FRESH_BUILDS).submit(self._build, mat, rows, resume, save)

    def _build(self, mat: Matrix, rows: int, resume: Resume | None, save: Saver | None) -> None:
        try:
            self._build_index(mat, rows, resume, save)
        finally:
            self.loading = False
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the build to end; True when the graph is ready."""
        self._done.wait(timeout)
        return self.ready

    def _build_index(
        self, mat: Matrix, rows: int, resume: Resume | None, save: Saver | None
    ) -> None:
        if self._cancel.is_set():
            return
        need = graph_bytes(rows, self.dims, self.params.m)
        avail = available_bytes()
        if avail is not None and avail < need + MEMORY_RESERVE:
            with self._lock:
                if not self._cancel.is_set():
                    self.state = "skipped"
            log.warning(
                "view_graph.skipped",
                collection=self.name,
                reason="memory",
                need_mb=need >> 20,
                available_mb=avail >> 20,
            )
            return
        t0 = time.perf_counter()
        try:
            got = resume() if resume is not None else None
            # built, or largely redone: saved before it answers
            saving = save is not None and (got is None or len(got[1]) >= max(1, rows // 10))
            base: Index | None = None
            if got is None:
                self.loading = False  # no saved graph after all: a build takes long
                index, todo = new_index(self.dims, self.params), None
            elif saving:  # a copy in memory takes the rows
                index, todo = got[0].copy(), got[1]
            else:  # the saved graph stays mapped; the rows it lacks go beside it
                base, todo = got
                index = new_index(self.dims, self.params)
            self._fill(index, mat, rows, todo, base)
        except Exception as exc:  # the store's index keeps answering
            with self._lock:
                if not self._cancel.is_set():
                    self.state = "failed"
            log.warning("view_graph.failed", collection=self.name, error=str(exc))
            return
        if self._cancel.is_set():
            return
        if saving and save is not None:
            save(index)  # before it answers: no search meanwhile (usearch reads it)
        with self._lock:
            if self._cancel.is_set():
                return
            self._index, self._base = index, base
            self.state, self.origin = "ready", "built" if todo is None else "loaded"
        seconds = time.perf_counter() - t0
        log.info(
            "view_graph.ready", collection=self.name, rows=rows, how=self.origin, seconds=seconds
        )

    def _fill(
        self, index: Index, mat: Matrix, rows: int, todo: I64 | None, base: Index | None = None
    ) -> None:
        """Insert ``mat[:rows]`` (``todo``: only those rows, some there already, in
        ``base`` when given: see :func:`_put`)."""
        order = np.arange(rows, dtype=np.int64) if todo is None else todo[todo < rows]
        last_log = time.perf_counter()
        for start in range(0, len(order), BUILD_CHUNK):
            if self._cancel.is_set():
                return
            part = order[start : start + BUILD_CHUNK]
            if todo is None:
                vecs = np.ascontiguousarray(mat[part[0] : part[-1] + 1], dtype=np.float32)
                index.add(part.astype(np.uint64), vecs, threads=self.params.threads)
            else:
                _put(index, mat, part, self.params.threads, base, self._masked)
            self.built_rows = start + len(part)
            if time.perf_counter() - last_log > 10.0:  # progress of a long build
                last_log = time.perf_counter()
                log.info("view_graph.progress", collection=self.name, rows=start, of=len(order))

    def note(self, rows: Iterable[int]) -> None:
        """Rows appended or rewritten since :meth:`start` (inserted by the next search)."""
        with self._lock:
            self._pending.update(rows)

    def close(self) -> None:
        """Stop a build and drop the graph (the view was reloaded or evicted)."""
        self._cancel.set()
        with self._lock:
            self._index = self._base = None
            self._pending.clear()
            self._masked.clear()
            self.state = "closed"

    # ---- searching -----------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def search(self, mat: Matrix, q: F32, k: int) -> tuple[npt.NDArray[np.int64], F32] | None:
        """Rows and cosines of the approximate top ``k`` (best first), after inserting the
        pending rows from ``mat`` (the view's current matrix); None when not ready. A graph
        loading from its file is waited for (moments, where the store's own graph would
        load instead)."""
        if self.loading:
            self.wait(LOAD_WAIT_S)
        with self._lock:
            index = self._index
            if index is None or self.state != "ready":
                return None
            if self._pending:
                try:
                    self._insert(index, mat)
                except (RuntimeError, ValueError) as exc:  # rows it lacks would be missing
                    self._index, self.state = None, "failed"
                    log.warning("view_graph.insert_failed", collection=self.name, error=str(exc))
                    return None
            base = self._base
            count = len(index) + (len(base) - len(self._masked) if base is not None else 0)
            if min(k, count) <= 0:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            wide = min(count, OVERSAMPLE * k)
            ef = scaled_ef(int(EF_FACTOR * self.params.ef_search), count, wide)
            try:
                rows = _search(index, base, self._masked, np.asarray(q, dtype=np.float32), wide, ef)
            except (RuntimeError, ValueError) as exc:  # ask the store
                log.warning("view_graph.search_failed", collection=self.name, error=str(exc))
                return None
        rows = rows[rows < len(mat)]
        sims = (mat[rows].astype(np.float32) @ q).astype(np.float32)
        best = np.argsort(-sims, kind="stable")[:k]
        return rows[best], sims[best]

    def _insert(self, index: Index, mat: Matrix) -> None:
        rows = np.fromiter(sorted(self._pending), dtype=np.int64, count=len(self._pending))
        _put(index, mat, rows[rows < len(mat)], 1, self._base, self._masked)
        self._pending.clear()


def _search(index: Index, base: Index | None, masked: set[int], q: F32, wide: int, ef: int) -> I64:
    """The rows ``index`` and ``base`` propose for ``q`` (``wide`` of each at most; the
    base's ``masked`` rows left out: their new versions are in ``index``)."""
    parts: list[I64] = []
    for graph, skip in ((index, set()), (base, masked)):
        if graph is None or not len(graph):
            continue
        # a setter usearch defines after the getter, which mypy does not see
        graph.expansion_search = ef  # type: ignore[misc]
        ask = min(len(graph), wide + min(len(skip), wide))
        keys = np.asarray(graph.search(q, ask, threads=1).keys, dtype=np.int64)
        if skip:
            keys = keys[~np.isin(keys, np.fromiter(skip, dtype=np.int64, count=len(skip)))]
        parts.append(keys)
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def _put(
    index: Index,
    mat: Matrix,
    rows: I64,
    threads: int,
    base: Index | None = None,
    masked: set[int] | None = None,
) -> None:
    """Insert ``mat[rows]`` under their row numbers. A row already there (rewritten in
    place since) is removed first, unless its int8 row is the same: a record patched
    without a new vector (an access count, a tag) costs no graph update, and a row whose
    8 bits match proposes the same neighbours (the view's own rows rank them). ``base``:
    a mapped saved graph beside ``index`` (read-only): a row of it whose int8 row changed
    is ``masked`` there and inserted in ``index``, one whose bits match stays."""
    if not rows.size:
        return
    keys = rows.astype(np.uint64)
    vecs = np.ascontiguousarray(mat[rows], dtype=np.float32)
    if base is not None and masked is not None:
        live = np.asarray(base.contains(keys), dtype=bool)
        if masked:
            live &= ~np.isin(rows, np.fromiter(masked, dtype=np.int64, count=len(masked)))
        kept = _same_bits(base, keys, vecs, live)
        masked.update(rows[live & ~kept].tolist())
        keys, vecs = keys[~kept], vecs[~kept]
    present = np.asarray(index.contains(keys), dtype=bool)
    same = _same_bits(index, keys, vecs, present)
    if (changed := present & ~same).any():
        index.remove(keys[changed])
    keys, vecs = keys[~same], vecs[~same]
    if keys.size:
        index.add(keys, vecs, threads=threads)


def _same_bits(
    graph: Index, keys: npt.NDArray[np.uint64], vecs: F32, held: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """Which of ``keys`` ``graph`` holds (``held``: those it has) with the int8 rows of
    ``vecs`` as they are."""
    same = np.zeros(len(keys), dtype=bool)
    if held.any():
        at = np.flatnonzero(held)
        stored = np.stack(graph.get(keys[at], dtype="i8"))  # type: ignore[arg-type]
        same[at] = (stored == _int8(vecs[at])).all(axis=1)
    return same


def _int8(vecs: F32) -> npt.NDArray[np.int8]:
    """A unit row as usearch keeps it in int8 for the cosine metric (127 scale, truncated;
    should that change, rows only compare unequal and are inserted again)."""
    out: npt.NDArray[np.int8] = np.trunc(vecs * 127.0).astype(np.int8)
    return out


def new_index(dims: int, params: GraphParams) -> Index:
    """An empty int8 graph (cosine: the view's rows are unit vectors, and usearch scales a
    unit vector's components to int8 exactly for this metric)."""
    return Index(
        ndim=dims,
        metric="cos",
        dtype="i8",
        connectivity=params.m,
        expansion_add=params.ef_construction,
        expansion_search=params.ef_search,
    )


def graph_bytes(rows: int, dims: int, m: int) -> int:
    """What the graph holds for ``rows`` rows: per row the int8 vector, the level-0 links
    (2M of 4 bytes), and about 200 bytes of key, key map entry, level, upper-level links
    (about 1/M of the rows, M links each) and the arena's slack (measured: 56 MB resident
    for 100k rows of 384 dimensions at M 16, 85 MB reserved)."""
    return rows * (dims + 8 * m + 200)


def available_bytes() -> int | None:
    """``MemAvailable`` (Linux), None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
