"""Asyncio façade over a store backend (:class:`sidecar.store.interface.StoreBackend`:
the SQLite store or the PostgreSQL one) for the daemon.

Writes are awaited on the backend's futures (SQLite: its writer thread, no extra hop;
PostgreSQL: its small write pool); reads and other blocking calls run in a small dedicated
thread pool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from sidecar.store import lexical_files
from sidecar.store.backend import open_store
from sidecar.store.interface import SessionLease, StoreBackend
from sidecar.store.types import (
    CollectionInfo,
    CollectionState,
    Delete,
    DropCollection,
    Hit,
    Op,
    OpResult,
    Put,
    Record,
    ScrubReport,
    TimeRange,
)

T = TypeVar("T")


class AsyncStore:
    """``await``-able store API. Owns the backend it wraps (``aclose`` closes it)."""

    def __init__(self, store: StoreBackend, *, read_threads: int = 4) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, read_threads), thread_name_prefix="libravdb-store-read"
        )

    @classmethod
    async def open(
        cls, location: str | os.PathLike[str], *, read_threads: int = 4, **kwargs: Any
    ) -> AsyncStore:
        """:func:`sidecar.store.backend.open_store` (a data directory or a
        ``postgresql://`` URL; ``Store.open``'s keyword arguments) in a worker thread."""
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(None, functools.partial(open_store, location, **kwargs))
        return cls(store, read_threads=read_threads)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking function over the store (``fn(*args)``) in the read pool."""
        return await self._run(fn, *args)

    async def aclose(self) -> None:
        await self._run(self.store.close)
        self._pool.shutdown(wait=True)

    # ---- writes ------------------------------------------------------------------------

    async def write(self, ops: Sequence[Op]) -> list[OpResult]:
        return await asyncio.wrap_future(self.store.write_future(ops))

    async def put(
        self,
        collection: str,
        record_id: str,
        *,
        text: str = "",
        metadata: Mapping[str, Any] | None = None,
        vector: Any = None,
        if_version: int | None = None,
    ) -> OpResult:
        op = Put(collection, record_id, text, metadata or {}, vector, if_version)
        return (await self.write([op]))[0]

    async def put_many(self, puts: Sequence[Put]) -> list[OpResult]:
        return await self.write(puts)

    async def delete(self, collection: str, record_id: str) -> bool:
        return (await self.write([Delete(collection, record_id)]))[0].changed

    async def delete_many(self, collection: str, ids: Iterable[str]) -> int:
        res = await self.write([Delete(collection, i) for i in ids])
        return sum(r.changed for r in res)

    async def drop_collections(self, names: Iterable[str]) -> int:
        res = await self.write([DropCollection(n) for n in names])
        return sum(r.changed for r in res)

    async def ensure_collections(self, names: Iterable[str]) -> list[CollectionInfo]:
        return await asyncio.wrap_future(self.store.ensure_collections_future(names))

    async def increment(
        self, updates: Mapping[str, Sequence[str]], key: str = "access_count"
    ) -> int:
        return await asyncio.wrap_future(self.store.increment_future(updates, key))

    async def add_tombstones(self, namespace: str, keys: Iterable[str], reason: str = "") -> int:
        return await self._run(self.store.add_tombstones, namespace, list(keys), reason)

    async def tombstoned_anywhere(self, keys: Iterable[str]) -> set[str]:
        return await self._run(self.store.tombstoned_anywhere, list(keys))

    # ---- reads -------------------------------------------------------------------------

    async def get(
        self, collection: str, record_id: str, *, include_vector: bool = False
    ) -> Record | None:
        return await self._run(self.store.get, collection, record_id, include_vector=include_vector)

    async def get_many(self, collection: str, ids: Iterable[str]) -> list[Record]:
        return await self._run(self.store.get_many, collection, list(ids))

    async def list_records(
        self,
        collection: str,
        *,
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        return await self._run(
            self.store.list_records, collection, where=where, time_range=time_range, limit=limit
        )

    async def search(
        self,
        collection: str,
        vector: Any,
        k: int,
        *,
        exclude_ids: Iterable[str] = (),
        where: Mapping[str, Any] | None = None,
        time_range: TimeRange | None = None,
    ) -> list[Hit]:
        return await self._run(
            self.store.search,
            collection,
            vector,
            k,
            exclude_ids=list(exclude_ids),
            where=where,
            time_range=time_range,
        )

    async def search_collections(
        self,
        collections: Sequence[str],
        vector: Any,
        k: int,
        *,
        exclude_by_collection: Mapping[str, Iterable[str]] | None = None,
    ) -> list[Hit]:
        return await self._run(
            self.store.search_collections,
            list(collections),
            vector,
            k,
            exclude_by_collection=exclude_by_collection,
        )

    async def tombstoned(self, namespace: str, keys: Iterable[str]) -> set[str]:
        return await self._run(self.store.tombstoned, namespace, list(keys))

    async def checkpoint(self) -> dict[str, int]:
        return await self._run(self.store.checkpoint)

    async def scrub_after_forget(self) -> ScrubReport:
        """Call once a forget or delete has deleted what it deletes, before answering: on
        SQLite the deleted text then is in neither the database file nor its log, and
        the deleted vectors leave the graph files at their next save, which this
        requests (``StoreBackend.scrub_deleted``). Costs nothing when nothing was
        deleted; waits for readers of older snapshots at most a few seconds, in a thread
        outside the read pool (whose reads are what it may wait for). The saved BM25
        terms of collections records left are removed too (``lexical_files.scrub_store``)."""
        report = await asyncio.to_thread(self.store.scrub_deleted)
        await asyncio.to_thread(lexical_files.scrub_store, self.store)
        return report

    def count(self, collection: str) -> int:
        return self.store.count(collection)

    def count_prefix(self, prefix: str) -> int:
        return self.store.count_prefix(prefix)

    def count_namespace(self, namespace: str) -> int:
        return self.store.count_namespace(namespace)

    def collections(
        self, *, prefix: str | None = None, namespace: str | None = None
    ) -> list[CollectionInfo]:
        return self.store.collections(prefix=prefix, namespace=namespace)

    async def collection_versions(self, names: Iterable[str]) -> dict[str, int]:
        return await self._run(self.store.collection_versions, list(names))

    async def collection_states(self, names: Iterable[str]) -> dict[str, CollectionState]:
        return await self._run(self.store.collection_states, list(names))

    async def changed_since(
        self, collection: str, seq: int, *, include_vectors: bool = True, limit: int | None = None
    ) -> list[Record]:
        return await self._run(
            self.store.changed_since,
            collection,
            seq,
            include_vectors=include_vectors,
            limit=limit,
        )

    @contextlib.asynccontextmanager
    async def session_lock(
        self,
        key: str,
        timeout: float | None = None,  # noqa: ASYNC109 - the lock's wait limit (server side)
    ) -> AsyncIterator[None]:
        """Hold the store's session lock ``key`` for the ``async with`` block.

        Waiting happens in a thread of its own, not in the read pool (waiters would starve
        the reads the holder needs) nor on the event loop. A cancelled waiter's lock, if it
        is granted afterwards, is released at once."""
        fut: Future[SessionLease] = Future()

        def acquire() -> None:
            if not fut.set_running_or_notify_cancel():
                return  # cancelled before the wait began
            try:
                lease = self.store.acquire_session_lock(key, timeout)
            except BaseException as exc:
                fut.set_exception(exc)
                return
            fut.set_result(lease)

        threading.Thread(target=acquire, name="libravdb-session-lock", daemon=True).start()
        try:
            lease = await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.add_done_callback(_release_if_granted)
            raise
        try:
            yield
        finally:
            await self._run(lease.release)


def _release_if_granted(fut: Future[SessionLease]) -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().release()
