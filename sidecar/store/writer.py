"""The single writer thread: every write of the store runs here, in group-committed batches.

Callers submit a job (a function of a :class:`Tx`) and get a ``concurrent.futures.Future``.
The writer drains whatever is queued, runs the jobs in one ``BEGIN IMMEDIATE`` transaction
(each job after the first inside its own SAVEPOINT), commits once (one fsync for the whole
group), then applies the in-memory effects of the jobs that succeeded and resolves their
futures. A job that raises is rolled back alone (to its savepoint, or the whole transaction
when it is the first); the others commit. So an acknowledged write is
always committed, and a failed one wrote nothing.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from sidecar.store.errors import CorruptStore, StorageUnavailable, StoreClosed, StoreError
from sidecar.store.scrub import start_checkpoint

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sidecar.store.types import CollectionInfo


class WriterHost(Protocol):
    """What the writer thread needs of its store (``Store`` is one)."""

    _wconn: sqlite3.Connection
    _collections: dict[str, CollectionInfo]

    def _now_ms(self) -> int: ...

    def _alloc_seq(self) -> int: ...

    def _persist_seq(self, conn: sqlite3.Connection) -> None: ...

    def _after_commit(self, txs: list[Tx], group: Mapping[str, CollectionInfo | None]) -> None: ...


log = structlog.get_logger(__name__)

MAX_GROUP = 256

_MISSING = object()


def map_sqlite_error(exc: BaseException, action: str = "write", path: str = "") -> BaseException:
    """sqlite3 errors from the disk become StorageUnavailable, a damaged file
    CorruptStore (naming ``path``); others pass through."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, sqlite3.Error):
        msg = str(exc)
        code = getattr(exc, "sqlite_errorname", "") or ""
        low = msg.lower()
        if (
            "not a database" in low
            or "malformed" in low
            or code.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
        ):
            corrupt = CorruptStore(path or "store.sqlite3", msg)
            corrupt.__cause__ = exc
            return corrupt
        if (
            "readonly" in low
            or "read-only" in low
            or "disk is full" in low
            or "disk i/o" in low
            or "unable to open" in low
            or "locked" in low
            or code.startswith(("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANT"))
        ):
            err = StorageUnavailable(
                f"storage unavailable, the {action} was not applied: {msg}", sqlite=code or msg
            )
            err.__cause__ = exc
            return err
    return exc


@dataclass(slots=True)
class Effect:
    kind: str  # "put" | "del" | "drop" | "create" | "marker"
    cid: int
    rid: int = 0
    rec_id: str = ""
    unit: Any = None
    vseq: int = 0
    info: CollectionInfo | None = None


@dataclass(slots=True)
class Tx:
    """What a job sees: the connection, a seq allocator and the effect log."""

    store: WriterHost
    conn: sqlite3.Connection
    group: dict[str, CollectionInfo | None]
    now_ms: int
    effects: list[Effect] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    undo: list[tuple[str, object]] = field(default_factory=list)
    touched: set[int] = field(default_factory=set)  # cids whose records changed
    removed: dict[int, int] = field(default_factory=dict)  # cid -> records deleted

    def touch(self, cid: int) -> None:
        """A record of collection ``cid`` was put, patched or deleted (its version moves)."""
        self.touched.add(cid)

    def next_seq(self) -> int:
        return self.store._alloc_seq()

    def lookup(self, name: str) -> CollectionInfo | None:
        if name in self.group:
            return self.group[name]
        return self.store._collections.get(name)

    def set_group(self, name: str, info: CollectionInfo | None) -> None:
        self.undo.append((name, self.group.get(name, _MISSING)))
        self.group[name] = info

    def count(self, cid: int, delta: int) -> None:
        self.counts[cid] = self.counts.get(cid, 0) + delta

    def rollback_group(self) -> None:
        for name, old in reversed(self.undo):
            if old is _MISSING:
                self.group.pop(name, None)
            else:
                self.group[name] = old  # type: ignore[assignment]
        self.undo.clear()


JobFn = Callable[[Tx], Any]


@dataclass(slots=True)
class Job:
    fn: JobFn
    future: Future[Any]
    raw: bool = False  # run outside any transaction (e.g. PRAGMA wal_checkpoint)


@dataclass(slots=True)
class _Group:
    """One write transaction in progress: its jobs' shared collection cache, the clock,
    the jobs done so far and the error that lost it, if any."""

    conn: sqlite3.Connection
    group: dict[str, CollectionInfo | None]
    now: int
    done: list[tuple[Job, Any, Tx]] = field(default_factory=list)
    aborted: BaseException | None = None
    fresh: bool = True  # no job has succeeded in this transaction yet


class PagesGate(Protocol):
    """The database's page check, as the writer waits for it (``page_check.PageCheck``)."""

    checkpoint_due: bool

    def wait(self) -> BaseException | None: ...


