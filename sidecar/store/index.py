"""Per-collection vector index: an exact tail plus an optional HNSW graph.

Indexes are derived caches of SQLite. Each vector collection has one :class:`VectorIndex`:

* ``exact``: an :class:`ExactSet` of full-dimension unit vectors for every record that the
  graph does not cover yet. Below the size threshold this holds the whole collection and
  search is exact brute force (numpy).
* ``ann``: an hnswlib graph (inner product on unit vectors = cosine) over the collection's
  *ANN tier*: the full vector, or a Matryoshka prefix (re-normalized) whose candidates are
  re-ranked with the stored full vectors (the funnel). Labels are record rids.

Writes acknowledge after the SQLite commit; the writer then applies the change here
(``apply_put`` / ``apply_delete``): a new or changed vector goes to the exact tail (and its
stale graph entry is marked deleted), so search sees every acknowledged write at once. A
background indexer moves the tail into the graph in small locked chunks, or builds a new
graph privately from SQLite and swaps it in (first build, large tails, > 20 % deleted).

hnswlib is not safe for concurrent search and insert, so an :class:`RWLock` guards the graph:
searches share it, mutations take it exclusively.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
import structlog

from sidecar.store.exact import F32, I64, Candidate, ExactSet, RWLock
from sidecar.store.graph_files import (
    GraphLayoutError,
    file_crc,
    fsync_dir,
    fsync_file,
    write_json,
    zero_deleted_vectors,
)
from sidecar.store.names import normalize_rows

log = structlog.get_logger(__name__)

INDEX_FORMAT = 1
# Filtered searches whose allowed set is this small are scored exactly instead of via HNSW.
EXACT_POOL_LIMIT = 2048
# Target time an incremental tail->graph move may hold the lock (seconds).
MOVE_SLICE_S = 0.05

# (rid, id, vector blob or None, vseq)
Row = tuple[int, str, bytes | None, int]
# fetch_rows(cid, max_vseq or None, after_rid, limit) -> rows ordered by rid
FetchRows = Callable[[int, int | None, int, int], list[Row]]
# fetch_vectors(rids) -> {rid: full unit vector}
FetchVectors = Callable[[Sequence[int]], dict[int, F32]]


#: Graphs up to this many rows search with the configured ``hnsw_ef_search``; larger ones
#: widen it with the square root of their size. A fixed 64 fell from 0.97 dense recall@10
#: at 100k rows of the scale benchmark's vectors to 0.87 at 1M (docs/benchmarks.md,
#: ``scale``); hnswlib on those vectors (M 16) needed ef ~100 at 100k and ~200 at 300k for
#: 0.95-0.99, and a search at ef 400 costs under a millisecond at 1M.
EF_SCALE_FROM = 25_000
#: pgvector's ceiling for ``hnsw.ef_search``.
EF_MAX = 1000


def scaled_ef(base: int, rows: int, k: int) -> int:
    """The search breadth of an HNSW graph of ``rows`` rows asked for ``k`` results."""
    grow = math.sqrt(rows / EF_SCALE_FROM) if rows > EF_SCALE_FROM else 1.0
    return min(EF_MAX, max(k, int(base * grow)))


class NeedScan(Exception):
    """The graph could not answer (e.g. a filter hides almost everything): scan SQLite."""


class NotLoaded(NeedScan):
    """The index was unloaded between the caller's load and its search: load it again."""


#: A loaded graph no search has used for this long, its file current, goes back to its
#: file (``graph_lazy.unload_idle``); its next search loads it again (0.35 s at 100k).
GRAPH_IDLE_S = 900.0


@dataclass(frozen=True, slots=True)
class AnnParams:
    """Graph parameters; the values come from ``StoreSettings`` (config.py), the one place
    that holds their defaults."""

    m: int
    ef_construction: int
    ef_search: int
    threads: int
    oversample: int


@dataclass(slots=True)
class LoadReport:
    source: str  # "file" | "rebuild"
    reason: str
    file_seq: int = 0
    backfilled: int = 0
    marked_deleted: int = 0
    graph: int = 0

    def log(self, event: str, idx: VectorIndex, started: float) -> None:
        """One line for a saved graph checked at open or loaded on first use."""
        log.info(
            event,
            collection=idx.name,
            dims=idx.ann_dims,
            file_seq=self.file_seq,
            graph=self.graph,
            backfilled=self.backfilled,
            marked_deleted=self.marked_deleted,
            seconds=round(time.monotonic() - started, 3),
        )


