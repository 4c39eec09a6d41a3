"""The page check of a SQLite store's database at open (docs/store.md, "Durability promise").

``PRAGMA quick_check`` reads every page once and refuses a damaged file with
:class:`CorruptStore` before anything is written to it: damage in pages that start-up does
not read would otherwise surface later, as failing reads of some records. It reads the
whole file: 18-35 s with a warm page cache (158 s cold) for the 12.8 GB of a million
memories, which a restart would wait before its endpoint line.

A file smaller than ``store.page_check_background_bytes`` is checked before the open
returns, as it always was (mode ``sync``). A larger one is checked beside the start (mode
``background``), on this module's thread and its own read-only connection: the open
returns and reads are served meanwhile (a read that meets a damaged page raises
``CorruptStore`` by itself), while everything that writes the database waits for the
result (:meth:`PageCheck.wait`):

* the writer thread takes no job before it (``writer.Writer.run``), then runs the start-up
  checkpoint the open left out (:attr:`PageCheck.checkpoint_due`);
* the checkpoint thread checkpoints nothing and saves no graph until it passed, and
  ``Store.close`` checkpoints only a store whose check passed (``maintenance.py``);
* an open that has to write (a migration, ``meta`` rows, a re-embed's stage to discard,
  dirty index markers to clear) checks synchronously first (:meth:`PageCheck.require`).

A check that finds damage, or that cannot finish (an I/O error), fails every write held
and every later one with its error and calls the callbacks of :meth:`PageCheck.on_failure`
(the daemon exits 1 with the error's one line, as for a damaged file at open).

After a check that did not pass its read-only connection is closed last: SQLite
checkpoints the log into the database file when its last connection closes, unless that
connection is read-only, and while one connection is open no other's close does.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
import structlog

from sidecar.config import StoreSettings
from sidecar.priority import lower_this_thread
from sidecar.store.errors import CorruptStore, StorageUnavailable, StoreClosed, StoreError
from sidecar.store.writer import map_sqlite_error

log = structlog.get_logger(__name__)

#: A header that says "SQLite format 3" and WAL mode (bytes 18 and 19 are 2): an open of
#: such a file sets WAL mode without writing. Any other file is checked before the open.
_MAGIC = b"SQLite format 3\x00"
#: SQLite virtual-machine steps between two looks at a cancellation (the progress handler
#: costs nothing measurable at this interval).
_PROGRESS_STEPS = 1000

#: Tests only: called from the check's progress handler, to slow a check deterministically
#: (SQLite itself is real; see tests/store/test_background_check.py).
progress_hook: Callable[[], object] | None = None


def offline(settings: StoreSettings | None = None) -> StoreSettings:
    """``settings`` (the defaults when None) for an offline command (export, import,
    migrate): it has no endpoint to announce sooner, so it checks every page before it
    starts and a damaged store is refused up front, whatever the size (an export beside
    the check would copy what it can read)."""
    base = settings if settings is not None else StoreSettings()
    return msgspec.structs.replace(base, page_check_background_bytes=sys.maxsize)


def _first_problem(conn: sqlite3.Connection) -> str | None:
    """None when every page is sound, else quick_check's first finding (one line)."""
    first = conn.execute("PRAGMA quick_check(1)").fetchone()
    if first is None or str(first[0]).lower() == "ok":
        return None
    detail = str(first[0]).replace("*** in database main ***", "").strip()
    return detail.splitlines()[0][:200] if detail else "quick_check failed"


def wal_file_of_size(path: Path, threshold: int) -> bool:
    """True when ``path`` is at least ``threshold`` bytes and its header says it is a
    SQLite database in WAL mode (its open then writes nothing of its own)."""
    try:
        with path.open("rb") as fh:
            size = path.stat().st_size
            head = fh.read(20)
    except OSError:
        return False
    return size >= threshold and len(head) == 20 and head[:16] == _MAGIC and head[18:20] == b"\2\2"


