"""Index maintenance: checkpoints of the vector indexes, repair of indexes marked dirty,
and the background indexer's steps."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from sidecar.store import commits as _commits
from sidecar.store import graph_lazy as _lazy
from sidecar.store import reads as _reads
from sidecar.store.errors import StoreClosed, StoreError
from sidecar.store.files import DB_NAME
from sidecar.store.index import VectorIndex
from sidecar.store.scrub import truncate_job
from sidecar.store.types import IndexStatus, StorageBytes
from sidecar.store.writer import Tx

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


def checkpoint(store: SqliteState) -> dict[str, int]:
    """Repair dirty indexes, save changed graphs, truncate the WAL."""
    if store._closed:
        raise StoreClosed("the store is closed")
    # after the page check (page_check.py): a damaged database fails this as any write
    failure = store._pages.wait()
    if failure is not None:  # the check's one error: its frames start here, not after the last
        raise failure.with_traceback(None)
    saved = _checkpoint_indexes(store)
    # readers of an older snapshot make it give up after a moment rather than hold every
    # write for the busy timeout; the next checkpoint truncates the log then
    fut = store._submit(truncate_job, True)
    with contextlib.suppress(StoreError, sqlite3.Error):
        fut.result()
    return saved


def _checkpoint_indexes(store: SqliteState) -> dict[str, int]:
    with store._ckpt_lock:
        store._dirty_since_ckpt = False
        store._last_checkpoint = time.monotonic()
        saved = repaired = 0
        markers = _dirty_cids(store)
        for idx in list(store._indexes.values()):
            if idx.broken or idx.needs_repair or idx.cid in markers:
                if not store._closed:
                    _repair(store, idx)
                    repaired += 1
                continue
            if idx.ann is None and idx.ann_dirty and _drop_shrunk_graph(store, idx):
                continue
            if idx.saved is not None:  # not loaded: its file is the graph, scrubbed in place
                try:
                    saved += _lazy.scrub_unloaded(store, idx)
                except OSError as exc:
                    log.warning("index.save_failed", collection=idx.name, error=str(exc))
                continue
            try:
                if idx.save(store.index_dir, store.fingerprint, lambda: store._applied_seq):
                    saved += 1
            except OSError as exc:
                log.warning("index.save_failed", collection=idx.name, error=str(exc))
        return {"saved": saved, "repaired": repaired}


def _drop_shrunk_graph(store: SqliteState, idx: VectorIndex) -> bool:
    """The graph of a collection that shrank is gone from memory; its saved file, which
    held every vector (deleted ones too), goes with it."""
    with idx.lock.write():
        if idx.ann is not None or not idx.ann_dirty:
            return False
        idx.ann_dirty = False
        idx.drop_files(store.index_dir)
    return True


def _dirty_cids(store: SqliteState) -> set[int]:
    return {r[0] for r in _reads._read(store, "SELECT DISTINCT cid FROM dirty_tiers")}


def _repair(store: SqliteState, idx: VectorIndex) -> None:
    """Rebuild a dirty index from SQLite and clear its marker."""
    log.info("index.repair", collection=idx.name, dims=idx.ann_dims)
    idx.drop_files(store.index_dir)
    idx.reset()
    idx.load_exact(functools.partial(_reads._fetch_rows, store))
    cid = idx.cid

    def clear(tx: Tx) -> None:
        tx.conn.execute("DELETE FROM dirty_tiers WHERE cid = ?", (cid,))

    with contextlib.suppress(StoreError):
        store._submit(clear).result()
    if store._indexer is not None:
        store._indexer.notify(cid)


def _tick(store: SqliteState) -> None:
    while not store._stop_event.wait(0.5):
        now = time.monotonic()
        idle = now - store._last_write >= store.checkpoint_idle_s
        overdue = now - store._last_checkpoint >= max(60.0, 20 * store.checkpoint_idle_s)
        try:
            _lazy.unload_idle(store)
        except Exception:
            log.exception("index.unload_failed")
        if not store._pages.passed:
            # Nothing persists before the page check has passed (page_check.py): a WAL
            # checkpoint writes the database. A graph save writes only the index files,
            # but it comes with one, a graph read from a database found damaged is not
            # worth saving, and no write happened meanwhile; a requested save stays due.
            continue
        # a scrub (forget) wants the deleted vectors out of the graph files now
        scrub = store._scrubber
        scrub.retry_deferred()
        if scrub.take_index_save() or (store._dirty_since_ckpt and (idle or overdue)):
            try:
                checkpoint(store)
            except StoreClosed:
                return
            except Exception:
                log.exception("store.checkpoint_failed")


def index_status(store: SqliteState) -> list[IndexStatus]:
    out = []
    for cid, idx in sorted(store._indexes.items()):
        out.append(
            IndexStatus(
                collection=idx.name,
                dims=idx.ann_dims,
                count=store._counts.get(cid, 0),
                mode=idx.mode(),
                ann_count=len(idx.ann_live),
                pending=idx.pending(),
                deleted_fraction=round(idx.deleted_fraction(), 4),
            )
        )
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def storage_bytes(store: SqliteState) -> StorageBytes:
    """The database file, its WAL and shared memory, the saved graphs."""
    db = store.db_path
    indexes = 0
    with contextlib.suppress(OSError):
        if store.index_dir.is_dir():
            indexes = sum(_size(p) for p in store.index_dir.iterdir() if p.is_file())
    wal = _size(db.with_name(DB_NAME + "-wal")) + _size(db.with_name(DB_NAME + "-shm"))
    return StorageBytes(_size(db), wal, indexes)


def wait_indexed(store: SqliteState, timeout: float = 60.0) -> bool:
    """Block until the indexer has nothing left to do (tests, benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = any(
            idx.building
            or idx.plan(store._counts.get(cid, 0), store.exact_threshold, store.rebuild_fraction)
            or (
                not idx.loaded
                and not idx.broken
                and idx.saved is None
                and store._counts.get(cid, 0) >= store.exact_threshold
            )
            for cid, idx in list(store._indexes.items())
        )
        if not busy:
            return True
        if store._indexer is None:
            run_index_work(store)
        else:
            time.sleep(0.02)
    return False


def run_index_work(store: SqliteState) -> int:
    """Do all pending index work in the calling thread (when ``background=False``)."""
    steps = 0
    for cid in list(store._indexes):
        while _index_step(store, cid):
            steps += 1
    return steps


def _index_step(store: SqliteState, cid: int) -> bool:
    idx = store._indexes.get(cid)
    if idx is None:
        return False
    count = store._counts.get(cid, 0)
    action = idx.plan(count, store.exact_threshold, store.rebuild_fraction)
    if action == "drop_saved":  # shrank before its first search
        return _lazy.drop_saved(store, idx)
    ready = idx.loaded or idx.broken or idx.saved is not None  # a saved graph waits for a search
    if action is None and not ready and count >= store.exact_threshold:
        idx.load_exact(functools.partial(_reads._fetch_rows, store))
        return True
    if action is None:
        return False
    try:
        if action == "build":
            return idx.build(
                functools.partial(_reads._fetch_rows, store),
                lambda: store._applied_seq,
                count,
                store._stop_event.is_set,
            )
        if action == "move":
            return idx.move_chunk() > 0
        if action == "shrink":
            idx.shrink(functools.partial(_reads._fetch_rows, store))
            return True
    except Exception as exc:
        log.exception("index.work_failed", collection=idx.name, action=action)
        idx.needs_repair = True
        _commits._mark_dirty(store, idx, f"{action} failed: {exc}")
    return False