@dataclass(slots=True)
class SavedGraph:
    """A saved graph's stamp, checked (identity, seq, size, checksum) but not loaded."""

    seq: int  # every record with vseq <= seq is in the graph or deleted
    live: int  # elements not flagged deleted in the file
    meta: dict[str, Any]


def decode_rows(rows: Sequence[Row], dims: int) -> tuple[I64, list[str], F32, I64]:
    """rids, ids, unit vectors (full dims), vseqs."""
    n = len(rows)
    rids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    ids = [r[1] for r in rows]
    vseqs = np.fromiter((r[3] for r in rows), dtype=np.int64, count=n)
    zero = bytes(4 * dims)
    blob = b"".join(r[2] if r[2] is not None and len(r[2]) == 4 * dims else zero for r in rows)
    mat = np.frombuffer(blob, dtype=np.float32).reshape(n, dims)
    return rids, ids, normalize_rows(mat), vseqs


class VectorIndex:
    """Exact tail + optional HNSW graph for one vector collection."""

    def __init__(self, cid: int, name: str, dims: int, ann_dims: int, params: AnnParams) -> None:
        self.cid = cid
        self.name = name
        self.dims = dims
        self.ann_dims = ann_dims if 0 < ann_dims < dims else dims
        self.params = params
        self.lock = RWLock()
        self.loaded = False
        self.broken = False  # an in-memory update failed: search scans SQLite until repaired
        self.needs_repair = False  # a graph insert failed: rebuild at the next checkpoint
        self.exact = ExactSet(dims)
        self.ann: Any = None
        self.ann_live: set[int] = set()
        self.ann_dirty = False  # graph changed since it was last saved
        self.building = False
        self.changed: set[int] = set()
        self.move_rate = 200.0  # graph inserts per second, measured by move_chunk
        self.dropped = False
        self.persist = True  # False: a saved file could not be cleaned of deleted vectors
        # A saved graph checked at open and not loaded yet (graph_lazy.py): the first
        # search loads it; writes meanwhile are replayed from SQLite by their seq then.
        self.saved: SavedGraph | None = None
        self.saved_stale = False  # written to since: the file may hold deleted vectors
        self.file_lock = threading.Lock()  # a load or an in-place scrub of the saved file
        self.last_used = time.monotonic()  # the last search (an idle graph is unloaded)

    # ---- state -------------------------------------------------------------------------

    def _is_dropped(self) -> bool:
        return self.dropped  # read again: another thread may have dropped the collection

    @property
    def coarse(self) -> bool:
        return self.ann_dims < self.dims

    def mode(self) -> str:
        if self.broken:
            return "broken"
        if not self.loaded:
            return "saved" if self.saved is not None else "unloaded"
        return "hnsw" if self.ann is not None else "exact"

    def pending(self) -> int:
        return len(self.exact) if self.ann is not None else 0

    def deleted_fraction(self) -> float:
        if self.ann is None:
            return 0.0
        total = int(self.ann.get_current_count())
        return 0.0 if total == 0 else max(0.0, (total - len(self.ann_live)) / total)

    def _project(self, units: F32) -> F32:
        if not self.coarse:
            return units
        return normalize_rows(np.ascontiguousarray(units[:, : self.ann_dims]))

    def _new_graph(self, capacity: int) -> Any:
        g = hnswlib.Index(space="ip", dim=self.ann_dims)
        g.init_index(
            max_elements=max(1024, capacity),
            ef_construction=self.params.ef_construction,
            M=self.params.m,
        )
        g.set_ef(self.params.ef_search)
        g.set_num_threads(max(1, self.params.threads))
        return g

    # ---- loading -----------------------------------------------------------------------

    def load_exact(self, fetch_rows: FetchRows) -> int:
        """Materialize the whole collection from SQLite into the exact set."""
        with self.lock.write():
            return self._load_exact_locked(fetch_rows)

    def _load_exact_locked(self, fetch_rows: FetchRows, force: bool = False) -> int:
        if self.loaded and not force:
            return 0
        self.exact.clear()
        after, total = 0, 0
        while rows := fetch_rows(self.cid, None, after, 20_000):
            rids, ids, units, vseqs = decode_rows(rows, self.dims)
            self.exact.put_many(rids, ids, units, vseqs)
            after = rows[-1][0]
            total += len(rows)
        self.loaded = True
        self.broken = False
        return total

    def reset(self) -> None:
        """Forget everything (used before a repair): the next use reloads from SQLite."""
        with self.lock.write():
            self.exact.clear()
            self.ann = None
            self.ann_live = set()
            self.ann_dirty = False
            self.saved = None
            self.loaded = False
            self.broken = False
            self.needs_repair = False
            self.changed = set()

    # ---- effects of committed writes (writer thread) -----------------------------------

    def apply(self, changes: Sequence[tuple[str, int, str, F32 | None, int]]) -> None:
        """Apply committed changes in order: ("put", rid, id, raw vector, vseq) or
        ("del", rid, "", None, 0)."""
        with self.lock.write():
            if not self.loaded:
                # the load reads SQLite after this commit; a saved file is re-checked
                self.saved_stale = self.saved is not None
                return
            put_vecs = [c[3] for c in changes if c[0] == "put" and c[3] is not None]
            units = normalize_rows(np.stack(put_vecs)) if put_vecs else None
            if units is not None and len(put_vecs) == len(changes) and self._append(changes, units):
                return
            j = 0
            for kind, rid, rec_id, vec, vseq in changes:
                if self.building:
                    self.changed.add(rid)
                if rid in self.ann_live:
                    self.ann.mark_deleted(rid)
                    self.ann_live.discard(rid)
                    self.ann_dirty = True
                if kind == "put" and vec is not None and units is not None:
                    self.exact.put(rid, rec_id, units[j], vseq)
                    j += 1
                else:
                    self.exact.remove(rid)

    def _append(self, changes: Sequence[tuple[str, int, str, F32 | None, int]], units: F32) -> bool:
        """Bulk path of :meth:`apply` for puts of records new to both the graph and the tail
        (an insert batch): one append instead of a put per record. False = not applicable."""
        rids = [c[1] for c in changes]
        live, tail = self.ann_live, self.exact
        if len(set(rids)) != len(rids) or any(r in live or r in tail for r in rids):
            return False
        if self.building:
            self.changed.update(rids)
        tail.put_many(
            np.array(rids, dtype=np.int64),
            [c[2] for c in changes],
            units,
            np.array([c[4] for c in changes], dtype=np.int64),
        )
        return True

    # ---- search ------------------------------------------------------------------------

    def search(
        self,
        query: F32,
        k: int,
        exclude: set[int],
        allowed: set[int] | None,
        fetch_vectors: FetchVectors,
    ) -> list[Candidate]:
        """Candidates (rid, score, id or "") for the top ``k``; the caller sorts and cuts.

        Raises :class:`NeedScan` when the graph cannot answer reliably.
        """
        direct: list[int] = []
        graph: list[tuple[int, float]] = []
        lock = self.lock
        lock.acquire_read()
        try:
            if not self.loaded:
                raise NotLoaded(self.name)
            cands = self.exact.topk(query, k, exclude, allowed) if len(self.exact) else []
            if self.ann is not None and self.ann_live:
                direct, graph = self._graph_search(query, k, exclude, allowed)
        finally:
            lock.release_read()
        if direct:
            vecs = fetch_vectors(direct)
            cands.extend((rid, float(vecs[rid] @ query), "") for rid in direct if rid in vecs)
        elif graph and self.coarse:
            vecs = fetch_vectors([rid for rid, _ in graph])
            cands.extend((rid, float(vecs[rid] @ query), "") for rid, _ in graph if rid in vecs)
        else:
            cands.extend((rid, score, "") for rid, score in graph)
        return cands

    def _graph_search(
        self, query: F32, k: int, exclude: set[int], allowed: set[int] | None
    ) -> tuple[list[int], list[tuple[int, float]]]:
        live = self.ann_live
        want = k * (self.params.oversample if self.coarse else 1)
        q = query
        if self.coarse:
            q = query[: self.ann_dims]
            norm = float(np.linalg.norm(q))
            q = q / norm if norm > 1e-12 else q
        q = np.ascontiguousarray(q, dtype=np.float32)
        g = self.ann
        # searches share the read lock and set the same value for one graph size
        g.set_ef(scaled_ef(self.params.ef_search, len(live), want))
        if allowed is not None:
            pool = (allowed & live) - exclude if len(allowed) < len(live) else None
            if pool is not None and len(pool) <= EXACT_POOL_LIMIT:
                return sorted(pool), []
            keep: Callable[[int], bool]
            if pool is None:
                allowed_set = allowed

                def keep_allowed(label: int) -> bool:
                    return label in allowed_set and label in live and label not in exclude

                keep = keep_allowed
                avail = len(live)
            else:
                keep = pool.__contains__
                avail = len(pool)
            return [], _filtered_knn(g, q, min(want, avail), keep)
        if exclude:

            def keep_ex(label: int) -> bool:
                return label in live and label not in exclude

            kk = min(want, len(live - exclude) if len(exclude) < 4096 else len(live))
            return [], _filtered_knn(g, q, kk, keep_ex)
        kk = need = min(want, len(live))
        total = 0
        while True:
            try:
                labels, dists = g.knn_query(q, k=kk, num_threads=1)
            except RuntimeError as exc:
                raise NeedScan(str(exc)) from exc
            out = [
                (lb, 1.0 - d)
                for lb, d in zip(labels[0].tolist(), dists[0].tolist(), strict=True)
                if lb in live
            ]
            # Labels outside ann_live only exist briefly (a swap in progress); fetch more.
            if len(out) >= need:
                return [], out
            total = total or int(g.get_current_count())
            if kk >= total:
                return [], out
            kk = min(total, kk * 2)

    # ---- background work (indexer thread) ----------------------------------------------

    def plan(self, count: int, threshold: int, rebuild_fraction: float) -> str | None:
        if self.saved is not None and not self.loaded and not self.dropped:
            # a saved graph waits for its first search, unless it would be dropped then
            return "drop_saved" if count < threshold // 2 else None
        if not self.loaded or self.building or self.broken or self.dropped:
            return None
        if self.ann is None:
            return "build" if count >= threshold else None
        if count < threshold // 2:
            return "shrink"
        if self.deleted_fraction() > rebuild_fraction:
            return "build"
        tail = len(self.exact)
        if tail > max(10_000, len(self.ann_live)):
            return "build"  # a bulk load or a large backfill: one private build is cheaper
        return "move" if tail else None

    def build(
        self,
        fetch_rows: FetchRows,
        applied_seq: Callable[[], int],
        count: int,
        stop: Callable[[], bool],
    ) -> bool:
        """Build a new graph privately from SQLite and swap it in. False if aborted."""
        with self.lock.write():
            if self.building or not self.loaded or self.dropped:
                return False
            self.building = True
            self.changed = set()
            snap = applied_seq()
        try:
            started = time.monotonic()
            g = self._new_graph(int(max(count, 1) * 1.3))
            added: list[int] = []
            after = 0
            while rows := fetch_rows(self.cid, snap, after, 4096):
                if stop():
                    return False
                rids, _ids, units, _v = decode_rows(rows, self.dims)
                need = int(g.get_current_count()) + len(rows)
                if need > int(g.get_max_elements()):
                    g.resize_index(int(need * 1.5))
                g.add_items(self._project(units), rids, num_threads=max(1, self.params.threads))
                added.extend(rids.tolist())
                after = rows[-1][0]
            took = time.monotonic() - started
            with self.lock.write():
                if self._is_dropped():
                    return False
                live = set(added)
                stale = live & self.changed
                for rid in stale:
                    g.mark_deleted(rid)
                live -= stale
                for rid in live:
                    v = self.exact.vseq_of(rid)
                    if v is not None and v <= snap:
                        self.exact.remove(rid)
                self.ann = g
                self.ann_live = live
                self.ann_dirty = True
            log.info(
                "index.built",
                collection=self.name,
                dims=self.ann_dims,
                records=len(live),
                pending=len(self.exact),
                seconds=round(took, 3),
            )
            return True
        finally:
            with self.lock.write():
                self.building = False
                self.changed = set()

    def shrink(self, fetch_rows: FetchRows) -> None:
        """Drop the graph of a collection that became small: exact search from now on."""
        with self.lock.write():
            self.ann = None
            self.ann_live = set()
            self.ann_dirty = True  # the next checkpoint removes the saved file
            self._load_exact_locked(fetch_rows, force=True)

    def move_chunk(self) -> int:
        """Move a slice of the exact tail into the graph (under the lock). Returns count."""
        with self.lock.write():
            if self.building or self.ann is None or not len(self.exact) or self.dropped:
                return 0
            batch = max(16, min(1024, int(self.move_rate * MOVE_SLICE_S)))
            rids, units, _vseqs = self.exact.snapshot(batch)
            g = self.ann
            need = int(g.get_current_count()) + len(rids)
            if need > int(g.get_max_elements()):
                g.resize_index(int(need * 1.5))
            t0 = time.perf_counter()
            try:
                g.add_items(self._project(units), rids, num_threads=max(1, self.params.threads))
            except Exception:
                # The tail still holds these records, so search stays correct; the graph may
                # hold some of them unlabelled (ignored: not in ann_live). Rebuild later.
                self.needs_repair = True
                raise
            dt = time.perf_counter() - t0
            if dt > 0:
                self.move_rate = 0.7 * self.move_rate + 0.3 * (len(rids) / dt)
            for rid in rids.tolist():
                self.exact.remove(rid)
                self.ann_live.add(rid)
            self.ann_dirty = True
            return len(rids)

    # ---- persistence -------------------------------------------------------------------

    def _identity(self, fingerprint: str) -> dict[str, object]:
        """What a saved graph must match to be loaded for this index (its metadata file)."""
        return {
            "format": INDEX_FORMAT,
            "cid": self.cid,
            "collection": self.name,
            "dims": self.dims,
            "ann_dims": self.ann_dims,
            "space": "ip",
            "fingerprint": fingerprint,
        }

    def file_stem(self, directory: Path) -> Path:
        return directory / f"c{self.cid}-d{self.ann_dims}"

    def save(self, directory: Path, fingerprint: str, applied_seq: Callable[[], int]) -> bool:
        """Write the graph (tmp + fsync + rename) stamped with the seq it covers."""
        stem = self.file_stem(directory)
        tmp = stem.with_suffix(".hnsw.tmp")
        with self.lock.write():
            if (
                self.ann is None
                or not self.ann_dirty
                or self.building
                or self.broken
                or self.needs_repair
                or self.dropped
                or not self.persist
            ):
                return False
            seq = applied_seq()
            tail_min = self.exact.min_vseq()
            if tail_min is not None:
                seq = min(seq, tail_min - 1)
            self.ann.save_index(str(tmp))
            count = int(self.ann.get_current_count())
            live = len(self.ann_live)
            self.ann_dirty = False
        try:
            # deleted elements keep their vectors in hnswlib: none may reach the disk
            if count > live and not self._zero_deleted(tmp, directory, count - live):
                return False
            fsync_file(tmp)
            size = tmp.stat().st_size
            crc = file_crc(tmp)
            os.replace(tmp, stem.with_suffix(".hnsw"))
            meta = {
                **self._identity(fingerprint),
                "seq": seq,
                "elements": count,
                "live": live,
                "m": self.params.m,
                "ef_construction": self.params.ef_construction,
                "size": size,
                "crc32": crc,
                "saved_ms": int(time.time() * 1000),
            }
            write_json(stem.with_suffix(".json"), meta)
            fsync_dir(directory)
        except OSError:
            self.ann_dirty = True
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        log.info("index.saved", collection=self.name, dims=self.ann_dims, seq=seq, records=live)
        return True

    def _zero_deleted(self, tmp: Path, directory: Path, deleted: int) -> bool:
        """Zero the deleted elements' vectors in ``tmp``; on a layout this code does not
        know, keep no file at all (the graph is rebuilt from SQLite at the next start)."""
        try:
            zero_deleted_vectors(tmp, self.ann_dims, deleted)
        except GraphLayoutError as exc:
            log.error("index.scrub_failed", collection=self.name, error=str(exc))
            self.persist = False
            tmp.unlink(missing_ok=True)
            self.drop_files(directory)
            return False
        return True

    def drop_files(self, directory: Path) -> None:
        stem = self.file_stem(directory)
        for suffix in (".json", ".hnsw", ".hnsw.tmp", ".json.tmp"):
            with contextlib.suppress(OSError):
                stem.with_suffix(suffix).unlink()

    def memory_bytes(self) -> int:
        total = self.exact.nbytes
        if self.ann is not None:
            total += int(self.ann.get_max_elements()) * (4 * self.ann_dims + 8 * self.params.m)
        return total


def _filtered_knn(
    graph: Any, query: F32, k: int, keep: Callable[[int], bool]
) -> list[tuple[int, float]]:
    """The graph's top ``k`` among the labels ``keep`` accepts, as (label, cosine)."""
    if k <= 0:
        return []
    try:
        labels, dists = graph.knn_query(query, k=k, num_threads=1, filter=keep)
    except RuntimeError as exc:
        raise NeedScan(str(exc)) from exc
    return [(int(lb), 1.0 - float(d)) for lb, d in zip(labels[0], dists[0], strict=True)]
