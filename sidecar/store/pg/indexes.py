"""The PostgreSQL store's ANN indexes: one partial HNSW index per large collection.

A collection reaching ``exact_threshold`` records gets
``CREATE INDEX CONCURRENTLY records_ann_c<cid>_d<A> ON records USING hnsw
((l2_normalize(<tier of embedding>)::halfvec(A)) halfvec_ip_ops) WHERE cid = <cid>``:
``A`` is the ANN tier (the store's ``ann_dims`` for collections of the embedder's
dimension, else the collection's own), re-normalized so that inner product is cosine (and a
zero vector scores 0 instead of pgvector's NaN), stored as half precision (half the
memory; the funnel re-ranks with the full vectors). One index per collection, not one per
dimension: small collections (every session's) are searched exactly and cost no HNSW
insert per write, and a large collection's index never has to skip another collection's
rows. An index of a collection that fell under half the threshold, was dropped, or was
built for another tier is dropped concurrently. Builds never block writes; until an index
is valid its collection is searched exactly.

Any daemon on the database may do this work: a per-collection advisory lock makes one
build at a time, and a daemon that finds the lock taken leaves the collection to its holder.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

import psycopg
import structlog

from sidecar.store.errors import StoreClosed, StoreError
from sidecar.store.pg.conn import LOCK_INDEX, SCHEMA
from sidecar.store.types import IndexStatus

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

log = structlog.get_logger(__name__)

_NAME = re.compile(r"^records_ann_c(\d+)_d(\d+)$")
# Memory for one HNSW build (per build, server side): a 100k x 384 halfvec graph fits.
BUILD_MEMORY = "512MB"
POLL_S = 5.0


def ann_dims_for(store: PgState, dims: int) -> int:
    return store.ann_dims if dims == store.embed_dims else dims


def index_name(cid: int, ann: int) -> str:
    return f"records_ann_c{int(cid)}_d{int(ann)}"


def ann_expr(ann: int, dims: int, column: str = "r.embedding") -> str:
    """The indexed expression; a search must spell it the same way to use the index."""
    if ann == dims:
        return f"(l2_normalize({column})::halfvec({int(dims)}))"
    return f"(l2_normalize(subvector({column}, 1, {int(ann)}))::halfvec({int(ann)}))"


_STATE = "SELECT cid, name, dims, n_records FROM collections WHERE kind = 'vector' ORDER BY name"
_INDEXES = (
    "SELECT i.relname, x.indisvalid FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
    "WHERE x.indrelid = 'records'::regclass AND i.relname ~ '^records_ann_c'"
)


class Plan:
    """What the indexes should become, from the collections and the indexes that exist."""

    def __init__(self, store: PgState) -> None:
        colls = store.db.read(_STATE)
        existing = {name: bool(valid) for name, valid in store.db.read(_INDEXES)}
        self.status: list[IndexStatus] = []
        self.builds: list[tuple[int, str, int, int]] = []  # cid, collection, dims, ann
        self.drops: list[str] = []
        self.indexed: set[int] = set()
        wanted: set[str] = set()
        threshold = store.exact_threshold
        for cid, name, dims, n in colls:
            ann = ann_dims_for(store, dims)
            iname = index_name(cid, ann)
            valid = existing.get(iname, False)
            if iname in existing and n < threshold // 2:
                self.drops.append(iname)
            elif n >= threshold or iname in existing:
                wanted.add(iname)
                if not valid:
                    self.builds.append((cid, name, dims, ann))
            if valid:
                self.indexed.add(cid)
            self.status.append(
                IndexStatus(
                    collection=name,
                    dims=ann,
                    count=n,
                    mode="hnsw" if valid else "exact",
                    ann_count=n if valid else 0,
                    pending=n if iname in wanted and not valid else 0,
                    deleted_fraction=0.0,
                )
            )
        self.drops += [n for n in existing if n not in wanted and n not in self.drops]

    @property
    def idle(self) -> bool:
        return not self.builds and not self.drops


def _index_lock(conn: psycopg.Connection[Any], cid: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_INDEX, cid)).fetchone()
    return bool(row and row[0])


def build(store: PgState, cid: int, dims: int, ann: int) -> bool:
    """Build one collection's index (concurrently); False if another daemon is on it."""
    with store.db.connect() as conn:
        if not _index_lock(conn, cid):
            return False
        build_on(store, conn, cid, dims, ann)
    return True


def build_on(
    store: PgState,
    conn: psycopg.Connection[Any],
    cid: int,
    dims: int,
    ann: int,
    *,
    memory: str = BUILD_MEMORY,
    workers: int | None = None,
) -> None:
    """Build on ``conn``, which holds the collection's index lock. ``memory``:
    ``maintenance_work_mem``; ``workers``: ``max_parallel_maintenance_workers`` (None:
    the server's)."""
    name = index_name(cid, ann)
    # An invalid index is what a build that died leaves (its holder lost the lock).
    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SCHEMA}.{name}")
    conn.execute(f"SET maintenance_work_mem = '{memory}'")
    if workers is not None:
        conn.execute(f"SET max_parallel_maintenance_workers = {int(workers)}")
    p = store.params
    sql = (
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON records USING hnsw "
        f"({ann_expr(ann, dims, 'embedding')} halfvec_ip_ops) "
        f"WITH (m = {int(p.m)}, ef_construction = {int(p.ef_construction)}) "
        f"WHERE cid = {int(cid)}"
    )
    log.info("index.pg_build", cid=cid, dims=dims, ann=ann, index=name, memory=memory)
    conn.execute(sql)
    # Fresh statistics, or the planner may keep sorting the collection (it estimates
    # a just-loaded collection at a few rows): autovacuum would catch up only later.
    conn.execute("ANALYZE records")  # built from integers only


def drop(store: PgState, name: str) -> bool:
    m = _NAME.match(name)
    if m is None:
        return False
    with store.db.connect() as conn:
        if not _index_lock(conn, int(m.group(1))):
            return False
        log.info("index.pg_drop", index=name)
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SCHEMA}.{name}")
    return True


def run_index_work(store: PgState) -> int:
    """Carry out the current plan in the calling thread; returns the steps done."""
    plan = Plan(store)
    store._indexed = plan.indexed
    steps = 0
    for iname in plan.drops:
        steps += drop(store, iname)
    for cid, _name, dims, ann in plan.builds:
        steps += build(store, cid, dims, ann)
    return steps


class PgIndexer(threading.Thread):
    """Runs :func:`run_index_work` when a write moved a collection across a threshold, and
    every :data:`POLL_S` (other daemons' writes count too); re-takes the store's presence
    lock if its connection was lost."""

    def __init__(self, store: PgState) -> None:
        super().__init__(name="libravdb-pg-indexer", daemon=True)
        self.store = store
        self._wake = threading.Event()
        self._halt = threading.Event()
        self.busy = False

    def notify(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()

    def run(self) -> None:
        while not self._halt.is_set():
            self._wake.wait(POLL_S)
            self._wake.clear()
            if self._halt.is_set():
                return
            self.busy = True
            try:
                self.store._keep_presence()
                while run_index_work(self.store) and not self._halt.is_set():
                    pass
            except StoreClosed:
                return
            except (StoreError, psycopg.Error) as exc:
                log.warning("index.pg_work_failed", error=str(exc))
            except Exception:
                log.exception("index.pg_work_failed")
            finally:
                self.busy = False
