"""Advisory locks of the PostgreSQL store.

* **Session locks** (``Store.session_lock``): ``pg_advisory_lock(<class>, hashtext(key))``
  on a connection of the lock's own, held until released. Closing that connection is the
  release, so a daemon that dies (``kill -9`` included) frees its locks at once: the server
  ends its sessions. Locks are scoped to the database, which is exactly "one memory".
* **Write fences**: the lock and the writes made under it are on different connections,
  so a holder that dies leaves a window: the server ends the lock's session at once, but a
  write whose COMMIT was sent before the death may still be running (flushing its WAL,
  waiting for a row lock). The next holder would read the state that write replaces, and
  its compare-and-swap would lose to the commit landing a moment later ("version conflict
  on session_state ...: expected version 50, record is at version 51", seen once in six
  ``kill -9`` runs of two daemons). So every write transaction of a process takes, first,
  ``pg_advisory_xact_lock_shared(<fence>, hashtext(key))`` for each session lock the
  process holds (in the round trip that reads its transaction id: nothing more to pay),
  and whoever takes a session lock then takes its fence exclusively, which waits until
  those transactions have committed or rolled back, and lets it go at once. Shared, the
  holder's own writes never wait for each other; taken by transaction, a fence is
  released by the server at the commit, dead client or not.
* **Presence**: every open store holds the presence lock in shared mode; ``libravdb
  reembed`` takes it exclusively, so it never rewrites vectors under a serving daemon, and
  a daemon does not start in the middle of a re-embed.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pge

from sidecar.store.errors import SessionLocked, StoreError, StoreLocked
from sidecar.store.pg.conn import LOCK_FENCE, LOCK_PRESENCE, LOCK_SESSION, map_pg_error

if TYPE_CHECKING:
    from sidecar.store.pg.conn import Db


def _text(key: str) -> str:
    """A lock key as PostgreSQL text (which cannot hold NUL)."""
    return key.replace("\\", "\\\\").replace("\x00", "\\0")


class PgLease:
    """A held session lock: its connection (closing it releases the lock)."""

    def __init__(self, conn: psycopg.Connection[Any], db: Db, key: str) -> None:
        self._conn: psycopg.Connection[Any] | None = conn
        self._mutex = threading.Lock()
        self._db, self._key = db, key
        db.hold(key)

    def release(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
        if conn is not None:
            self._db.unhold(self._key)
            release_all(conn)


def release_all(conn: psycopg.Connection[Any]) -> None:
    """Unlock, then close: the server ends a closed session's backend (and its locks) a
    moment after the client leaves, which a next locker must not have to wait for."""
    with contextlib.suppress(psycopg.Error):
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock_all()")
    with contextlib.suppress(psycopg.Error):
        conn.close()


def _fence(conn: psycopg.Connection[Any], key: str, *, wait: bool = True) -> bool:
    """The session lock ``key`` is ours: let the writes of its last holder end first (its
    fence, taken and let go in one statement). ``wait=False``: False when one still runs."""
    fn = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    row = conn.execute(f"SELECT {fn}(%s, hashtext(%s))", (LOCK_FENCE, key)).fetchone()
    return wait or bool(row and row[0])


@contextlib.contextmanager
def _closed_on_error(conn: psycopg.Connection[Any], db: Db) -> Iterator[None]:
    """Close ``conn`` when the block fails, a database error mapped to the store's."""
    try:
        yield
    except psycopg.Error as exc:
        conn.close()
        raise map_pg_error(exc, "lock", db.where) from exc
    except BaseException:
        conn.close()
        raise


def try_session_lock(db: Db, key: str) -> PgLease | None:
    conn = db.connect()
    with _closed_on_error(conn, db):
        row = conn.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_SESSION, _text(key))
        ).fetchone()
        if row and row[0]:
            if _fence(conn, _text(key), wait=False):
                return PgLease(conn, db, _text(key))
            release_all(conn)  # its last holder's write is still committing: busy
            return None
    conn.close()
    return None


def acquire_session_lock(db: Db, key: str, timeout: float | None) -> PgLease:
    """Block until the lock is ours (``timeout`` seconds at most: SessionLocked)."""
    conn = db.connect()
    with _closed_on_error(conn, db):
        try:
            if timeout is not None:
                # advisory locks honour lock_timeout; 0 would mean "no timeout"
                ms = max(1, int(timeout * 1000))
                conn.execute(f"SET lock_timeout = {ms}")  # an int
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (LOCK_SESSION, _text(key)))
            _fence(conn, _text(key))  # within the same lock_timeout
            if timeout is not None:
                conn.execute("SET lock_timeout = 0")
        except pge.LockNotAvailable as exc:
            raise SessionLocked(key, timeout, db.where) from exc
    return PgLease(conn, db, _text(key))


@contextlib.contextmanager
def session_lock(db: Db, key: str, timeout: float | None) -> Iterator[None]:
    lease = acquire_session_lock(db, key, timeout)
    try:
        yield
    finally:
        lease.release()


class DatabaseInUse(StoreLocked):
    """The database is held by daemons (for ``reembed``) or by a re-embed (for a daemon)."""

    def __init__(self, where: str, detail: str) -> None:
        StoreError.__init__(self, f"database {where} is in use: {detail}", data_dir=where, pid=None)


def hold_presence(db: Db) -> psycopg.Connection[Any]:
    """Take the presence lock (shared) on a connection of its own; refused while a
    re-embed holds it exclusively."""
    conn = db.connect(application_name=f"libravdbd pid {os.getpid()}")
    row = conn.execute("SELECT pg_try_advisory_lock_shared(%s, 0)", (LOCK_PRESENCE,)).fetchone()
    if not (row and row[0]):
        conn.close()
        raise DatabaseInUse(
            db.where,
            "`libravdb reembed` is rewriting its vectors; start the daemon when it has finished",
        )
    return conn


def holders(conn: psycopg.Connection[Any]) -> list[str]:
    """application_name of every other session holding the presence lock."""
    rows = conn.execute(
        "SELECT DISTINCT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
        "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.classid = %s::oid AND l.objid = 0 "
        "AND l.granted AND l.pid <> pg_backend_pid()",
        (LOCK_PRESENCE,),
    ).fetchall()
    return sorted(str(r[0]) or "?" for r in rows)
