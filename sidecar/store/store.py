"""The store: SQLite source of truth, one writer thread, derived vector indexes.

See docs/store.md for the design and the durability promise. :class:`Store` is the state
its parts share (:class:`sidecar.store.sqlite_state.SqliteState`) plus the store core
(:class:`sidecar.store.core.StoreCore`: the interface, and what both backends do alike);
here each primitive and backend-specific operation is bound to its part. Quick map:

* :meth:`Store.open` takes the directory lock, opens/migrates SQLite (WAL), checks the
  embedding fingerprint, loads the saved HNSW graphs and backfills newer records.
* Writes (``put``, ``patch``, ``delete``, ``write`` ...) run on the writer thread and return
  once committed; sync methods block, :class:`sidecar.store.aio.AsyncStore` awaits.
* Reads (``get``, ``list``, ``search`` ...) run in the calling thread on a per-thread
  read-only connection, concurrently with writes (WAL snapshots).
* ``checkpoint`` (idle timer, ``close``) saves the graphs stamped with the highest record
  sequence they cover, and repairs dirty indexes.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import structlog

from sidecar.config import StoreSettings
from sidecar.store import commits as _commits
from sidecar.store import graph_lazy as _lazy
from sidecar.store import maintenance as _maintenance
from sidecar.store import names as N
from sidecar.store import opening as _opening
from sidecar.store import ops as _ops
from sidecar.store import reads as _reads
from sidecar.store import search as _vector_search
from sidecar.store import time_reads as _time_reads
from sidecar.store import tombstones as _tombstones
from sidecar.store.core import StoreCore, check_dims
from sidecar.store.errors import (
    InvalidInput,
    StorageUnavailable,
)
from sidecar.store.files import DB_NAME as DB_NAME
from sidecar.store.files import INDEX_DIR as INDEX_DIR
from sidecar.store.files import PROFILE_FILE as PROFILE_FILE
from sidecar.store.files import warn_if_shared
from sidecar.store.graph_place import FileGraphPlace
from sidecar.store.indexer import Indexer
from sidecar.store.interface import SessionLease
from sidecar.store.lock import DirLock
from sidecar.store.schema import SCHEMA_VERSION
from sidecar.store.scrub import WAIT_S
from sidecar.store.sqlite_state import SqliteState
from sidecar.store.terms_place import FilePlace
from sidecar.store.types import (
    CollectionInfo,
    CollectionState,
    Op,
    OpResult,
    ScrubReport,
)
from sidecar.store.view_place import FileViewPlace
from sidecar.store.writer import Tx, Writer, map_sqlite_error

log = structlog.get_logger(__name__)


EmbedFn = Callable[[list[str]], Any]
Progress = Callable[[int, int | None], None]


class Store(SqliteState, StoreCore):
    """SQLite-backed record store with vector search. Create with :meth:`open`.

    Implements :class:`sidecar.store.interface.StoreBackend`."""

    backend = "sqlite"
    ann_loads = True
    schema_version = SCHEMA_VERSION

    # ---- lifecycle ---------------------------------------------------------------------

    def __init__(self) -> None:  # use Store.open()
        self._closed = True  # API closed: no new reads or writes
        self._shut = True  # SQLite connections closed

    @classmethod
    def open(  # noqa: PLR0913 - keyword-only store options
        cls,
        data_dir: str | os.PathLike[str],
        *,
        embed_dims: int,
        fingerprint: str = "",
        tiers: Sequence[int] = (),
        ann_dims: int | None = None,
        settings: StoreSettings | None = None,
        synchronous: str = "FULL",
        index_threads: int = 1,
        profile: Mapping[str, Any] | None = None,
        model: str = "",
        allow_fingerprint_mismatch: bool = False,
        background: bool = True,
        exact_threshold: int | None = None,
        checkpoint_idle_s: float | None = None,
    ) -> Store:
        """Open (creating if needed) the store in ``data_dir``.

        ``embed_dims``: the embedder's dimension (D in the collection rules).
        ``fingerprint``: the embedding fingerprint; "" skips the check. ``model``: the
        embedding model's name, recorded beside it so a mismatch can name both models.
        ``tiers``: Matryoshka prefix dims the embedder supports (e.g. ``(64, 256)``).
        ``ann_dims``: dimension of the HNSW graph for D-dim collections (a tier, or D); the
        default is the largest tier, else D. Candidates from a smaller tier are re-ranked
        with the full vectors.
        ``synchronous``: "FULL" (default, survives power loss) or "NORMAL" (survives process
        crashes only).
        ``background``: run the indexer and the idle checkpoint thread (tests may disable).
        Raises StoreLocked, FingerprintMismatch, SchemaTooNew, StorageUnavailable.
        """
        self = cls()
        self._shut = False
        tiers = tuple(tiers)
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise InvalidInput("synchronous must be FULL, NORMAL or EXTRA")
        self._setup(
            Path(data_dir),
            embed_dims=embed_dims,
            fingerprint=fingerprint,
            model=model,
            tiers=tiers,
            ann_dims=check_dims(embed_dims, tiers, ann_dims),
            settings=settings,
            synchronous=synchronous,
            index_threads=index_threads,
            exact_threshold=exact_threshold,
            checkpoint_idle_s=checkpoint_idle_s,
        )
        self._open(allow_fingerprint_mismatch, profile, background)
        return self

    def _open(
        self, allow_mismatch: bool, profile: Mapping[str, Any] | None, background: bool
    ) -> None:
        started = time.monotonic()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StorageUnavailable(
                f"cannot create data directory {self.data_dir}: {exc.strerror}"
            ) from exc
        warn_if_shared(self.data_dir)
        self._lock = DirLock(self.data_dir)
        self._lock.acquire()
        try:
            _opening._refuse_vanished_database(self)
            try:
                _opening._open_db(self, allow_mismatch, profile)
                report = _opening._load_indexes(self)
            except sqlite3.Error as exc:  # a damaged file shows up on any read
                raise map_sqlite_error(exc, "open", str(self.db_path)) from exc
            self.open_report: dict[str, int] = report
            self._vclock = itertools.count(self._seq + 1)
            self._versions = {cid: self._seq for cid in self._by_cid}
            self._state_seq = self._seq
        except BaseException:
            self._close_conns()
            self._lock.release()
            raise
        self._closed = False
        self._writer = Writer(self, self._pages)
        self._writer.start()
        try:
            self._pages.start()  # a large file's page check, beside the start
        except BaseException:
            self.close()
            raise
        if background:
            self._indexer = Indexer(functools.partial(_maintenance._index_step, self))
            self._indexer.start()
            for cid in self._indexes:
                self._indexer.notify(cid)
            self._ticker = threading.Thread(
                target=self._tick, name="libravdb-store-checkpoint", daemon=True
            )
            self._ticker.start()
        log.info(
            "store.opened",
            data_dir=str(self.data_dir),
            schema=SCHEMA_VERSION,
            collections=len(self._collections),
            records=sum(self._counts.values()),
            seconds=round(time.monotonic() - started, 3),
            **report,
        )

    def close(self) -> None:
        """Checkpoint (save graphs), stop the threads, close SQLite, release the lock."""
        if self._closed:
            return
        # first: the writer thread and the checkpoint thread may be waiting for it
        self._pages.cancel()
        self._stop_event.set()
        self._prefetcher.shutdown(wait=True, cancel_futures=True)
        if self._ticker is not None:
            self._ticker.join()
        if self._indexer is not None:
            self._indexer.stop()
            self._indexer.join()
        self._writer.stop()
        self._writer.join()
        self._closed = True
        try:
            # Nothing persists before the page check has passed: not the log into a
            # database that may be damaged, nor graphs read from it (nothing was written
            # meanwhile, so the saved ones still hold what they did at open).
            if self._pages.passed:
                self._checkpoint_indexes()
                with contextlib.suppress(sqlite3.Error):
                    self._wconn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._close_conns()
            self._lock.release()
            log.info("store.closed", data_dir=str(self.data_dir))

    def page_check_report(self) -> dict[str, Any] | None:
        return self._pages.report()

    def on_failure(self, callback: Callable[[Exception], None]) -> None:
        self._pages.on_failure(callback)

    def terms_place(self) -> FilePlace:
        return FilePlace(self.data_dir, self.collection_states)

    def view_place(self) -> FileViewPlace:
        return FileViewPlace(self.data_dir)

    def graph_place(self) -> FileGraphPlace:
        return FileGraphPlace(self.data_dir)

    def _close_conns(self) -> None:
        self._shut = True
        with self._readers_lock:
            for c in self._readers:
                with contextlib.suppress(sqlite3.Error):
                    c.close()
            self._readers.clear()
        wconn = getattr(self, "_wconn", None)
        if wconn is not None:
            with contextlib.suppress(sqlite3.Error):
                wconn.close()
        # last: a check that did not pass keeps its read-only connection open until now,
        # so that no close above checkpointed the log into the database (page_check.py)
        with contextlib.suppress(sqlite3.Error):
            self._pages.close()

    # ---- the writer thread's hook (writer.WriterHost) ------------------------------------

    _after_commit = _commits._after_commit  # in-memory effects of committed jobs

    # ---- collections -------------------------------------------------------------------

    def collection(self, name: str) -> CollectionInfo | None:
        return self._collections.get(name)

    def prefetch_index(self, collection: str) -> bool:
        return _lazy.prefetch(self, collection)

    def collections(
        self, *, prefix: str | None = None, namespace: str | None = None
    ) -> list[CollectionInfo]:
        """Collections sorted by name; ``prefix`` is a raw prefix, ``namespace`` exact."""
        out = list(self._collections.values())
        if prefix is not None:
            out = [c for c in out if c.name.startswith(prefix)]
        if namespace is not None:
            out = [c for c in out if N.in_namespace(c.name, namespace)]
        return sorted(out, key=lambda c: c.name)

    def collection_versions(self, names: Iterable[str]) -> dict[str, int]:
        """Per name, a number that changes with every put/patch/delete of one of its
        records and with its creation or drop (0 for a missing collection)."""
        out: dict[str, int] = {}
        for name in names:
            info = self._collections.get(name)
            out[name] = 0 if info is None else self._versions.get(info.cid, 0)
        return out

    def collection_states(self, names: Iterable[str]) -> dict[str, CollectionState]:
        """Per name, its :class:`CollectionState` (zeros when missing); ``max_seq`` is the
        store sequence of the last commit (one writer: later writes get greater ones)."""
        out: dict[str, CollectionState] = {}
        with self._state_lock:
            for name in names:
                info = self._collections.get(name)
                if info is None:
                    out[name] = CollectionState()
                    continue
                cid = info.cid
                out[name] = CollectionState(
                    cid,
                    self._versions.get(cid, 0),
                    self._counts.get(cid, 0),
                    self._removals.get(cid, 0),
                    self._state_seq,
                )
        return out

    def ensure_collections_future(self, names: Iterable[str]) -> Future[list[CollectionInfo]]:
        wanted = [N.validate_collection(n) for n in names]

        def job(tx: Tx) -> list[CollectionInfo]:
            return [_commits._ensure_in_tx(self, tx, n) for n in wanted]

        return self._submit(job)

    # ---- writes ------------------------------------------------------------------------

    _prepare = _ops._prepare
    _apply_op = _ops._apply_op

    def _write_future(self, ops: list[Op]) -> Future[list[OpResult]]:
        def job(tx: Tx) -> list[OpResult]:
            return [self._apply_op(tx, op) for op in ops]

        return self._submit(job)

    increment_future = _commits.increment_future

    # ---- the parts' operations, bound by assignment: the signatures (and what they
    # promise) are StoreCore's, which mypy checks these functions against ---------------

    add_tombstones = _tombstones.add_tombstones
    remove_tombstones = _tombstones.remove_tombstones
    tombstoned = _tombstones.tombstoned
    tombstoned_anywhere = _tombstones.tombstoned_anywhere
    list_tombstones = _tombstones.list_tombstones

    get = _reads.get
    get_many = _reads.get_many
    metadata_many = _reads.metadata_many
    _list_records = _reads.list_records
    _columns = _reads.columns
    _changed_since = _reads.changed_since
    _search = _vector_search.search

    _list_by_time = _time_reads.list_by_time
    _count_by_time = _time_reads.count_by_time
    _time_spans = _time_reads.time_spans
    _time_histogram = _time_reads.time_histogram
    session_keys = _time_reads.session_keys

    checkpoint = _maintenance.checkpoint
    index_status = _maintenance.index_status
    wait_indexed = _maintenance.wait_indexed
    run_index_work = _maintenance.run_index_work
    storage_bytes = _maintenance.storage_bytes
    _checkpoint_indexes = _maintenance._checkpoint_indexes
    _dirty_cids = _maintenance._dirty_cids
    _tick = _maintenance._tick

    # ---- counts (the in-memory counters) ----------------------------------------------

    def count(self, collection: str) -> int:
        info = self._collections.get(collection)
        return 0 if info is None else self._counts.get(info.cid, 0)

    def count_prefix(self, prefix: str) -> int:
        """Records in every collection whose name starts with the raw ``prefix``."""
        return sum(
            self._counts.get(c.cid, 0)
            for c in list(self._collections.values())
            if c.name.startswith(prefix)
        )

    def count_namespace(self, namespace: str) -> int:
        """Records in ``namespace`` and its sub-collections (exact namespace match)."""
        return sum(
            self._counts.get(c.cid, 0)
            for c in list(self._collections.values())
            if N.in_namespace(c.name, namespace)
        )

    def total_records(self) -> int:
        return sum(self._counts.values())

    def max_seq(self) -> int:
        return self._applied_seq

    # ---- checkpoints and index maintenance ---------------------------------------------

    def scrub_deleted(self, wait_s: float = WAIT_S) -> ScrubReport:
        """Remove what was deleted from the files: checkpoint the log into the database
        file and truncate it (rows are zeroed on delete: ``secure_delete``), waiting at
        most ``wait_s`` for readers of older snapshots, and have the changed graphs saved
        (without the deleted vectors) at the checkpoint thread's next tick. Nothing to do,
        and no cost, when nothing was deleted since the last scrub (scrub.py)."""
        return self._scrubber.scrub(wait_s)

    def bulk_load(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to defer: inserts go to the exact tail, the indexer's graph work is
        already in the background."""
        return contextlib.nullcontext()

    # ---- session locks (one process owns the directory: in-process locks suffice) -------

    def session_lock(
        self, key: str, timeout: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the lock ``key`` for the ``with`` block (SessionLocked after ``timeout``)."""
        return self._session_locks.hold(key, timeout)

    def acquire_session_lock(self, key: str, timeout: float | None = None) -> SessionLease:
        return self._session_locks.acquire(key, timeout)

    def try_session_lock(self, key: str) -> SessionLease | None:
        return self._session_locks.try_acquire(key)