class Writer(threading.Thread):
    def __init__(self, store: WriterHost, pages: PagesGate | None = None) -> None:
        super().__init__(name="libravdb-store-writer", daemon=True)
        self.store = store
        self._pages = pages
        self.queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._stopping = False

    def submit(self, fn: JobFn, raw: bool = False) -> Future[Any]:
        fut: Future[Any] = Future()
        if self._stopping:
            fut.set_exception(StoreClosed("the store is closed"))
            return fut
        self.queue.put(Job(fn, fut, raw))
        return fut

    def stop(self) -> None:
        self._stopping = True
        self.queue.put(None)

    def _wait_for_pages(self) -> BaseException | None:
        """Nothing is written before the page check has passed (page_check.py): the
        jobs queued meanwhile wait; then the start-up checkpoint the open left out.
        The check's error when it did not pass."""
        if self._pages is None:
            return None
        failure = self._pages.wait()
        if failure is None and self._pages.checkpoint_due:
            self._pages.checkpoint_due = False
            start_checkpoint(self.store._wconn)
        return failure

    def run(self) -> None:
        # a damaged (or unchecked) database: every job fails with the check's error
        failure = self._wait_for_pages()
        while True:
            job = self.queue.get()
            if job is None:
                break
            jobs = [job]
            stop = False
            while len(jobs) < MAX_GROUP:
                try:
                    nxt = self.queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                jobs.append(nxt)
            try:
                if failure is not None:
                    _fail_all(jobs, failure)
                else:
                    self._run(jobs)
            except BaseException as exc:  # never let the writer die silently
                log.exception("store.writer_failed")
                for j in jobs:
                    if not j.future.done():
                        j.future.set_exception(map_sqlite_error(exc))
            if stop:
                break
        # Fail whatever was queued after the stop marker.
        while True:
            try:
                left = self.queue.get_nowait()
            except queue.Empty:
                break
            if left is not None and not left.future.done():
                left.future.set_exception(StoreClosed("the store is closed"))

    def _run(self, jobs: list[Job]) -> None:
        batch: list[Job] = []
        for job in jobs:
            if job.raw:
                if batch:
                    self._run_group(batch)
                    batch = []
                self._run_raw(job)
            else:
                batch.append(job)
        if batch:
            self._run_group(batch)

    def _run_raw(self, job: Job) -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        try:
            tx = Tx(self.store, self.store._wconn, {}, self.store._now_ms())
            result = job.fn(tx)
        except BaseException as exc:
            job.future.set_exception(map_sqlite_error(exc))
        else:
            job.future.set_result(result)

    def _run_group(self, jobs: list[Job]) -> None:
        """Run the jobs in one transaction; each job's failure rolls back that job only."""
        live = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not live:
            return
        conn = self.store._wconn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            err = map_sqlite_error(exc)
            for j in live:
                j.future.set_exception(err)
            return
        g = _Group(conn, {}, self.store._now_ms())
        for i, j in enumerate(live):
            if not self._attempt(g, j, more_after=i + 1 < len(live)):
                break
        if g.aborted is None:
            g.aborted = self._commit(g)
        if g.aborted is not None:
            self._abandon(g, live)
            return
        self.store._after_commit([tx for _j, _r, tx in g.done], g.group)
        for j, result, _tx in g.done:
            j.future.set_result(result)

    def _attempt(self, g: _Group, j: Job, *, more_after: bool) -> bool:
        """Run one job of the group; False when the transaction is lost (stop the group).

        The first job of a transaction runs without a SAVEPOINT: nothing precedes it, so
        if it fails the whole transaction is rolled back (and a new one begun for the
        jobs behind it). A nested savepoint makes SQLite copy every page it changes to a
        statement journal first, which doubles the cost of a bulk insert."""
        tx = Tx(self.store, g.conn, g.group, g.now)
        if not g.fresh and not _job_statement(g, j, "SAVEPOINT job"):
            return True
        try:
            result = j.fn(tx)
        except BaseException as exc:
            tx.rollback_group()
            self._undo_job(g, exc, more_after=more_after)
            j.future.set_exception(map_sqlite_error(exc))
            return g.aborted is None
        if not g.fresh and not _job_statement(g, j, "RELEASE job"):
            return False
        g.fresh = False
        g.done.append((j, result, tx))
        return True

    @staticmethod
    def _undo_job(g: _Group, exc: BaseException, *, more_after: bool) -> None:
        """Undo a failed job: the whole transaction when it was the first (then begin a new
        one for the jobs behind it), else back to its savepoint."""
        conn = g.conn
        if g.fresh:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if more_after:
                    conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as rb_exc:
                g.aborted = rb_exc
            return
        try:
            conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
        except sqlite3.Error as rb_exc:
            g.aborted = rb_exc
        if not conn.in_transaction:
            g.aborted = g.aborted or exc

    def _commit(self, g: _Group) -> BaseException | None:
        try:
            if g.done:
                self.store._persist_seq(g.conn)
                g.conn.execute("COMMIT")
            elif g.conn.in_transaction:
                g.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            return exc
        return None

    @staticmethod
    def _abandon(g: _Group, live: list[Job]) -> None:
        """The transaction is lost: roll back and fail every job of the group."""
        assert g.aborted is not None
        if g.conn.in_transaction:
            try:
                g.conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("store.rollback_failed")
        err = map_sqlite_error(g.aborted)
        for j in live:
            if not j.future.done():
                j.future.set_exception(err)
        log.warning("store.write_failed", error=str(g.aborted), jobs=len(live))


def _fail_all(jobs: list[Job], error: BaseException) -> None:
    for j in jobs:
        if j.future.set_running_or_notify_cancel():
            # one error for every job: each raise would add its frames to the last one's
            j.future.set_exception(error.with_traceback(None))


def _job_statement(g: _Group, j: Job, sql: str) -> bool:
    """Run a statement of job ``j``'s savepoint; when it fails, the transaction is lost
    (``g.aborted``) and so is the job. False then."""
    try:
        g.conn.execute(sql)
    except sqlite3.Error as exc:
        g.aborted = exc
        j.future.set_exception(map_sqlite_error(exc))
        return False
    return True
