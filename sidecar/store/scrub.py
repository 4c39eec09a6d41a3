"""What a forget removes from a SQLite store's files, and when (docs/store.md "Deleted
records on disk"; docs/operations.md § Guarantees).

* Every connection the store opens sets ``PRAGMA secure_delete = ON``: SQLite overwrites
  a deleted row's bytes with zeros, in its b-tree page and in the overflow pages a long
  row spills into, which go to the freelist. (``FAST`` zeroes only what costs no extra
  I/O and leaves freelist pages as they were; SQLite's own default is off, though some
  builds, Debian's among them, turn it on.)
* The zeroed pages are written to the write-ahead log; the log's older frames still
  hold the row, and so does the database file until a checkpoint copies the new pages
  back. :meth:`Scrubber.scrub` (``Store.scrub_deleted``, which a forget and a delete
  call before they answer) checkpoints in ``TRUNCATE`` mode: every frame is copied into
  the database file and the log is cut to zero bytes.
* A read that began before the delete still sees the row: SQLite cannot restart the log
  under it. An attempt waits for such readers at most :data:`ATTEMPT_BUSY_MS` (on the
  writer thread, so writes queue that long), and the scrub tries again, backing off,
  until :data:`WAIT_S`. Then it answers ``complete=False``, logs ``store.scrub_deferred``,
  and the checkpoint thread tries once per tick (0.5 s) until it succeeds
  (``store.scrub_completed``, with how long it was deferred).
* A saved HNSW graph never holds a deleted element's vector (``graph_files.py``); a
  scrub asks the checkpoint thread to save the changed graphs at its next tick rather
  than at the idle checkpoint.

A scrub does nothing (no checkpoint, no thread hop) when nothing was deleted since the
last complete one: a forget that found nothing costs nothing here.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import structlog

from sidecar.store.errors import StoreClosed, StoreError
from sidecar.store.types import ScrubReport

if TYPE_CHECKING:
    from sidecar.store.writer import Tx

log = structlog.get_logger(__name__)

SECURE_DELETE = "PRAGMA secure_delete = ON"
#: What every store connection waits for a lock before SQLITE_BUSY.
BUSY_TIMEOUT_MS = 30_000
#: How long one checkpoint attempt waits for readers of an older snapshot. Reads of the
#: store take milliseconds; longer ones (an export, a backup) are waited out by retrying,
#: with the writer free in between.
ATTEMPT_BUSY_MS = 100
#: How long a forget waits for the checkpoint before it answers and leaves the rest to
#: the checkpoint thread.
WAIT_S = 5.0
_BACKOFF_S = (0.01, 0.02, 0.05, 0.1, 0.2)


def truncate_log(conn: sqlite3.Connection) -> bool:
    """One ``TRUNCATE`` checkpoint (outside any transaction): True when every frame
    reached the database file and the log is empty, False when readers of an older
    snapshot kept it busy."""
    conn.execute(f"PRAGMA busy_timeout = {ATTEMPT_BUSY_MS}")
    try:
        row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return row is not None and int(row[0]) == 0


def start_checkpoint(conn: sqlite3.Connection) -> None:
    """The open's checkpoint, once the pages are checked (page_check.py): a daemon killed
    between a delete and its scrub left the row's older pages in the log, and nothing
    reads them before this start, so they go now (best effort: a full disk must not keep
    the store from opening)."""
    try:
        truncate_log(conn)
    except sqlite3.Error as exc:
        log.warning("store.start_checkpoint_failed", error=str(exc))


def truncate_job(tx: Tx) -> bool:
    """:func:`truncate_log` as a raw job of the writer thread (its connection)."""
    return truncate_log(tx.conn)


class Scrubber:
    """The store's deletions since the last complete scrub, and the scrub itself."""

    def __init__(self, submit: Callable[[Callable[[Tx], bool], bool], Future[Any]]) -> None:
        self._submit = submit  # a raw job on the writer thread (SqliteState._submit)
        self.deletions = 0  # moved by the writer thread after each commit that deleted
        self._scrubbed = 0  # ``deletions`` as of the last complete scrub
        self._deferred_since: float | None = None
        self._index_due = False
        self._lock = threading.Lock()  # one scrub at a time

    def note_deletion(self) -> None:
        """A committed write deleted records or dropped a collection (writer thread)."""
        self.deletions += 1

    def request_index_save(self) -> None:
        """Save the changed graphs at the checkpoint thread's next tick."""
        self._index_due = True

    def take_index_save(self) -> bool:
        due, self._index_due = self._index_due, False
        return due

    def scrub(self, wait_s: float = WAIT_S) -> ScrubReport:
        if self.deletions == self._scrubbed:
            return ScrubReport()
        with self._lock:
            target = self.deletions  # every deletion so far committed before our attempts
            if target == self._scrubbed:  # a scrub that ran meanwhile covered them
                return ScrubReport()
            self._index_due = True
            started = time.monotonic()
            attempts = 0
            while True:
                attempts += 1
                done = self._attempt()
                took = time.monotonic() - started
                if done:
                    self._scrubbed = target
                    self._completed()
                    return ScrubReport(True, True, attempts, round(took, 4))
                if done is None or took >= wait_s:
                    break
                pause = _BACKOFF_S[min(attempts, len(_BACKOFF_S)) - 1]
                time.sleep(min(pause, wait_s - took))
            self._defer(attempts, took)
            return ScrubReport(True, False, attempts, round(took, 4))

    def retry_deferred(self) -> None:
        """Checkpoint thread, each tick: one more attempt at a scrub that was deferred."""
        if self._deferred_since is not None:
            self.scrub(wait_s=0.0)

    def _attempt(self) -> bool | None:
        """True: done; False: try again; None: the store is closing (its close truncates
        the log itself)."""
        try:
            return bool(self._submit(truncate_job, True).result())
        except StoreClosed:
            return None
        except StoreError as exc:  # a full or failing disk: the delete itself stands
            log.warning("store.scrub_failed", error=str(exc))
            return False

    def _defer(self, attempts: int, took: float) -> None:
        if self._deferred_since is None:
            self._deferred_since = time.monotonic() - took
            log.warning(
                "store.scrub_deferred",
                attempts=attempts,
                seconds=round(took, 3),
                reason="readers of a snapshot older than the delete keep the write-ahead "
                "log busy; the checkpoint thread retries every 0.5 s",
            )

    def _completed(self) -> None:
        if self._deferred_since is not None:
            log.info(
                "store.scrub_completed",
                deferred_s=round(time.monotonic() - self._deferred_since, 3),
            )
            self._deferred_since = None
