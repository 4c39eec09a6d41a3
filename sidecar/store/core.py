"""The store core: every public operation of :class:`sidecar.store.interface.StoreBackend`
that does not depend on the SQL dialect or on the kind of index, written once.

Both backends (``store.Store``, SQLite + hnswlib; ``pg.store.PgStore``, PostgreSQL +
pgvector) subclass :class:`StoreCore` and supply its primitives, the abstract methods
below (a write transaction, ``write_future``; one-collection reads and searches; the
counts), and the rest of the interface (tombstones, listing by time, maintenance, locks),
which differs in SQL and in where state lives. What the core decides is decided once for
both: the argument checks of ``open`` and ``changed_since``, what ``put`` / ``patch`` /
``delete`` / ``drop_collections`` become (one ``write``), how a multi-collection search
merges, paging, export and import, the ``stats`` summary, and refusing calls on a closed
store. ``common.py`` holds the record semantics the backends' primitives share.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, Protocol, Self

from sidecar.store import by_time, ndjson
from sidecar.store.common import check_changed_since, iter_pages, merge_searches
from sidecar.store.errors import InvalidInput, StoreClosed
from sidecar.store.graph_place import GraphPlace
from sidecar.store.rows import Columns
from sidecar.store.terms_place import TermsPlace
from sidecar.store.types import (
    CollectionInfo,
    CollectionState,
    Delete,
    DropCollection,
    Hit,
    IndexStatus,
    ListQuery,
    Op,
    OpResult,
    Patch,
    Put,
    Record,
    ScrubReport,
    SearchFilter,
    StorageBytes,
    TimeHistogram,
    TimeKey,
    TimeQuery,
    TimeRange,
    TimeSpan,
)
from sidecar.store.view_place import ViewPlace

EmbedFn = Callable[[list[str]], Any]
Progress = Callable[[int, int | None], None]
SkipFn = Callable[[str, str, dict[str, Any]], bool]


class SessionLease(Protocol):
    """A held session lock (from :meth:`StoreBackend.try_session_lock`)."""

    def release(self) -> None:
        """Give the lock back (idempotent; any thread may call it)."""


def check_dims(embed_dims: int, tiers: Sequence[int], ann_dims: int | None) -> int:
    """``open``'s dimension arguments (InvalidInput when off); the ANN graph's dimension:
    ``ann_dims``, by default the largest tier, else ``embed_dims``."""
    if embed_dims < 1:
        raise InvalidInput("embed_dims must be >= 1")
    for t in tiers:
        if not 1 < t < embed_dims:
            raise InvalidInput(f"tier {t} must be between 2 and {embed_dims - 1}")
    ann = ann_dims if ann_dims is not None else (max(tiers) if tiers else embed_dims)
    if not 1 < ann <= embed_dims:
        raise InvalidInput(f"ann_dims {ann} must be between 2 and {embed_dims}")
    return ann


def closed_future() -> Future[Any]:
    """A future already failed with StoreClosed (a write submitted after ``close``)."""
    fut: Future[Any] = Future()
    fut.set_exception(StoreClosed("the store is closed"))
    return fut


class Closable:
    """A store, or the state its parts share: ``_guard`` refuses once it is closed."""

    _closed: bool  # API closed: no new reads or writes

    @property
    def closed(self) -> bool:
        return self._closed

    def _guard(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")


class StoreCore(Closable, abc.ABC):
    """What every store backend offers (``interface.StoreBackend`` is this class), and
    what they do alike; see the module docstring and docs/store.md."""

    backend: str  # "sqlite" or "postgresql"
    # whether the ANN index loads into this process before it answers (SQLite's saved
    # graphs), where PostgreSQL's server answers at once
    ann_loads: bool = False
    schema_version: int
    embed_dims: int
    fingerprint: str
    model: str
    # (collection, id) -> why: records found damaged on read, skipped (SQLite only: a
    # PostgreSQL server checks its pages itself, so this stays empty there)
    bad_records: dict[tuple[str, str], str]

    @property
    @abc.abstractmethod
    def location(self) -> str: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- collections -------------------------------------------------------------------

    @abc.abstractmethod
    def dims_for(self, name: str) -> int: ...

    @abc.abstractmethod
    def collection(self, name: str) -> CollectionInfo | None: ...

    def prefetch_index(self, collection: str) -> bool:
        """Start loading what the collection's ANN searches need, in the background, so
        that the first search does not wait for it (a view about to rank by the store's
        index calls this before it reads its rows); True if a load was started. A
        backend whose index lives in its server has nothing to load: False."""
        del collection
        return False

    @abc.abstractmethod
    def collections(
        self, *, prefix: str | None = None, namespace: str | None = None
    ) -> list[CollectionInfo]:
        """Collections sorted by name; ``prefix`` is a raw prefix, ``namespace`` exact."""

    def ensure_collections(self, names: Iterable[str]) -> list[CollectionInfo]:
        return self.ensure_collections_future(names).result()

    @abc.abstractmethod
    def ensure_collections_future(self, names: Iterable[str]) -> Future[list[CollectionInfo]]:
        """Create the collections that do not exist (one transaction)."""

    @abc.abstractmethod
    def collection_versions(self, names: Iterable[str]) -> dict[str, int]:
        """Per name, a number that changes with every put/patch/delete of one of its
        records and with its creation or drop (0 for a missing collection)."""

    @abc.abstractmethod
    def collection_states(self, names: Iterable[str]) -> dict[str, CollectionState]:
        """Per name, its :class:`CollectionState` (all zeros for a missing collection), read
        at once for every name: what a cache compares to decide between nothing to do,
        :meth:`changed_since` (only puts and patches since its state) and a reload."""

    # ---- writes ------------------------------------------------------------------------

    def write_future(self, ops: Sequence[Op]) -> Future[list[OpResult]]:
        """Run ``ops`` atomically (all or nothing); see :meth:`write`. They are checked
        first, in the caller's thread: a bad one fails the future, and nothing is written."""
        try:
            prepared = [self._prepare(op) for op in ops]
        except Exception as exc:
            fut: Future[list[OpResult]] = Future()
            fut.set_exception(exc)
            return fut
        return self._write_future(prepared)

    @abc.abstractmethod
    def _prepare(self, op: Op) -> Op:
        """``op`` checked and normalised (cheap; nothing touches the database)."""

    @abc.abstractmethod
    def _write_future(self, ops: list[Op]) -> Future[list[OpResult]]:
        """``write_future`` of prepared operations."""

    def write(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` in one transaction: every one or none (the error is raised)."""
        return self.write_future(ops).result()

    def put(
        self,
        collection: str,
        record_id: str,
        *,
        text: str = "",
        metadata: Mapping[str, Any] | None = None,
        vector: Any = None,
        if_version: int | None = None,
    ) -> OpResult:
        """Upsert one record (version 1 when new, +1 otherwise); see :class:`Put`."""
        return self.write([Put(collection, record_id, text, metadata or {}, vector, if_version)])[0]

    def put_many(self, puts: Sequence[Put]) -> list[OpResult]:
        return self.write(puts)

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
    ) -> OpResult:
        op = Patch(collection, record_id, metadata, text, if_version, bump_version, missing_ok)
        return self.write([op])[0]

    def delete(self, collection: str, record_id: str) -> bool:
        """Delete one record; False if it did not exist (never an error)."""
        return self.write([Delete(collection, record_id)])[0].changed

    def delete_many(self, collection: str, ids: Iterable[str]) -> int:
        """Delete records (idempotent, one transaction); returns how many existed."""
        return sum(r.changed for r in self.write([Delete(collection, i) for i in ids]))

    def drop_collections(self, names: Iterable[str]) -> int:
        """Delete whole collections (one transaction); returns how many existed."""
        return sum(r.changed for r in self.write([DropCollection(n) for n in names]))

    @abc.abstractmethod
    def increment_future(
        self, updates: Mapping[str, Sequence[str]], key: str = "access_count"
    ) -> Future[int]:
        """``metadata[key] += 1`` for each existing (collection, id); missing ones skipped.

        Duplicate ids in one update count once. The version is not bumped (an access count
        is bookkeeping, not an edit, so it never breaks a compare-and-swap).
        """

    def increment(self, updates: Mapping[str, Sequence[str]], key: str = "access_count") -> int:
        return self.increment_future(updates, key).result()

    # ---- tombstones --------------------------------------------------------------------

    @abc.abstractmethod
    def add_tombstones(self, namespace: str, keys: Iterable[str], reason: str = "") -> int: ...

    @abc.abstractmethod
    def remove_tombstones(self, namespace: str, keys: Iterable[str] | None = None) -> int: ...

    @abc.abstractmethod
    def tombstoned(self, namespace: str, keys: Iterable[str]) -> set[str]: ...

    @abc.abstractmethod
    def tombstoned_anywhere(self, keys: Iterable[str]) -> set[str]: ...

    @abc.abstractmethod
    def list_tombstones(self, namespace: str | None = None) -> list[tuple[str, str, str, int]]: ...

    # ---- reads -------------------------------------------------------------------------

    @abc.abstractmethod
    def get(
        self, collection: str, record_id: str, *, include_vector: bool = False
    ) -> Record | None: ...

    @abc.abstractmethod
    def get_many(
        self, collection: str, ids: Iterable[str], *, include_vectors: bool = False
    ) -> list[Record]: ...

    @abc.abstractmethod
    def metadata_many(self, collection: str, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The metadata of the existing records among ``ids``, by id, as ``get_many``
        decodes it (a damaged record left out, as there): a large view keeps no metadata
        and reads it for the rows a request makes candidates of (docs/store.md, "Lean
        rows")."""

    def list_records(
        self,
        collection: str,
        *,
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
        limit: int | None = None,
        after_id: str | None = None,
        include_vectors: bool = False,
    ) -> list[Record]:
        """Records of a collection in id order (byte order of UTF-8, like Go's sort).

        ``where``: metadata equality (all pairs must match); ``after_id`` pages.
        """
        query = ListQuery(where, time_range, limit, after_id, include_vectors)
        return self._list_records(collection, query)

    @abc.abstractmethod
    def _list_records(self, collection: str, query: ListQuery) -> list[Record]:
        """``list_records`` (the backend's SQL)."""

    def iter_records(
        self, collection: str, *, include_vectors: bool = True, batch: int = 1000
    ) -> Iterable[Record]:
        """All records of a collection in id order, paged (for export and re-embedding)."""

        def page(after: str | None, limit: int) -> list[Record]:
            return self.list_records(
                collection, after_id=after, limit=limit, include_vectors=include_vectors
            )

        return iter_pages(page, batch)

    def columns(self, collection: str, after_id: str | None, limit: int) -> Columns:
        """The next ``limit`` records (at most) after ``after_id`` in id order, with their
        vectors, as columns (:class:`~sidecar.store.rows.Columns`): a view's load reads a
        collection by these pages and fills its arrays from them, where a
        :class:`Record` per record and its decoded metadata cost more than the read.
        The records ``list_records(after_id=, limit=, include_vectors=True)`` returns."""
        self._guard()
        if limit <= 0:
            raise InvalidInput("limit must be positive")
        return self._columns(collection, after_id, limit)

    @abc.abstractmethod
    def _columns(self, collection: str, after_id: str | None, limit: int) -> Columns:
        """``columns`` (the backend's SQL)."""

    def changed_since(
        self, collection: str, seq: int, *, include_vectors: bool = True, limit: int | None = None
    ) -> list[Record]:
        """Records whose ``seq`` is greater than ``seq``, in ``seq`` order (index
        ``records_cid_seq``: a range of the collection's entries, O(changes)); see
        :meth:`StoreBackend.changed_since`."""
        self._guard()
        after, checked = check_changed_since(seq, limit)
        return self._changed_since(collection, after, include_vectors, checked)

    @abc.abstractmethod
    def _changed_since(
        self, collection: str, after: int, include_vectors: bool, limit: int | None
    ) -> list[Record]:
        """``changed_since`` with checked arguments (``limit`` None: all)."""

    @abc.abstractmethod
    def count(self, collection: str) -> int: ...

    @abc.abstractmethod
    def count_prefix(self, prefix: str) -> int: ...

    @abc.abstractmethod
    def count_namespace(self, namespace: str) -> int: ...

    @abc.abstractmethod
    def total_records(self) -> int: ...

    @abc.abstractmethod
    def max_seq(self) -> int: ...

    # ---- listing by time (docs/store.md, "Listing by time") ----------------------------

    def list_by_time(
        self, query: TimeQuery, *, after: TimeKey | None = None, limit: int = 50
    ) -> list[Record]:
        """At most ``limit`` records of ``query`` (no vectors), newest first: ``ts_ms``
        descending, then collection and id ascending (byte order), the ones after
        ``after`` when given. Reads O(limit) rows per collection (an index range)."""
        self._guard()
        limit = by_time.check_limit(limit)
        checked = by_time.check_query(query)
        return [] if checked is None else self._list_by_time(checked, after, limit)

    @abc.abstractmethod
    def _list_by_time(self, query: TimeQuery, after: TimeKey | None, limit: int) -> list[Record]:
        """``list_by_time`` of a query ``by_time.check_query`` kept, a checked limit."""

    def count_by_time(self, query: TimeQuery) -> int:
        """How many records ``list_by_time`` pages through for ``query`` (index entries)."""
        self._guard()
        checked = by_time.check_query(query)
        return 0 if checked is None else self._count_by_time(checked)

    @abc.abstractmethod
    def _count_by_time(self, query: TimeQuery) -> int:
        """``count_by_time`` of a query ``by_time.check_query`` kept."""

    def time_spans(self, collections: Sequence[str]) -> dict[str, TimeSpan]:
        """Per collection named (missing ones: an empty span): how many records, their
        earliest and latest ``ts_ms``; one aggregate query."""
        self._guard()
        names = by_time.check_names(collections)
        return {name: TimeSpan() for name in names} | self._time_spans(names)

    @abc.abstractmethod
    def _time_spans(self, names: list[str]) -> dict[str, TimeSpan]:
        """``time_spans`` of the collections among ``names`` that have records."""

    def time_histogram(
        self, collections: Sequence[str], *, width_ms: int, lo_ms: int, hi_ms: int
    ) -> TimeHistogram:
        """Records of ``collections`` per bucket ``ts_ms // width_ms`` for the times within
        ``lo_ms..hi_ms`` (inclusive, ``0 <= lo_ms``), the number outside them, and the
        earliest and latest time within: aggregate queries (GROUP BY buckets)."""
        self._guard()
        width, lo, hi = by_time.check_histogram(width_ms, lo_ms, hi_ms)
        return self._time_histogram(by_time.check_names(collections), width, lo, hi)

    @abc.abstractmethod
    def _time_histogram(self, names: list[str], width: int, lo: int, hi: int) -> TimeHistogram:
        """``time_histogram`` with checked names and bounds."""

    @abc.abstractmethod
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
    ) -> list[Hit]:
        """Top ``k`` records by cosine similarity (score desc, id asc); ``k <= 0`` = all.

        A missing collection gives ``[]``. Vectorless collections score every record 0.
        """
        return self._search(collection, vector, k, SearchFilter(exclude_ids, where, time_range))

    @abc.abstractmethod
    def _search(self, collection: str, vector: Any, k: int, f: SearchFilter) -> list[Hit]:
        """``search`` of one collection (the backend's index or exact scan)."""

    def search_collections(
        self,
        collections: Sequence[str],
        vector: Any,
        k: int,
        *,
        exclude_by_collection: Mapping[str, Iterable[str]] | None = None,
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
    ) -> list[Hit]:
        """Search each collection for ``k``, merge: score desc, collection asc, id asc."""

        def one(name: str, excl: Iterable[str]) -> list[Hit]:
            return self.search(
                name, vector, k, exclude_ids=excl, where=where, time_range=time_range
            )

        return merge_searches(collections, k, one, exclude_by_collection)

    # ---- maintenance, export / import --------------------------------------------------

    @abc.abstractmethod
    def checkpoint(self) -> dict[str, int]: ...

    @abc.abstractmethod
    def scrub_deleted(self, wait_s: float = 5.0) -> ScrubReport:
        """After deletes that must not stay on disk (a forget): SQLite checkpoints its log
        into the database file and truncates it, so no deleted row's bytes remain in
        either, and saves its graphs without the deleted vectors soon after; PostgreSQL
        does nothing (docs/store.md, "Deleted records on disk"). Cheap when nothing was
        deleted since the last scrub."""

    @abc.abstractmethod
    def index_status(self) -> list[IndexStatus]: ...

    @abc.abstractmethod
    def wait_indexed(self, timeout: float = 60.0) -> bool: ...

    @abc.abstractmethod
    def run_index_work(self) -> int: ...

    @abc.abstractmethod
    def bulk_load(self) -> AbstractContextManager[None]:
        """A block of many writes: the store may defer its ANN index work on what the block
        writes until it exits (PostgreSQL builds those indexes once, at the exit; SQLite
        indexes in the background anyway). Every write keeps its semantics and its
        durability; searches meanwhile are exact where no index is ready (correct, slower).
        Blocks may nest or overlap from several threads; the last exit does the work."""

    def stats(self) -> dict[str, Any]:
        out = {
            "backend": self.backend,
            "collections": len(self.collections()),
            "records": self.total_records(),
            "seq": self.max_seq(),
            "schema": self.schema_version,
            "indexes": [dataclasses.asdict(s) for s in self.index_status()],
        }
        check = self.page_check_report()
        if check is not None:
            out["page_check"] = check
        return out

    def page_check_report(self) -> dict[str, Any] | None:
        """The database's page check at open: ``{state: running|ok|failed|cancelled,
        mode: sync|background, seconds}`` (SQLite, ``page_check.py``); None for a
        backend without one (a PostgreSQL server checks its pages itself)."""
        return None

    def terms_place(self) -> TermsPlace | None:
        """Where the views of this store save their BM25 terms (``terms_place.py``): files
        beside a SQLite store, a table of a PostgreSQL one; None keeps none."""
        return None

    def view_place(self) -> ViewPlace | None:
        """Where the views of this store save their rows (``view_place.py``): files beside
        a SQLite store, a table of a PostgreSQL one; None keeps none."""
        return None

    def graph_place(self) -> GraphPlace | None:
        """Where the large views of this store save their graphs (``graph_place.py``):
        files beside a SQLite store, a table of a PostgreSQL one; None keeps none."""
        return None

    def on_failure(self, callback: Callable[[Exception], None]) -> None:
        """Have ``callback(error)`` called, from another thread, if the store finds after
        its open that it cannot be used: SQLite's page check of a large database, which
        runs beside the start, found damage or could not finish. Writes fail with that
        error from then on; the daemon exits with it. Nothing to watch by default."""
        del callback

    @abc.abstractmethod
    def storage_bytes(self) -> StorageBytes:
        """Space the store takes: database, write-ahead log (SQLite), vector indexes."""

    # export and import are the same on both backends (``ndjson.py``)
    export_ndjson = ndjson.export_ndjson
    import_ndjson = ndjson.import_ndjson

    # ---- locks between daemons ---------------------------------------------------------

    @abc.abstractmethod
    def session_lock(self, key: str, timeout: float | None = None) -> AbstractContextManager[None]:
        """Hold the lock named ``key`` for the ``with`` block (blocking; ``timeout``
        seconds at most, then :class:`sidecar.store.errors.StoreLocked`)."""

    @abc.abstractmethod
    def acquire_session_lock(self, key: str, timeout: float | None = None) -> SessionLease:
        """Block until the lock named ``key`` is held (``timeout``: as ``session_lock``)."""

    @abc.abstractmethod
    def try_session_lock(self, key: str) -> SessionLease | None:
        """The lock named ``key`` if it is free now, else None (never blocks)."""
