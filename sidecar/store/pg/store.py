"""The PostgreSQL + pgvector store: :class:`sidecar.store.interface.StoreBackend` on a
database that several daemons may share. Open it with
``sidecar.store.backend.open_store("postgresql://...", embed_dims=...)``.

:class:`PgStore` is the state its parts share (``state.py``) plus the store core
(:class:`sidecar.store.core.StoreCore`); here each primitive and backend-specific
operation is bound to its part. Map: ``opening.py`` (connect, migrate, fingerprint),
``conn.py`` (pool, errors, transactions), ``writes.py``, ``reads.py``, ``search.py``
(exact and funnel search in SQL), ``indexes.py`` (one partial HNSW index per large
collection), ``bulk.py`` (bulk loads: index builds deferred to their end), ``locks.py``
(session and presence advisory locks), ``reembed.py``. docs/store.md, "PostgreSQL
backend", has the design and the durability promise.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

from sidecar.config import StoreSettings, scrub
from sidecar.store.core import StoreCore, closed_future
from sidecar.store.errors import StoreError
from sidecar.store.interface import SessionLease
from sidecar.store.pg import bulk as _bulk
from sidecar.store.pg import indexes as _indexes
from sidecar.store.pg import locks as _locks
from sidecar.store.pg import opening as _opening
from sidecar.store.pg import reads as _reads
from sidecar.store.pg import search as _vector_search
from sidecar.store.pg import time_reads as _time_reads
from sidecar.store.pg import writes as _writes
from sidecar.store.pg.saved_graphs import PgGraphPlace
from sidecar.store.pg.saved_terms import PgTermsPlace
from sidecar.store.pg.saved_views import PgViewPlace
from sidecar.store.pg.schema import SCHEMA_VERSION
from sidecar.store.pg.state import PgState
from sidecar.store.types import (
    CollectionInfo,
    IndexStatus,
    Op,
    OpResult,
    ScrubReport,
    StorageBytes,
)

log = structlog.get_logger(__name__)

T = TypeVar("T")


class PgStore(PgState, StoreCore):
    """A store in a PostgreSQL database (``libravdb`` schema). Create with :meth:`open`."""

    backend = "postgresql"
    schema_version = SCHEMA_VERSION
    _indexer: _indexes.PgIndexer | None
    _bulk: _bulk.BulkLoad
    _executor: ThreadPoolExecutor

    def __init__(self) -> None:  # use PgStore.open()
        self._closed = True
        self.bad_records: dict[tuple[str, str], str] = {}

    @classmethod
    def open(  # noqa: PLR0913 - the keyword options of Store.open, plus the pool's
        cls,
        url: str,
        *,
        embed_dims: int,
        fingerprint: str = "",
        tiers: Sequence[int] = (),
        ann_dims: int | None = None,
        settings: StoreSettings | None = None,
        profile: Mapping[str, Any] | None = None,
        model: str = "",
        allow_fingerprint_mismatch: bool = False,
        background: bool = True,
        exact_threshold: int | None = None,
        pool_size: int = 8,
        timeout: float = 10.0,
        synchronous: str = "FULL",
        index_threads: int = 1,
        checkpoint_idle_s: float | None = None,
    ) -> PgStore:
        """Open (creating or migrating the schema) the store in the database at ``url``.

        The arguments are :meth:`sidecar.store.store.Store.open`'s; the SQLite-only ones
        (``synchronous``, ``index_threads``, ``checkpoint_idle_s``) are accepted and ignored:
        PostgreSQL commits durably (``synchronous_commit`` on) and builds its own indexes.
        ``pool_size``: connections at most; ``timeout``: seconds to wait for a connection
        before StorageUnavailable. Raises FingerprintMismatch, SchemaTooNew,
        StorageUnavailable, StoreLocked (a re-embed is running).
        """
        del synchronous, index_threads, checkpoint_idle_s  # SQLite's; see the docstring
        self = cls()
        self._setup(
            url,
            embed_dims=embed_dims,
            fingerprint=fingerprint,
            tiers=tuple(tiers),
            ann_dims=ann_dims,
            settings=settings if settings is not None else StoreSettings(),
            exact_threshold=exact_threshold,
            model=model,
        )
        self._indexer = None
        self._bulk = _bulk.BulkLoad(self)
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="libravdb-pg-write")
        self._connect(
            allow_fingerprint_mismatch, profile, background, pool_size=pool_size, timeout=timeout
        )
        return self

    def _connect(
        self,
        allow_mismatch: bool,
        profile: Mapping[str, Any] | None,
        background: bool,
        *,
        pool_size: int,
        timeout: float,
    ) -> None:
        started = time.monotonic()
        self.db = _opening.open_db(self, self.url, pool_size=pool_size, timeout=timeout)
        try:
            self._presence = _locks.hold_presence(self.db)
            _opening.check_meta(self, allow_mismatch, profile)
            self._indexed = _indexes.Plan(self).indexed
        except BaseException:
            self._close_conns()
            self._executor.shutdown()
            raise
        self._closed = False
        if background:
            self._indexer = _indexes.PgIndexer(self)
            self._indexer.start()
            self._indexer.notify()
        log.info(
            "store.opened",
            database=self._location,
            schema=SCHEMA_VERSION,
            seconds=round(time.monotonic() - started, 3),
        )

    def close(self) -> None:
        """Finish the writes already submitted (as the SQLite writer drains its queue),
        refuse new ones, stop the indexer, close the connections."""
        if self._closed:
            return
        self._executor.shutdown(wait=True)  # new submissions fail from here on
        self._closed = True
        if self._indexer is not None:
            self._indexer.stop()
            self._indexer.join()
        self._close_conns()
        log.info("store.closed", database=self._location)

    def _close_conns(self) -> None:
        self._bulk.close()
        presence, self._presence = self._presence, None
        if presence is not None:
            _locks.release_all(presence)
        self.db.close()

    def _after_write(self, changed: list[tuple[int, int]]) -> None:
        """Wake the indexer when a write moved a collection across a threshold (in a bulk
        load, after deferring that collection's build: the indexer then finds it locked)."""
        if self._bulk.depth:
            self._bulk.note(changed)
        if self._indexer is None:
            return
        t = self.exact_threshold
        for cid, n in changed:
            indexed = cid in self._indexed
            if (n >= t and not indexed) or (indexed and n < t // 2) or (n == 0 and indexed):
                self._indexer.notify()
                return

    def _refresh_indexed(self) -> None:
        """Re-read which collections have a valid index, and wake the indexer (after a bulk
        load: whatever it deferred and did not build is the indexer's again)."""
        with contextlib.suppress(StoreError):
            self._indexed = _indexes.Plan(self).indexed
        if self._indexer is not None:
            self._indexer.notify()

    def _submit(self, fn: Callable[[], T]) -> Future[T]:
        if self._closed:
            return closed_future()
        try:
            return self._executor.submit(fn)
        except RuntimeError:  # shut down meanwhile
            return closed_future()

    # ---- the parts' operations, bound by assignment: the signatures (and what they
    # promise) are StoreCore's, which mypy checks these functions against ---------------

    dims_for = _reads.dims_for
    collection = _reads.collection
    collections = _reads.collections
    collection_versions = _reads.collection_versions
    collection_states = _reads.collection_states
    ensure_collections = _writes.ensure_collections

    add_tombstones = _writes.add_tombstones
    remove_tombstones = _writes.remove_tombstones
    tombstoned = _reads.tombstoned
    tombstoned_anywhere = _reads.tombstoned_anywhere
    list_tombstones = _reads.list_tombstones

    get = _reads.get
    get_many = _reads.get_many
    metadata_many = _reads.metadata_many
    _list_records = _reads.list_records
    _columns = _reads.columns
    _changed_since = _reads.changed_since
    _search = _vector_search.search

    count = _reads.count
    count_prefix = _reads.count_prefix
    count_namespace = _reads.count_namespace
    total_records = _reads.total_records
    max_seq = _reads.max_seq

    _list_by_time = _time_reads.list_by_time
    _count_by_time = _time_reads.count_by_time
    _time_spans = _time_reads.time_spans
    _time_histogram = _time_reads.time_histogram
    session_keys = _time_reads.session_keys

    run_index_work = _indexes.run_index_work

    def ensure_collections_future(self, names: Iterable[str]) -> Future[list[CollectionInfo]]:
        wanted = list(names)
        return self._submit(lambda: _writes.ensure_collections(self, wanted))

    # ---- writes ------------------------------------------------------------------------

    def _prepare(self, op: Op) -> Op:
        return _writes.prepare(op)

    def _write_future(self, ops: list[Op]) -> Future[list[OpResult]]:
        return self._submit(lambda: _writes.write(self, ops))

    write = _writes.write  # in the caller's thread: no executor hop

    def increment_future(
        self, updates: Mapping[str, Sequence[str]], key: str = "access_count"
    ) -> Future[int]:
        plan = {c: list(ids) for c, ids in updates.items()}
        return self._submit(lambda: _writes.increment(self, plan, key))

    increment = _writes.increment

    # ---- maintenance -------------------------------------------------------------------

    def checkpoint(self) -> dict[str, int]:
        """Nothing to save: PostgreSQL's commits are durable and its indexes its own."""
        self._guard()
        return {"saved": 0, "repaired": 0}

    def scrub_deleted(self, wait_s: float = 5.0) -> ScrubReport:
        """Nothing this store can do: deleted rows stay in the server's pages and WAL
        until PostgreSQL reuses them (docs/store.md, "Deleted records on disk")."""
        return ScrubReport()

    def index_status(self) -> list[IndexStatus]:
        return _indexes.Plan(self).status

    def wait_indexed(self, timeout: float = 60.0) -> bool:
        """Block until no index needs building or dropping (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            indexer = self._indexer
            if indexer is None:
                self.run_index_work()
            plan = _indexes.Plan(self)
            if plan.idle and (indexer is None or not indexer.busy):
                return True
            if indexer is not None:
                indexer.notify()
                time.sleep(0.05)
        return False

    @contextlib.contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Defer the ANN index builds of the collections this block fills until it exits,
        then build them once (pg/bulk.py; docs/store.md, "Bulk loads")."""
        self._guard()
        self._bulk.enter()
        failed = True
        try:
            yield
            failed = False
        finally:
            self._bulk.exit(failed)

    def terms_place(self) -> PgTermsPlace:
        return PgTermsPlace(self)

    def view_place(self) -> PgViewPlace:
        return PgViewPlace(self)

    def graph_place(self) -> PgGraphPlace:
        return PgGraphPlace(self)

    def ping(self, timeout: float = 2.0) -> str | None:
        """Whether the server answers (None) or why not (masked): ``health``'s probe."""
        problem = self.db.ping(timeout)
        return None if problem is None else scrub(problem, self.url)

    def storage_bytes(self) -> StorageBytes:
        rows = self.db.read(
            "SELECT coalesce(sum(pg_table_size(c.oid)) FILTER (WHERE c.relkind IN ('r', 'S')), 0),"
            " coalesce(sum(pg_relation_size(c.oid)) FILTER (WHERE c.relkind = 'i'), 0) "
            "FROM pg_class c WHERE c.relnamespace = %s::regnamespace",
            ("libravdb",),
        )
        return StorageBytes(database=int(rows[0][0]), log=0, indexes=int(rows[0][1]))

    # ---- session locks (advisory locks: every daemon on the database) -------------------

    def session_lock(
        self, key: str, timeout: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        self._guard()
        return _locks.session_lock(self.db, key, timeout)

    def acquire_session_lock(self, key: str, timeout: float | None = None) -> SessionLease:
        self._guard()
        return _locks.acquire_session_lock(self.db, key, timeout)

    def try_session_lock(self, key: str) -> SessionLease | None:
        self._guard()
        return _locks.try_session_lock(self.db, key)
