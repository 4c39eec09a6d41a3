"""Opening a store: the database file and its checks, the embedding fingerprint, the
index directory and the saved graphs in it checked (loaded on first use) or rebuilt."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from sidecar.store import graph_lazy as _lazy
from sidecar.store import page_check
from sidecar.store import reads as _reads
from sidecar.store import reembed_stage as reembed_mod
from sidecar.store.common import STAGE_DISCARDED, check_fingerprint, meta_writes
from sidecar.store.errors import StorageUnavailable, UnfinishedReembed
from sidecar.store.files import DB_NAME, INDEX_DIR, PROFILE_FILE, make_private, now_ms
from sidecar.store.rows import json_encode
from sidecar.store.schema import SCHEMA_VERSION, migrate, schema_version
from sidecar.store.scrub import start_checkpoint
from sidecar.store.types import CollectionInfo
from sidecar.store.writer import map_sqlite_error

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


def _open_db(store: SqliteState, allow_mismatch: bool, profile: Mapping[str, Any] | None) -> None:
    pages = store._pages
    in_wal_and_large = page_check.wal_file_of_size(store.db_path, store.page_check_bytes)
    try:
        conn = store._connect(read_only=False)
        # Private before WAL mode creates -wal and -shm, which take the file's mode.
        make_private(store.db_path, _sidecar_files(store))
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StorageUnavailable(f"cannot enable WAL journaling (got {mode})")
        conn.execute(f"PRAGMA synchronous = {store._synchronous}")
        store._wconn = conn
        # Every page is checked before anything is written (page_check.py): now for a
        # small file, beside the start for a large one unless the open has to write.
        # (Decided before the journal mode was set: setting it writes a file not in WAL
        # mode yet, which such a file's synchronous check follows, as it always did.)
        if in_wal_and_large:
            pages.defer()
        else:
            pages.run_sync(conn)
        if schema_version(conn) != SCHEMA_VERSION:
            pages.require(conn, "schema migration")
        applied = migrate(conn)
        if pages.passed:
            start_checkpoint(conn)
        else:  # the writer thread's first act once the check has passed
            pages.checkpoint_due = True
    except sqlite3.Error as exc:
        raise map_sqlite_error(exc, "open", str(store.db_path)) from exc
    if applied:
        log.info("store.migrated", versions=applied, schema=SCHEMA_VERSION)
    meta = dict(store._wconn.execute("SELECT key, value FROM meta").fetchall())
    store._seq = int(meta.get("seq", "0"))
    store._applied_seq = store._seq
    if not allow_mismatch:
        _check_fingerprint(store, meta)
    # what is stored already is not written again: a restart of an up-to-date store
    # writes nothing at open (the profile would be written every time)
    writes = {k: v for k, v in meta_writes(meta, store, profile).items() if meta.get(k) != v}
    if writes:
        try:
            store._pages.require(store._wconn, "meta rows to record")
            with store._txn(store._wconn):
                store._wconn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    list(writes.items()),
                )
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "open", str(store.db_path)) from exc
    if profile is not None:
        _write_profile_file(store, profile)
    for cid, name, dims, kind, created, removals in store._wconn.execute(
        "SELECT cid, name, dims, kind, created_ms, removals FROM collections"
    ):
        info = CollectionInfo(name, cid, dims, kind, created)
        store._collections[name] = info
        store._by_cid[cid] = info
        store._counts[cid] = 0
        store._removals[cid] = removals
    for cid, n in store._wconn.execute("SELECT cid, count(*) FROM records GROUP BY cid"):
        store._counts[cid] = n


def _check_fingerprint(store: SqliteState, meta: dict[str, str]) -> None:
    """Refuse vectors of another model, naming what differs and the command that fixes it.

    An unfinished ``libravdb reembed`` leaves a stage beside intact old vectors: the old
    model may open the store (the stage is discarded, it would go stale with the next
    write); the new model is refused until the re-embed is finished.
    """
    stored = meta.get("fingerprint", "")
    target = meta.get(reembed_mod.TARGET_KEY, "")
    where = str(store.data_dir)
    if target and reembed_mod.TARGET_DIMS_KEY not in meta and target != stored:
        # An earlier version re-embedded in place: the vectors are mixed until it ends.
        raise UnfinishedReembed(
            where, meta.get(reembed_mod.TARGET_MODEL_KEY, ""), target, legacy=True
        )
    check_fingerprint(
        meta,
        fingerprint=store.fingerprint,
        model=store.model,
        where=where,
        progress=lambda: reembed_mod.staged_progress(store._wconn),
    )
    if target:
        store._pages.require(store._wconn, "re-embed stage to discard")
        with store._txn(store._wconn):
            reembed_mod.discard_stage(store._wconn)
        log.warning(
            "store.reembed_discarded",
            data_dir=where,
            reason=STAGE_DISCARDED,
        )


def _write_profile_file(store: SqliteState, profile: Mapping[str, Any]) -> None:
    """``<data_dir>/embedding.json`` (informational; SQLite holds the fingerprint)."""
    path = store.data_dir / PROFILE_FILE
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_bytes(msgspec.json.format(json_encode({"embedding": dict(profile)}), indent=2))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("store.profile_file_failed", error=str(exc))


def _refuse_vanished_database(store: SqliteState) -> None:
    """A data directory that held a store (its index directory, WAL or profile remain)
    but lost ``store.sqlite3`` must not silently become a new, empty store."""
    if store.db_path.exists():
        return
    left = [
        p.name
        for p in (
            store.index_dir,
            store.db_path.with_name(DB_NAME + "-wal"),
            store.data_dir / PROFILE_FILE,
        )
        if os.path.lexists(p)
    ]
    if left:
        raise StorageUnavailable(
            f"{store.db_path} is missing, but {store.data_dir} held a store "
            f"({', '.join(left)} remain). Restore store.sqlite3 from a backup; to start "
            f"an empty store there instead, remove {', '.join(left)} first.",
            path=str(store.db_path),
        )


def _clear_index_dir_path(store: SqliteState) -> None:
    """The indexes are derived from SQLite: something else where their directory
    belongs (a file, a broken link) is moved aside and the graphs are rebuilt."""
    path = store.index_dir
    if path.is_dir() or not os.path.lexists(path):
        return
    aside = path.with_name(f"{INDEX_DIR}.not-a-directory.{now_ms()}")
    try:
        os.replace(path, aside)
    except OSError as exc:
        raise StorageUnavailable(
            f"{path} is not a directory and cannot be moved aside ({exc.strerror}); "
            f"remove it (the indexes are rebuilt from the database)",
            path=str(path),
        ) from exc
    log.warning("store.index_dir_moved_aside", path=str(path), moved_to=str(aside))


def _sidecar_files(store: SqliteState) -> list[Path]:
    return [store.db_path.with_name(DB_NAME + suffix) for suffix in ("-wal", "-shm")]


def _load_indexes(store: SqliteState) -> dict[str, int]:
    """Create the in-memory indexes: saved graphs checked (loaded on first use,
    ``graph_lazy.py``), or rebuilds planned."""
    _clear_index_dir_path(store)
    store.index_dir.mkdir(exist_ok=True, mode=0o700)
    make_private(store.index_dir, [], directory=True)
    dirty = {
        cid for (cid,) in store._wconn.execute("SELECT DISTINCT cid FROM dirty_tiers").fetchall()
    }
    stats = {"indexes_loaded": 0, "backfilled": 0, "marked_deleted": 0, "rebuilding": 0}
    known: set[str] = set()
    for info in store._collections.values():
        if not info.has_vectors:
            continue
        idx = store._new_index(info)
        store._indexes[info.cid] = idx
        stem = idx.file_stem(store.index_dir)
        known.add(stem.name)
        count = store._counts.get(info.cid, 0)
        has_file = stem.with_suffix(".json").exists()
        if info.cid in dirty:
            log.warning("index.dirty_marker", collection=info.name, action="rebuild")
            idx.drop_files(store.index_dir)
        elif has_file:
            t0 = time.monotonic()
            try:
                rep = _lazy.check_at_open(store, idx)
            except ValueError as exc:
                log.warning(
                    "index.rebuild", collection=info.name, dims=idx.ann_dims, reason=str(exc)
                )
                idx.drop_files(store.index_dir)
            else:
                stats["indexes_loaded"] += 1
                stats["backfilled"] += rep.backfilled
                stats["marked_deleted"] += rep.marked_deleted
                rep.log("index.checked", idx, t0)
        if idx.saved is None and count >= store.exact_threshold:
            idx.load_exact(functools.partial(_reads._fetch_rows, store))
            stats["rebuilding"] += 1
    if dirty:
        store._pages.require(store._wconn, "dirty index markers to clear")
        with store._txn(store._wconn):
            store._wconn.execute("DELETE FROM dirty_tiers")
    if stats["marked_deleted"]:
        # records deleted after those files were saved (the daemon was killed before the
        # next save): their vectors leave the files at the checkpoint thread's first tick
        store._scrubber.request_index_save()
    _remove_stray_files(store, known)
    return stats


def _remove_stray_files(store: SqliteState, known: set[str]) -> None:
    with contextlib.suppress(OSError):
        for path in store.index_dir.iterdir():
            stem = path.name.split(".", 1)[0]
            if stem not in known or path.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    path.unlink()
