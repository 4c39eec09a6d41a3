"""Saved HNSW graphs loaded on first use, not at open (issue 36: two graphs of a 100k
store held about 340 MB before anything asked for them; ``assemble`` scans the history
through its own int8 copy and never needs them).

At open a saved graph is only checked (:func:`check_at_open`: its stamp's identity and
seq, the file's size, and two counts of records against the stamp), and the index keeps
the stamp (``VectorIndex.saved``) in place of the graph. The first search of the
collection loads it (:func:`ensure_loaded`), exactly as an open used to: the file's
checksum, the graph from the file, its deleted and rewritten records marked deleted, the
records written since its seq into the exact tail, read from SQLite under the index's
write lock, so a write committed at any moment before is found and one committed after is
applied on top (the writer applies a commit under that same lock, after the commit).

The checksum waits for the load because it reads the whole file: the two 1.6 GB graphs
of a million memories took 2.8 s of the open, before the endpoint line, for graphs that
``assemble`` may never load (its views rank through their own). Nothing reads the file's
body before the load but a scrub, which checks the checksum itself before it rewrites
the file and its stamp (a stamp written over damage would make the load accept it).

Until then the file is the graph. A checkpoint writes no new file for it (nothing in it
changed), and when records it covers were deleted or rewritten since its save it flags
their elements deleted and zeroes their vectors in the file itself
(:func:`scrub_unloaded`, ``graph_files.delete_all_but``), as loading, marking and saving
it would, without loading it: a forget leaves no deleted vector in a graph file whether
its graph was loaded or not.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import hnswlib
import numpy as np
import structlog

from sidecar.store import reads as _reads
from sidecar.store.graph_files import (
    GraphLayoutError,
    delete_all_but,
    file_crc,
    fsync_dir,
    fsync_file,
    write_json,
)
from sidecar.store.index import LoadReport, SavedGraph, VectorIndex, decode_rows

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)

_COUNTS = "SELECT count(*), coalesce(sum(vseq > ?), 0) FROM records WHERE cid = ?"


def read_stamp(
    idx: VectorIndex, directory: Path, fingerprint: str, max_seq: int, whole: bool = True
) -> SavedGraph:
    """The saved graph's stamp once the file passed every check that does not load it
    (``whole``: its checksum too, else its size only); ``ValueError`` naming what is wrong
    otherwise (the caller rebuilds from SQLite)."""
    stem = idx.file_stem(directory)
    meta_path, graph_path = stem.with_suffix(".json"), stem.with_suffix(".hnsw")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError("no index file") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"unreadable index metadata: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValueError("index metadata is not an object")
    for key, want in idx._identity(fingerprint).items():
        if meta.get(key) != want:
            raise ValueError(f"index {key} is {meta.get(key)!r}, expected {want!r}")
    seq, live = meta.get("seq"), meta.get("live")
    if not isinstance(seq, int) or seq < 0 or seq > max_seq:
        raise ValueError(f"index seq {seq!r} is not within the store's (0..{max_seq})")
    if not isinstance(live, int) or live < 0:
        raise ValueError(f"index live count {live!r} is not a count")
    try:
        size = graph_path.stat().st_size
    except OSError as exc:
        raise ValueError(f"index graph missing: {exc}") from exc
    if size != meta.get("size"):
        raise ValueError(f"index graph is {size} bytes, expected {meta.get('size')}")
    if whole and file_crc(graph_path) != meta.get("crc32"):
        raise ValueError("index graph checksum mismatch")
    return SavedGraph(seq, live, meta)


def check_at_open(store: SqliteState, idx: VectorIndex) -> LoadReport:
    """Accept the collection's saved graph without loading it or reading its body
    (``ValueError`` when it cannot serve). The report counts what its load will backfill
    and mark deleted, as the load at open reported them."""
    saved = read_stamp(idx, store.index_dir, store.fingerprint, store._seq, whole=False)
    covered, newer = store._wconn.execute(_COUNTS, (saved.seq, idx.cid)).fetchone()
    covered -= newer
    if covered > saved.live:  # every record of vseq <= seq is in the file, not deleted
        raise ValueError(f"index lacks {covered - saved.live} records it claims to cover")
    idx.saved = saved
    # records it covers were deleted or rewritten since the save (a daemon killed before
    # its next save): their vectors leave the file at the first checkpoint
    idx.saved_stale = covered < saved.live
    return LoadReport(
        source="file",
        reason="deferred",
        file_seq=saved.seq,
        backfilled=newer,
        marked_deleted=saved.live - covered,
        graph=covered,
    )


def ensure_loaded(store: SqliteState, idx: VectorIndex) -> None:
    """Make ``idx`` answer searches: its saved graph loaded, else the exact set from
    SQLite (and the indexer told, to build or extend the graph)."""
    if idx.loaded or idx.broken:
        return
    if idx.saved is not None:
        started = time.monotonic()
        try:
            rep = _load_saved(store, idx)
        except ValueError as exc:
            log.warning("index.rebuild", collection=idx.name, dims=idx.ann_dims, reason=str(exc))
            with idx.file_lock:
                idx.saved = None
                idx.drop_files(store.index_dir)
        else:
            if rep is not None:
                rep.log("index.loaded", idx, started)
    if not idx.loaded:
        idx.load_exact(lambda *a: _reads._fetch_rows(store, *a))
    if store._indexer is not None:
        store._indexer.notify(idx.cid)


def prefetch(store: SqliteState, name: str) -> bool:
    """Load the collection's saved graph on the store's prefetch thread, as its first
    search would (:func:`ensure_loaded`, under the same locks: a search that comes first
    loads it and the prefetch finds it loaded); True if a load was queued."""
    info = store._collections.get(name)
    idx = store._indexes.get(info.cid) if info is not None else None
    if idx is None or idx.loaded or idx.broken or idx.saved is None or store._closed:
        return False
    idx.last_used = time.monotonic()  # not unloaded as idle before the search it is for
    try:
        store._prefetcher.submit(_prefetch_one, store, idx)
    except RuntimeError:  # the store is closing
        return False
    return True


def _prefetch_one(store: SqliteState, idx: VectorIndex) -> None:
    if store._stop_event.is_set():
        return
    try:
        ensure_loaded(store, idx)
    except Exception:  # the search that needs it loads it again, and reports
        log.warning("index.prefetch_failed", collection=idx.name, exc_info=True)


def _load_saved(store: SqliteState, idx: VectorIndex) -> LoadReport | None:
    """Load the saved graph and catch it up with SQLite; None when another thread loaded
    it first or the collection was dropped."""
    with idx.file_lock:
        saved = idx.saved
        if saved is None or idx.loaded or idx.dropped:
            return None
        # checked again: days may pass between the open and the first search
        stamp = read_stamp(idx, store.index_dir, store.fingerprint, store._applied_seq)
        seq = stamp.seq
        graph_path = idx.file_stem(store.index_dir).with_suffix(".hnsw")
        g = hnswlib.Index(space="ip", dim=idx.ann_dims)
        try:
            g.load_index(str(graph_path), max_elements=max(1024, int(stamp.live * 1.3) + 1024))
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise ValueError(f"index graph unreadable: {exc}") from exc
        g.set_ef(idx.params.ef_search)
        g.set_num_threads(max(1, idx.params.threads))
        labels = set(g.get_ids_list())
        with idx.lock.write():
            if idx.saved is not saved or idx.loaded or idx.dropped:
                return None
            # under the write lock: a commit whose apply came before is in these reads,
            # one after waits for the lock and lands on the loaded graph
            live = _rids_upto(store, idx.cid, seq)
            missing = len(live - labels)
            if missing:
                raise ValueError(f"index lacks {missing} records it claims to cover")
            marked = 0
            for rid in labels - live:
                try:
                    g.mark_deleted(rid)
                    marked += 1
                except RuntimeError:
                    pass  # already deleted in the saved graph
            tail = _reads._read(
                store,
                "SELECT rid, id, vector, vseq FROM records WHERE cid = ? AND vseq > ? ORDER BY rid",
                (idx.cid, seq),
            )
            idx.exact.clear()
            if tail:
                rids, ids, units, vseqs = decode_rows(tail, idx.dims)
                idx.exact.put_many(rids, ids, units, vseqs)
            idx.ann = g
            idx.ann_live = live
            idx.ann_dirty = bool(tail) or marked > 0
            idx.saved = None
            idx.saved_stale = False
            idx.loaded = True
    return LoadReport("file", "ok", seq, len(tail), marked, len(live))


def _rids_upto(store: SqliteState, cid: int, seq: int) -> set[int]:
    rows = _reads._read(store, "SELECT rid FROM records WHERE cid = ? AND vseq <= ?", (cid, seq))
    return {r[0] for r in rows}


def drop_saved(store: SqliteState, idx: VectorIndex) -> bool:
    """The collection shrank under half the threshold before its graph was loaded: the
    file goes (it would be dropped right after a load), searches are exact from now on."""
    with idx.file_lock:
        if idx.saved is None or idx.loaded:
            return False
        idx.drop_files(store.index_dir)  # first: without a stamp, the index is idle
        idx.saved = None
        idx.saved_stale = False
    log.info("index.dropped", collection=idx.name, dims=idx.ann_dims, reason="shrank")
    return True


def unload_idle(store: SqliteState) -> int:
    """Checkpoint thread: put back to their files the graphs no search used for
    ``store.graph_idle_s`` whose files hold them as they are (saved since their last
    change). Their exact tails go too: those records are after the file's seq, replayed
    at the next load. Returns how many."""
    done = 0
    for idx in list(store._indexes.values()):
        if idx.ann is not None and time.monotonic() - idx.last_used >= store.graph_idle_s:
            # not during a checkpoint: a save between its rename and its stamp would
            # show this the old stamp beside the new file
            with store._ckpt_lock:
                done += _unload(store, idx)
    return done


def _unload(store: SqliteState, idx: VectorIndex) -> bool:
    stem = idx.file_stem(store.index_dir)
    with idx.file_lock:
        try:
            # not checksummed here: the load checks the whole file again
            meta = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        with idx.lock.write():
            g = idx.ann
            if (
                g is None
                or idx.ann_dirty  # changed since its save: the file is not the graph
                or idx.building
                or idx.broken
                or idx.needs_repair
                or idx.dropped
                or not idx.persist
                or time.monotonic() - idx.last_used < store.graph_idle_s
                or not isinstance(meta, dict)
                or meta.get("live") != len(idx.ann_live)
                or meta.get("elements") != int(g.get_current_count())
                or not isinstance(meta.get("seq"), int)
            ):
                return False
            idx.ann = None
            idx.ann_live = set()
            idx.exact.clear()
            idx.loaded = False
            idx.saved = SavedGraph(meta["seq"], meta["live"], meta)
            idx.saved_stale = False
    log.info("index.unloaded", collection=idx.name, dims=idx.ann_dims, idle_s=store.graph_idle_s)
    return True


def scrub_unloaded(store: SqliteState, idx: VectorIndex) -> bool:
    """Checkpoint: flag deleted and zero, in the saved file of a graph not loaded, the
    elements of records deleted or rewritten since it was saved. True when it did."""
    if not idx.saved_stale:
        return False
    with idx.file_lock:
        saved = idx.saved
        if saved is None or idx.loaded or idx.dropped:
            return False
        idx.saved_stale = False  # a write from now on sets it again
        keep = np.array(sorted(_rids_upto(store, idx.cid, saved.seq)), dtype=np.int64)
        if len(keep) >= saved.live:
            return False
        stem = idx.file_stem(store.index_dir)
        graph_path = stem.with_suffix(".hnsw")
        if file_crc(graph_path) != saved.meta.get("crc32"):  # not checked at the open
            log.error("index.scrub_failed", collection=idx.name, error="checksum mismatch")
            idx.saved = None  # rebuilt from SQLite, and saved again
            idx.drop_files(store.index_dir)
            return False
        try:
            marked = delete_all_but(graph_path, idx.ann_dims, keep, saved.live)
        except GraphLayoutError as exc:
            # the file is not as hnswlib 0.8 writes it: keep none (rebuilt from SQLite)
            log.error("index.scrub_failed", collection=idx.name, error=str(exc))
            idx.saved = None
            idx.persist = False
            idx.drop_files(store.index_dir)
            return False
        except OSError:
            idx.saved_stale = True
            raise
        live = saved.live - marked
        fsync_file(graph_path)
        meta = {
            **saved.meta,
            "live": live,
            "size": graph_path.stat().st_size,
            "crc32": file_crc(graph_path),
            "saved_ms": int(time.time() * 1000),
        }
        write_json(stem.with_suffix(".json"), meta)
        fsync_dir(store.index_dir)
        idx.saved = dataclasses.replace(saved, live=live, meta=meta)
    log.info("index.scrubbed", collection=idx.name, dims=idx.ann_dims, marked_deleted=marked)
    return True
