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
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Self, TextIO, cast

from sidecar.store import ndjson
from sidecar.store.common import check_changed_since, iter_pages, merge_searches
from sidecar.store.errors import InvalidInput, StoreClosed
from sidecar.store.interface import EmbedFn, Progress, SkipFn, StoreBackend
from sidecar.store.types import (
    CollectionInfo,
    Delete,
    DropCollection,
    ExportStats,
    Hit,
    ImportStats,
    IndexStatus,
    Op,
    OpResult,
    Patch,
    Put,
    Record,
    TimeRange,
)


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


class StoreCore(abc.ABC):
    """What both backends do alike. A backend sets ``backend`` and ``_closed`` and
    implements the abstract methods; see the module's docstring."""

    backend: str
    _closed: bool
    schema_version: int

    # ---- lifecycle ---------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def location(self) -> str: ...

    @property
    def closed(self) -> bool:
        return self._closed

    def _guard(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- collections -------------------------------------------------------------------

    @abc.abstractmethod
    def collections(
        self, *, prefix: str | None = None, namespace: str | None = None
    ) -> list[CollectionInfo]:
        """Collections sorted by name; ``prefix`` is a raw prefix, ``namespace`` exact."""

    @abc.abstractmethod
    def ensure_collections_future(self, names: Iterable[str]) -> Future[list[CollectionInfo]]:
        """Create the collections that do not exist (one transaction)."""

    def ensure_collections(self, names: Iterable[str]) -> list[CollectionInfo]:
        return self.ensure_collections_future(names).result()

    # ---- writes: one transaction each (the backend's write_future) ---------------------

    @abc.abstractmethod
    def write_future(self, ops: Sequence[Op]) -> Future[list[OpResult]]:
        """Run ``ops`` atomically (all or nothing); see :meth:`write`."""

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

    # ---- reads -------------------------------------------------------------------------

    @abc.abstractmethod
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

    def iter_records(
        self, collection: str, *, include_vectors: bool = True, batch: int = 1000
    ) -> Iterable[Record]:
        """All records of a collection in id order, paged (for export and re-embedding)."""

        def page(after: str | None, limit: int) -> list[Record]:
            return self.list_records(
                collection, after_id=after, limit=limit, include_vectors=include_vectors
            )

        return iter_pages(page, batch)

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
    def total_records(self) -> int: ...

    @abc.abstractmethod
    def max_seq(self) -> int: ...

    # ---- search ------------------------------------------------------------------------

    @abc.abstractmethod
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

    # ---- maintenance -------------------------------------------------------------------

    @abc.abstractmethod
    def index_status(self) -> list[IndexStatus]: ...

    def stats(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "collections": len(self.collections()),
            "records": self.total_records(),
            "seq": self.max_seq(),
            "schema": self.schema_version,
            "indexes": [dataclasses.asdict(s) for s in self.index_status()],
        }

    # ---- export / import (ndjson.py, over this interface) -------------------------------

    def _backend(self) -> StoreBackend:
        # each backend satisfies the protocol (mypy checks it where they are opened)
        return cast(StoreBackend, self)

    def export_ndjson(
        self,
        out: TextIO,
        *,
        collections: Iterable[str] | None = None,
        include_vectors: bool = True,
        progress: Progress | None = None,
    ) -> ExportStats:
        return ndjson.export_ndjson(
            self._backend(),
            out,
            collections=collections,
            include_vectors=include_vectors,
            progress=progress,
        )

    def import_ndjson(
        self,
        src: Iterable[str],
        *,
        embed: EmbedFn | None = None,
        progress: Progress | None = None,
        batch: int = 256,
        skip: SkipFn | None = None,
    ) -> ImportStats:
        return ndjson.import_ndjson(
            self._backend(), src, embed=embed, progress=progress, batch=batch, skip=skip
        )
