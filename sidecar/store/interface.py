"""The one store interface, implemented by both backends.

:class:`StoreBackend` lists what the layers above the store call: the embedded SQLite +
hnswlib :class:`sidecar.store.store.Store` (the default) and the PostgreSQL + pgvector
:class:`sidecar.store.pg.store.PgStore` satisfy it with the same semantics (docs/store.md,
"PostgreSQL backend", says where they differ and why). Open either with
:func:`sidecar.store.backend.open_store`.

Two methods exist for several daemons sharing one database (a PostgreSQL store):

* :meth:`StoreBackend.collection_versions` gives, per collection, a number that changes
  whenever a record of the collection is put, patched or deleted, or the collection is
  created or dropped, by any process. A cache that remembers the number it loaded at is
  stale exactly when the number differs. ``increment`` (access counts) does not change it,
  as it does not change the record's version: bookkeeping is not an edit.
* :meth:`StoreBackend.collection_states` and :meth:`StoreBackend.changed_since` let such a
  cache catch up in O(changes): the state says whether only puts and patches happened
  since the one it loaded at (its ``removals`` counter did not move), and
  ``changed_since(name, state.max_seq)`` reads them.
* :meth:`StoreBackend.session_lock` excludes every other holder of the same key, in this
  process or (PostgreSQL) any other daemon on the database, until the block exits: what
  compaction and forget take so that two daemons never work on one session at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, Protocol, Self, TextIO

from sidecar.store.types import (
    CollectionInfo,
    CollectionState,
    ExportStats,
    Hit,
    ImportStats,
    IndexStatus,
    Op,
    OpResult,
    Put,
    Record,
    ScrubReport,
    StorageBytes,
    TimeHistogram,
    TimeKey,
    TimeQuery,
    TimeRange,
    TimeSpan,
)

EmbedFn = Callable[[list[str]], Any]
Progress = Callable[[int, int | None], None]
SkipFn = Callable[[str, str, dict[str, Any]], bool]


class SessionLease(Protocol):
    """A held session lock (from :meth:`StoreBackend.try_session_lock`)."""

    def release(self) -> None:
        """Give the lock back (idempotent; any thread may call it)."""


class StoreBackend(Protocol):
    """What every store backend offers; see the module docstring and docs/store.md."""

    embed_dims: int
    fingerprint: str
    model: str
    # (collection, id) -> why: records found damaged on read, skipped (SQLite only: a
    # PostgreSQL server checks its pages itself, so this stays empty there)
    bad_records: dict[tuple[str, str], str]

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""

    @property
    def location(self) -> str:
        """The data directory, or the database URL without its password."""

    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    # ---- collections -------------------------------------------------------------------

    def dims_for(self, name: str) -> int: ...

    def collection(self, name: str) -> CollectionInfo | None: ...

    def collections(
        self, *, prefix: str | None = None, namespace: str | None = None
    ) -> list[CollectionInfo]: ...

    def ensure_collections(self, names: Iterable[str]) -> list[CollectionInfo]: ...

    def ensure_collections_future(self, names: Iterable[str]) -> Future[list[CollectionInfo]]: ...

    def collection_versions(self, names: Iterable[str]) -> dict[str, int]:
        """Per name, a number that changes with every put/patch/delete of one of its
        records and with its creation or drop (0 for a missing collection)."""

    def collection_states(self, names: Iterable[str]) -> dict[str, CollectionState]:
        """Per name, its :class:`CollectionState` (all zeros for a missing collection), read
        at once for every name: what a cache compares to decide between nothing to do,
        :meth:`changed_since` (only puts and patches since its state) and a reload."""

    # ---- writes ------------------------------------------------------------------------

    def write_future(self, ops: Sequence[Op]) -> Future[list[OpResult]]: ...

    def write(self, ops: Sequence[Op]) -> list[OpResult]: ...

    def put(
        self,
        collection: str,
        record_id: str,
        *,
        text: str = "",
        metadata: Mapping[str, Any] | None = None,
        vector: Any = None,
        if_version: int | None = None,
    ) -> OpResult: ...

    def put_many(self, puts: Sequence[Put]) -> list[OpResult]: ...

    def patch(
        self,
        collection: str,
        record_id: str,
        metadata: Mapping[str, Any],
        *,
        text: str | None = None,
        if_version: int | None = None,
        bump_version: bool = True,
        missing_ok: bool = False,
    ) -> OpResult: ...

    def delete(self, collection: str, record_id: str) -> bool: ...

    def delete_many(self, collection: str, ids: Iterable[str]) -> int: ...

    def drop_collections(self, names: Iterable[str]) -> int: ...

    def increment_future(
        self, updates: Mapping[str, Sequence[str]], key: str = "access_count"
    ) -> Future[int]: ...

    def increment(self, updates: Mapping[str, Sequence[str]], key: str = "access_count") -> int: ...

    # ---- tombstones --------------------------------------------------------------------

    def add_tombstones(self, namespace: str, keys: Iterable[str], reason: str = "") -> int: ...

    def remove_tombstones(self, namespace: str, keys: Iterable[str] | None = None) -> int: ...

    def tombstoned(self, namespace: str, keys: Iterable[str]) -> set[str]: ...

    def tombstoned_anywhere(self, keys: Iterable[str]) -> set[str]: ...

    def list_tombstones(self, namespace: str | None = None) -> list[tuple[str, str, str, int]]: ...

    # ---- reads -------------------------------------------------------------------------

    def get(
        self, collection: str, record_id: str, *, include_vector: bool = False
    ) -> Record | None: ...

    def get_many(
        self, collection: str, ids: Iterable[str], *, include_vectors: bool = False
    ) -> list[Record]: ...

    def list_records(
        self,
        collection: str,
        *,
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
        limit: int | None = None,
        after_id: str | None = None,
        include_vectors: bool = False,
    ) -> list[Record]: ...

    def iter_records(
        self, collection: str, *, include_vectors: bool = True, batch: int = 1000
    ) -> Iterable[Record]: ...

    def changed_since(
        self, collection: str, seq: int, *, include_vectors: bool = True, limit: int | None = None
    ) -> list[Record]:
        """The records of ``collection`` whose ``seq`` is greater than ``seq``, in ``seq``
        order (at most ``limit``; page on with the last one's ``seq``): every record put or
        patched since a state whose ``max_seq`` was ``seq``. Deleted records are not
        reported (compare ``CollectionState.removals``). O(changes): an index on
        (collection, seq)."""

    def count(self, collection: str) -> int: ...

    def count_prefix(self, prefix: str) -> int: ...

    def count_namespace(self, namespace: str) -> int: ...

    def total_records(self) -> int: ...

    def max_seq(self) -> int: ...

    # ---- listing by time (docs/store.md, "Listing by time") ----------------------------

    def list_by_time(
        self, query: TimeQuery, *, after: TimeKey | None = None, limit: int = 50
    ) -> list[Record]:
        """At most ``limit`` records of ``query`` (no vectors), newest first: ``ts_ms``
        descending, then collection and id ascending (byte order), the ones after
        ``after`` when given. Reads O(limit) rows per collection (an index range)."""

    def count_by_time(self, query: TimeQuery) -> int:
        """How many records ``list_by_time`` pages through for ``query`` (index entries)."""

    def time_spans(self, collections: Sequence[str]) -> dict[str, TimeSpan]:
        """Per collection named (missing ones: an empty span): how many records, their
        earliest and latest ``ts_ms``; one aggregate query."""

    def time_histogram(
        self, collections: Sequence[str], *, width_ms: int, lo_ms: int, hi_ms: int
    ) -> TimeHistogram:
        """Records of ``collections`` per bucket ``ts_ms // width_ms`` for the times within
        ``lo_ms..hi_ms`` (inclusive, ``0 <= lo_ms``), the number outside them, and the
        earliest and latest time within: aggregate queries (GROUP BY buckets)."""

    def session_keys(self, collection: str) -> list[str]:
        """The distinct session keys (``record_keys.session_key``) of a collection's
        records, sorted by bytes."""

    # ---- search ------------------------------------------------------------------------

    def search(
        self,
        collection: str,
        vector: Any,
        k: int,
        *,
        exclude_ids: Iterable[str] = (),
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
    ) -> list[Hit]: ...

    def search_collections(
        self,
        collections: Sequence[str],
        vector: Any,
        k: int,
        *,
        exclude_by_collection: Mapping[str, Iterable[str]] | None = None,
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
    ) -> list[Hit]: ...

    # ---- maintenance, export / import --------------------------------------------------

    def checkpoint(self) -> dict[str, int]: ...

    def scrub_deleted(self, wait_s: float = 5.0) -> ScrubReport:
        """After deletes that must not stay on disk (a forget): SQLite checkpoints its log
        into the database file and truncates it, so no deleted row's bytes remain in
        either, and saves its graphs without the deleted vectors soon after; PostgreSQL
        does nothing (docs/store.md, "Deleted records on disk"). Cheap when nothing was
        deleted since the last scrub."""

    def index_status(self) -> list[IndexStatus]: ...

    def wait_indexed(self, timeout: float = 60.0) -> bool: ...

    def run_index_work(self) -> int: ...

    def bulk_load(self) -> AbstractContextManager[None]:
        """A block of many writes: the store may defer its ANN index work on what the block
        writes until it exits (PostgreSQL builds those indexes once, at the exit; SQLite
        indexes in the background anyway). Every write keeps its semantics and its
        durability; searches meanwhile are exact where no index is ready (correct, slower).
        Blocks may nest or overlap from several threads; the last exit does the work."""

    def stats(self) -> dict[str, Any]: ...

    def storage_bytes(self) -> StorageBytes:
        """Space the store takes: database, write-ahead log (SQLite), vector indexes."""

    def export_ndjson(
        self,
        out: TextIO,
        *,
        collections: Iterable[str] | None = None,
        include_vectors: bool = True,
        progress: Progress | None = None,
    ) -> ExportStats: ...

    def import_ndjson(
        self,
        src: Iterable[str],
        *,
        embed: EmbedFn | None = None,
        progress: Progress | None = None,
        batch: int = 256,
        skip: SkipFn | None = None,
    ) -> ImportStats: ...

    # ---- locks between daemons ---------------------------------------------------------

    def session_lock(self, key: str, timeout: float | None = None) -> AbstractContextManager[None]:
        """Hold the lock named ``key`` for the ``with`` block (blocking; ``timeout``
        seconds at most, then :class:`sidecar.store.errors.StoreLocked`)."""

    def acquire_session_lock(self, key: str, timeout: float | None = None) -> SessionLease:
        """Block until the lock named ``key`` is held (``timeout``: as ``session_lock``)."""

    def try_session_lock(self, key: str) -> SessionLease | None:
        """The lock named ``key`` if it is free now, else None (never blocks)."""