class PageCheck:
    """The page check of one open store: its mode, state and result, and the wait of
    everything that writes."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.mode = ""  # "sync" or "background", once decided
        self.state = "pending"  # then running, ok, failed or cancelled
        self.seconds: float | None = None
        #: the open left its start-up checkpoint to the writer thread (after the check)
        self.checkpoint_due = False
        self._error: StoreError | None = None
        self._done = threading.Event()
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._callbacks: list[Callable[[StoreError], None]] = []

    # ---- the open ------------------------------------------------------------------

    def run_sync(self, conn: sqlite3.Connection, reason: str = "small file") -> None:
        """Check now on ``conn`` (the open's): CorruptStore when damaged; a sqlite3 error
        that stops the check propagates (the open maps it)."""
        self.mode = "sync"
        self.state = "running"
        started = self._log_start(reason)
        try:
            detail = _first_problem(conn)
        except BaseException:
            self._finish("failed", started, None)
            raise
        if detail is None:
            self._finish("ok", started, None)
            return
        err = CorruptStore(str(self.db_path), detail)
        self._finish("failed", started, err)
        raise err

    def defer(self) -> None:
        """Check in the background once the open is done (:meth:`start`)."""
        self.mode = "background"

    @property
    def deferred(self) -> bool:
        """The open chose the background check and it has not started yet."""
        return self.mode == "background" and self.state == "pending"

    def require(self, conn: sqlite3.Connection, reason: str) -> None:
        """The open is about to write: a deferred check runs now, before the write."""
        if self.deferred:
            self.run_sync(conn, reason)

    def start(self) -> None:
        """Start a deferred check on its own thread and read-only connection."""
        if not self.deferred:
            return
        try:
            conn = sqlite3.connect(
                f"file:{quote(str(self.db_path))}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "open", str(self.db_path)) from exc
        conn.set_progress_handler(self._progress, _PROGRESS_STEPS)
        self._conn = conn
        self.state = "running"
        self._thread = threading.Thread(
            target=self._run, args=(conn,), name="libravdb-store-page-check", daemon=True
        )
        self._thread.start()

    # ---- the check's thread ----------------------------------------------------------

    def _progress(self) -> int:
        hook = progress_hook
        if hook is not None:
            hook()
        return 1 if self._cancel.is_set() else 0  # non-zero: SQLite interrupts the check

    def _run(self, conn: sqlite3.Connection) -> None:
        # SQLite runs the check without the GIL, beside the start's own loads: at 1M
        # memories, on two cores, it took a core from a restart's first assemble for 30 s
        lower_this_thread()
        started = self._log_start("large file")
        try:
            detail = _first_problem(conn)
        except sqlite3.Error as exc:
            if self._cancel.is_set():
                self._finish("cancelled", started, StoreClosed("the store is closed"))
                return
            err = map_sqlite_error(exc, "open", str(self.db_path))
            if not isinstance(err, StoreError):
                err = StorageUnavailable(f"cannot check {self.db_path}: {exc}")
            self._finish("failed", started, err)
            return
        except BaseException as exc:  # never leave the writes waiting
            self._finish("failed", started, StorageUnavailable(f"page check failed: {exc}"))
            raise
        if detail is None:
            with self._lock:  # passed: SQLite may checkpoint on close again
                self._conn = None
            conn.close()
            self._finish("ok", started, None)
        else:
            self._finish("failed", started, CorruptStore(str(self.db_path), detail))

    def _log_start(self, reason: str) -> float:
        try:
            size = self.db_path.stat().st_size
        except OSError:
            size = 0
        log.info("store.page_check_started", mode=self.mode, bytes=size, reason=reason)
        return time.monotonic()

    def _finish(self, state: str, started: float, error: StoreError | None) -> None:
        self.seconds = round(time.monotonic() - started, 3)
        self._error = error
        self.state = state
        fields: dict[str, Any] = {"mode": self.mode, "state": state, "seconds": self.seconds}
        if error is not None and state == "failed":
            fields["error"] = error.code
            log.error("store.pages_checked", **fields)
        else:
            log.info("store.pages_checked", **fields)
        with self._lock:  # a callback registered from now on is called by on_failure
            self._done.set()
            callbacks = list(self._callbacks)
        if state == "failed" and error is not None and self.mode == "background":
            for callback in callbacks:
                try:
                    callback(error)
                except Exception:
                    log.exception("store.page_check_callback_failed")

    # ---- what waits for it -----------------------------------------------------------

    @property
    def passed(self) -> bool:
        return self.state == "ok"

    def wait(self) -> StoreError | None:
        """Block until the check has a result: None when it passed, else the error every
        write fails with (StoreClosed after a close interrupted it)."""
        self._done.wait()
        return self._error

    def on_failure(self, callback: Callable[[StoreError], None]) -> None:
        """Call ``callback(error)`` (from the check's thread) if the background check
        fails; at once if it already has."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        if self.state == "failed" and self._error is not None and self.mode == "background":
            callback(self._error)

    def report(self) -> dict[str, Any]:
        """``{state, mode, seconds}`` for the store's stats and the daemon's status."""
        return {"state": self.state, "mode": self.mode, "seconds": self.seconds}

    # ---- close -----------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop a check in progress (the store closes): interrupted, not waited for. A
        deferred check that never started ends too, so that nothing waits on it."""
        self._cancel.set()
        with self._lock:
            if self._conn is not None:
                self._conn.interrupt()
        thread = self._thread
        if thread is not None:
            thread.join()
        elif not self._done.is_set():
            self.state = "cancelled"
            self._error = StoreClosed("the store is closed")
            self._done.set()

    def close(self) -> None:
        """Close the check's connection: last, after every other of the store."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
