"""Bulk loads into the PostgreSQL store: defer the ANN index builds until the load ends.

Every insert into a collection with an HNSW index also inserts into the graph, and that
costs far more than the row itself: seeding 100 000 memories (300 000 records, two large
collections) ran at about 12 700 records/s until the first collection crossed the exact
threshold and its index was built, then fell to about 335 records/s. Building a graph once
over rows already there is much cheaper than growing it one insert at a time.

So :meth:`PgState.bulk_load` holds, on a connection of its own, the per-collection index
advisory lock (``LOCK_INDEX``, the one every daemon's indexer tries before a build) of each
collection the load grows past half the exact threshold (below that no index is wanted, and
every held advisory lock takes a slot of the server's shared lock table: ten thousand small
session collections must not hold one each). No daemon, this one included, builds those
indexes meanwhile; their collections are searched exactly, which is correct, only slower.
When the last ``bulk_load`` block of the store exits, the indexes due are built on that
connection (``CREATE INDEX CONCURRENTLY``: other daemons' writes go on) with more memory
(the whole graph in ``maintenance_work_mem``: a graph that overflows it is finished on
disk, several times slower) and a parallel worker, then the locks are released.

Writes keep every semantic: each ``put_many`` is still one committed transaction with its
sequence numbers, versions, counts and collection versions. A collection whose index
already exists keeps it (and its maintenance): dropping it would leave every other daemon
searching that collection exactly for the whole load.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

import psycopg
import structlog

from sidecar.store.errors import StoreError
from sidecar.store.pg import indexes as _indexes
from sidecar.store.pg.conn import LOCK_INDEX

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

log = structlog.get_logger(__name__)

# Bytes one element of an HNSW graph takes while pgvector builds it in memory, per tier
# dimension (a halfvec: 2 bytes each) plus per ``m`` (its neighbour lists: 2m candidates on
# the ground layer, 16 bytes each, plus the upper layers) plus the element itself; a
# slight over-estimate, so that the graph of 1M x 384 (about 1.5 GB) stays in memory.
_BYTES_PER_DIM = 2
_BYTES_PER_M = 48
_BYTES_PER_ELEMENT = 256
MIN_BUILD_MEMORY_MB = 512  # what the background indexer's builds get (indexes.BUILD_MEMORY)
MAX_BUILD_MEMORY_MB = 4096  # a bound on one build's server memory, whatever the collection
# Workers besides the leader for one build: measured on the 2-core VM, one worker made a
# 100 000 x 384 build 1.5x faster (60 s instead of 90); the server caps it at its own
# max_worker_processes.
PARALLEL_WORKERS = 1


def build_memory_mb(n: int, ann: int, m: int) -> int:
    """``maintenance_work_mem`` (MB) to build the graph (``m``) of ``n`` vectors of ``ann``."""
    per = _BYTES_PER_DIM * ann + _BYTES_PER_M * m + _BYTES_PER_ELEMENT
    need = n * per // (1 << 20) + 64
    return max(MIN_BUILD_MEMORY_MB, min(MAX_BUILD_MEMORY_MB, need))


class BulkLoad:
    """The state of a store's bulk load: the connection holding the deferred collections'
    index locks, and those collections. One per store at a time (nested and concurrent
    ``bulk_load`` blocks share it; the last to exit builds)."""

    def __init__(self, store: PgState) -> None:
        self.store = store
        self.conn: psycopg.Connection[Any] | None = None
        self.held: set[int] = set()
        self.depth = 0
        self.mutex = threading.Lock()

    def note(self, changed: list[tuple[int, int]]) -> None:
        """After a write: hold the index lock of each collection it grew past half the
        threshold (taken before it crosses the threshold itself unless one write adds more
        than half the threshold: then another daemon's indexer may start a build first,
        which is slower but just as correct)."""
        half = self.store.exact_threshold // 2
        due = [
            cid
            for cid, n in changed
            if n >= half and cid not in self.held and cid not in self.store._indexed
        ]
        if not due:
            return
        with self.mutex:
            if self.depth == 0:
                return
            try:
                if self.conn is None or self.conn.closed or self.conn.broken:
                    # a lost connection lost its locks: take them again, all of them
                    self.conn = self.store.db.connect()
                    self.held = set()
                    due = [cid for cid, n in changed if n >= half]
                for cid in sorted(due):
                    row = self.conn.execute(
                        "SELECT pg_try_advisory_lock(%s, %s)", (LOCK_INDEX, cid)
                    ).fetchone()
                    if row and row[0]:
                        self.held.add(cid)
                        log.info("store.pg_bulk_defer", cid=cid)
            except (StoreError, psycopg.Error) as exc:
                # Deferring is an optimisation: without the lock the indexer just builds
                # as usual; the write itself has committed.
                log.warning("store.pg_bulk_defer_failed", error=str(exc))

    def enter(self) -> None:
        with self.mutex:
            self.depth += 1

    def exit(self, failed: bool) -> None:
        """Leave one block; the last one builds the deferred indexes (unless the load
        failed: its indexes are then left to the background indexer) and unlocks."""
        with self.mutex:
            self.depth -= 1
            if self.depth > 0:
                return
            conn, held = self.conn, self.held
            self.conn, self.held = None, set()
        if conn is None:
            return
        try:
            if held and not failed:
                self._build(conn, held)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock_all()")
            conn.close()
            self.store._refresh_indexed()

    def close(self) -> None:
        """The store closes under an open block: its connection goes (and with it the
        locks, released by the server); the block's exit then has nothing to build."""
        with self.mutex:
            conn, self.conn, self.held = self.conn, None, set()
        if conn is not None:
            conn.close()

    def _build(self, conn: psycopg.Connection[Any], held: set[int]) -> None:
        store = self.store
        try:
            plan = _indexes.Plan(store)
            sizes = {s.collection: s.count for s in plan.status}
            for cid, name, dims, ann in plan.builds:
                if cid not in held:
                    continue
                mb = build_memory_mb(sizes.get(name, 0), ann, store.params.m)
                started = time.monotonic()
                _indexes.build_on(
                    store, conn, cid, dims, ann, memory=f"{mb}MB", workers=PARALLEL_WORKERS
                )
                log.info(
                    "store.pg_bulk_built",
                    collection=name,
                    records=sizes.get(name, 0),
                    memory_mb=mb,
                    seconds=round(time.monotonic() - started, 1),
                )
        except (StoreError, psycopg.Error) as exc:
            # The rows are committed; an index is a derived structure the background
            # indexer builds once the locks are gone.
            log.warning("store.pg_bulk_build_failed", error=str(exc))
