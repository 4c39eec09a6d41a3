"""What follows a committed write (index rows applied, dropped collections removed, damaged
indexes marked for rebuild), creating collections inside a transaction, and counters."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

import structlog

from sidecar.store import names as N
from sidecar.store.common import counted
from sidecar.store.exact import F32
from sidecar.store.index import VectorIndex
from sidecar.store.record_keys import derived_columns
from sidecar.store.rows import chunks, decode_meta, json_encode
from sidecar.store.types import CollectionInfo
from sidecar.store.writer import Tx

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


def _after_commit(
    store: SqliteState, txs: list[Tx], group: Mapping[str, CollectionInfo | None]
) -> None:
    """Apply the in-memory effects of committed jobs (writer thread, post-commit).

    The collections, counts, removal counters, versions and the committed sequence change
    together under ``_state_lock``, so ``collection_states`` never sees half of a commit."""
    by_cid: dict[int, list[tuple[str, int, str, F32 | None, int]]] = {}
    deleted = False
    with store._state_lock:
        _apply_group(store, group)
        for tx in txs:
            for cid, delta in tx.counts.items():
                store._counts[cid] = store._counts.get(cid, 0) + delta
            for cid, n in tx.removed.items():
                deleted = True
                if cid in store._by_cid:
                    store._removals[cid] = store._removals.get(cid, 0) + n
            for cid in tx.touched:
                if cid in store._by_cid:
                    store._versions[cid] = next(store._vclock)
            for eff in tx.effects:
                if eff.kind == "drop":
                    deleted = True
                    _apply_drop(store, eff.cid)
                    by_cid.pop(eff.cid, None)
                else:
                    by_cid.setdefault(eff.cid, []).append(
                        (eff.kind, eff.rid, eff.rec_id, eff.unit, eff.vseq)
                    )
        store._state_seq = store._seq
    for cid, changes in by_cid.items():
        target = store._indexes.get(cid)
        if target is None:
            continue
        try:
            target.apply(changes)
        except Exception as exc:
            log.exception("index.update_failed", collection=target.name)
            target.broken = True
            _mark_dirty(store, target, f"update failed: {exc}")
    store._applied_seq = store._seq
    if deleted:  # before the futures resolve: a scrub asked for after them covers it
        store._scrubber.note_deletion()
    store._last_write = time.monotonic()
    store._dirty_since_ckpt = True
    if store._indexer is not None:
        for cid in by_cid:
            store._indexer.notify(cid)


def _apply_group(store: SqliteState, group: Mapping[str, CollectionInfo | None]) -> None:
    """Collections created or dropped by the committed jobs."""
    for name, info in group.items():
        old = store._collections.pop(name, None)
        if old is not None:
            store._by_cid.pop(old.cid, None)
        if info is not None:
            store._collections[name] = info
            store._by_cid[info.cid] = info
            store._counts.setdefault(info.cid, 0)
            if info.has_vectors and info.cid not in store._indexes:
                idx = store._new_index(info)
                idx.loaded = True  # new and empty: nothing to load
                store._indexes[info.cid] = idx
            store._versions[info.cid] = next(store._vclock)


def _apply_drop(store: SqliteState, cid: int) -> None:
    idx = store._indexes.pop(cid, None)
    store._counts.pop(cid, None)
    store._versions.pop(cid, None)
    store._removals.pop(cid, None)
    if idx is not None:
        idx.dropped = True
        idx.drop_files(store.index_dir)


def _mark_dirty(store: SqliteState, idx: VectorIndex, reason: str) -> None:
    """Persist a dirty marker (repaired at the next checkpoint or start)."""
    cid, dims = idx.cid, idx.ann_dims

    def job(tx: Tx) -> None:
        if cid in store._by_cid:
            tx.conn.execute(
                "INSERT OR REPLACE INTO dirty_tiers (cid, dims, reason, created_ms) "
                "VALUES (?, ?, ?, ?)",
                (cid, dims, reason[:500], tx.now_ms),
            )

    if not store._closed:
        store._writer.submit(job)


def _ensure_in_tx(store: SqliteState, tx: Tx, name: str) -> CollectionInfo:
    info = tx.lookup(name)
    if info is not None:
        return info
    dims = N.dims_for_collection(name, store.embed_dims)
    kind = N.kind_for_dims(dims)
    cur = tx.conn.execute(
        "INSERT INTO collections (name, dims, kind, created_ms) VALUES (?, ?, ?, ?)",
        (name, dims, kind, tx.now_ms),
    )
    cid = cur.lastrowid
    assert cid is not None
    info = CollectionInfo(name, cid, dims, kind, tx.now_ms)
    tx.set_group(name, info)
    return info


def increment_future(
    store: SqliteState, updates: Mapping[str, Sequence[str]], key: str = "access_count"
) -> Future[int]:
    """``metadata[key] += 1`` for each existing (collection, id); missing ones skipped.

    Duplicate ids in one update count once. The version is not bumped (an access count
    is bookkeeping, not an edit, so it never breaks a compare-and-swap).
    """
    plan: list[tuple[str, list[str]]] = []
    for coll, ids in updates.items():
        name = N.validate_collection(coll)
        plan.append((name, sorted({N.validate_id(i) for i in ids})))

    def job(tx: Tx) -> int:
        n = 0
        for name, ids in plan:
            info = tx.lookup(name)
            if info is None:
                continue
            for part in chunks(ids):
                marks = ",".join("?" * len(part))
                rows = tx.conn.execute(
                    f"SELECT rid, metadata, created_ms FROM records WHERE cid = ? "
                    f"AND id IN ({marks})",
                    (info.cid, *part),
                ).fetchall()
                for rid, raw, created in rows:
                    meta = counted(decode_meta(raw), key)
                    # the derived columns follow the metadata (record_keys.py)
                    tx.conn.execute(
                        "UPDATE records SET metadata = ?, seq = ?, ts_ms = ?, session_key = ?, "
                        "marks = ? WHERE rid = ?",
                        (
                            json_encode(meta).decode(),
                            tx.next_seq(),
                            *derived_columns(meta, created),
                            rid,
                        ),
                    )
                    n += 1
        return n

    return store._submit(job)
