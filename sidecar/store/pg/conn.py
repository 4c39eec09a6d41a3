"""Connections to the PostgreSQL store: the URL, the pool, pgvector's binary format, errors
mapped to the store's, and the transaction runner with its retries.

Every write is one transaction committed before the call returns (``synchronous_commit``
is kept at least ``on``). A transaction that loses its connection while committing has an
unknown outcome; the runner asks the server (``pg_xact_status``) instead of guessing.
"""

from __future__ import annotations

import random
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import psycopg
import psycopg_pool
import structlog
from psycopg import errors as pge
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format

from sidecar.config import mask_url
from sidecar.store.errors import CorruptStore, StorageUnavailable, StoreClosed, StoreError

log = structlog.get_logger(__name__)

T = TypeVar("T")

SCHEMA = "libravdb"
URL_SCHEMES = ("postgresql://", "postgres://")
# Advisory lock classes (the first key of the two-key form), one per purpose, so that the
# store's locks never collide with each other or with an application's single-key locks.
LOCK_MIGRATE = 0x6C76_0001  # schema migrations and the first fingerprint write
LOCK_PRESENCE = 0x6C76_0002  # shared by every open store; exclusive for `libravdb reembed`
LOCK_INDEX = 0x6C76_0003  # one ANN index build per collection at a time
LOCK_SESSION = 0x6C76_0004  # Store.session_lock(key): second key hashtext(key)
# The write fence of a session lock (locks.py): shared by every write transaction of a
# daemon that holds the session lock, taken exclusively (and at once let go) by the next
# holder before it reads anything, so that it waits for the writes of a holder that died.
LOCK_FENCE = 0x6C76_0005
LOCK_SAVED_TERMS = 0x6C76_0006  # one save of a collection's BM25 terms at a time (saves.py)
LOCK_SAVED_VIEWS = 0x6C76_0007  # one save of a collection's view at a time (saves.py)
LOCK_SAVED_GRAPHS = 0x6C76_0008  # one save of a collection's view graph at a time
# Deadlocks, serialization failures and a collection dropped under a concurrent write
# (its records' foreign key) are retried with the whole transaction, this many times.
MAX_ATTEMPTS = 6


def is_pg_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """The URL without its password (for messages and logs): ``config.mask_url``, which
    reads a failover list (``h1:5432,h2:5433``) and a password holding ``@``, ``/`` or
    ``:`` without parsing ports (urllib refused such a list: "Port could not be cast")."""
    return mask_url(url)


# ---- pgvector's binary wire format -------------------------------------------------------
# vector_send / vector_recv: int16 dims, int16 unused, then dims big-endian float4. The text
# form ("[0.1,0.2,...]") costs a float repr per value both ways.

_HEAD = struct.Struct(">HH")


class VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        arr = np.asarray(obj, dtype=">f4")
        return _HEAD.pack(arr.shape[0], 0) + arr.tobytes()


class VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        dims = _HEAD.unpack_from(data)[0]
        return np.frombuffer(data, dtype=">f4", count=dims, offset=4).astype(np.float32)


def register_vector(conn: psycopg.Connection[Any], oid: int) -> None:
    """numpy arrays go out as pgvector ``vector``; ``vector`` values come back as float32
    arrays (binary results only: every query that reads vectors asks for binary)."""
    dumper = type("PgVectorDumper", (VectorDumper,), {"oid": oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(oid, VectorLoader)


# ---- errors --------------------------------------------------------------------------------

# Retried as a whole transaction (nothing of the failed attempt was committed).
RETRYABLE = (pge.SerializationFailure, pge.DeadlockDetected, pge.ForeignKeyViolation)
_UNAVAILABLE = (
    pge.DiskFull,
    pge.InsufficientResources,
    pge.ReadOnlySqlTransaction,
    pge.IoError,
    pge.AdminShutdown,
    pge.CannotConnectNow,
    pge.QueryCanceled,
    pge.LockNotAvailable,
)


def map_pg_error(exc: BaseException, action: str, where: str) -> BaseException:
    """A lost or refused connection, a full disk or a read-only server become
    StorageUnavailable; damaged data CorruptStore; anything else passes through."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, (pge.DataCorrupted, pge.IndexCorrupted)):
        err: StoreError = CorruptStore(where, str(exc).strip().splitlines()[0][:200])
    elif isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout, *_UNAVAILABLE)):
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        err = StorageUnavailable(
            f"storage unavailable, the {action} was not applied: PostgreSQL at {where}: {detail}",
            postgres=getattr(exc, "sqlstate", None) or type(exc).__name__,
        )
    else:
        return exc
    err.__cause__ = exc
    return err


# ---- the pool and the transaction runner ---------------------------------------------------


class Db:
    """The store's connection pool (autocommit connections) and how work runs on it."""

    def __init__(
        self,
        url: str,
        *,
        search_path: str,
        session_sql: Sequence[str],
        vector_oid: int,
        pool_size: int,
        timeout: float,
    ) -> None:
        self.url = url
        self.where = redact(url)
        self.timeout = timeout
        self.vector_oid = vector_oid
        self._session_sql = [f"SET search_path TO {search_path}", *session_sql]
        self._closed = False
        self._check_lock = threading.Lock()
        self._pool_size = max(2, pool_size)
        self.pool = self._new_pool()
        self._held: dict[str, int] = {}  # session lock keys this process holds (fences)
        self._held_lock = threading.Lock()

    def hold(self, key: str) -> None:
        """``key``'s session lock is held here: write transactions fence it (locks.py)."""
        with self._held_lock:
            self._held[key] = self._held.get(key, 0) + 1

    def unhold(self, key: str) -> None:
        with self._held_lock:
            left = self._held.get(key, 0) - 1
            if left > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)

    def _fences(self) -> list[str]:
        with self._held_lock:
            return sorted(self._held)

    def _new_pool(self) -> psycopg_pool.ConnectionPool[psycopg.Connection[Any]]:
        pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = psycopg_pool.ConnectionPool(
            self.url,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(self.timeout))},
            min_size=1,
            max_size=self._pool_size,
            configure=self._configure,
            timeout=self.timeout,
            name="libravdb-store",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=self.timeout)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            pool.close()
            raise map_pg_error(exc, "open", self.where) from exc
        return pool

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        register_vector(conn, self.vector_oid)
        for sql in self._session_sql:
            conn.execute(sql)

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        """A connection of its own (locks, index builds): configured like the pool's."""
        try:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.timeout)), **kwargs
            )
        except psycopg.Error as exc:
            raise map_pg_error(exc, "connect", self.where) from exc
        self._configure(conn)
        return conn

    def close(self) -> None:
        self._closed = True
        self.pool.close()

    def ping(self, timeout: float) -> str | None:
        """None when the server takes a new connection and answers on it; else why not,
        on one line. A connection of its own, not the pool's: a busy pool is not an
        outage, and a pooled connection to a server that stopped answering (a network
        that drops packets) could block for minutes where ``connect_timeout`` (libpq
        counts whole seconds, at least 2) bounds a new one."""
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(2, round(timeout))
            ) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            text = str(exc).strip()
            return text.splitlines()[0][:300] if text else type(exc).__name__
        return None

    def _guard(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _recover(self) -> bool:
        """No pooled connection came in time. When the pool is not simply busy (it holds
        fewer connections than it may) and the server answers again, the pool is still
        backing off from an outage (its reconnection delays double up to minutes):
        replace it, so that the first call after the server is back works."""
        stats = self.pool.get_stats()
        if stats.get("pool_size", 0) >= self._pool_size or self._closed:
            return False
        try:
            psycopg.connect(self.url, connect_timeout=max(1, round(self.timeout))).close()
        except psycopg.Error:
            return False
        with self._check_lock:
            old, fresh = self.pool, self._new_pool()
            self.pool = fresh
        threading.Thread(target=old.close, name="libravdb-pool-close", daemon=True).start()
        log.info("store.pg_pool_renewed", database=self.where)
        return True

    def _purge(self) -> None:
        """After a lost connection: test the idle ones (a restarted server leaves every
        pooled connection dead), so the next call gets a live one or a clear error."""
        with self._check_lock:
            try:
                self.pool.check()
            except Exception as exc:  # the pool logs and replaces what it can
                log.debug("store.pg_pool_check_failed", error=str(exc))

    def read(
        self, sql: Any, params: Sequence[Any] | None = None, *, binary: bool = False
    ) -> list[Any]:
        """Run one query (its own snapshot) and fetch every row."""

        def q(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(sql, params, binary=binary).fetchall()

        return self.call(q, "read")

    def call(self, fn: Callable[[psycopg.Connection[Any]], T], action: str = "read") -> T:
        """``fn(conn)`` on a pooled connection outside any transaction; retried once on a
        connection that turns out to be dead (a read has no effect to repeat)."""
        self._guard()
        for attempt in (1, 2):
            try:
                with self.pool.connection() as conn:
                    return fn(conn)
            except psycopg_pool.PoolClosed as exc:
                if self._closed:
                    raise StoreClosed("the store is closed") from exc
                if attempt == 2:  # replaced under this call (after an outage)
                    raise map_pg_error(exc, action, self.where) from exc
            except psycopg_pool.PoolTimeout as exc:
                if attempt == 2 or not self._recover():
                    raise map_pg_error(exc, action, self.where) from exc
            except psycopg.OperationalError as exc:
                if attempt == 2 or self._closed:
                    raise map_pg_error(exc, action, self.where) from exc
                self._purge()
            except psycopg.Error as exc:
                raise map_pg_error(exc, action, self.where) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def transact(self, fn: Callable[[psycopg.Connection[Any]], T], action: str = "write") -> T:
        """``fn(conn)`` inside one transaction, committed before returning.

        Deadlocks and serialization failures rerun the whole function (its effects were
        rolled back); so does a connection found dead before the commit was sent. A
        connection lost during the commit is settled by asking the server whether the
        transaction committed."""
        self._guard()
        for attempt in range(1, MAX_ATTEMPTS + 1):
            state: dict[str, Any] = {"xid": None, "committing": False}
            try:
                return self._attempt(fn, state)
            except RETRYABLE as exc:
                if attempt == MAX_ATTEMPTS:
                    raise map_pg_error(exc, action, self.where) from exc
                time.sleep(random.uniform(0.001, 0.01) * attempt)
            except psycopg_pool.PoolClosed as exc:
                if self._closed or attempt >= 2:
                    raise StoreClosed("the store is closed") from exc
            except psycopg_pool.PoolTimeout as exc:
                if attempt >= 2 or not self._recover():
                    raise map_pg_error(exc, action, self.where) from exc
            except psycopg.OperationalError as exc:
                if state["committing"]:
                    return cast(T, self._settle(exc, state, action))
                if attempt >= 2 or self._closed:
                    raise map_pg_error(exc, action, self.where) from exc
                self._purge()
            except psycopg.Error as exc:
                raise map_pg_error(exc, action, self.where) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, fn: Callable[[psycopg.Connection[Any]], T], state: dict[str, Any]) -> T:
        with self.pool.connection() as conn, conn.transaction():
            fences = self._fences()
            if fences:
                # in the same round trip, before anything is written: the fences of the
                # session locks held, which the next holder of one waits for (locks.py)
                row = conn.execute(
                    "SELECT pg_current_xact_id()::text, (SELECT count("
                    "pg_advisory_xact_lock_shared(%s, hashtext(k))) FROM unnest(%s::text[]) k)",
                    (LOCK_FENCE, fences),
                ).fetchone()
            else:
                row = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
            state["xid"] = None if row is None else row[0]
            result = fn(conn)
            state["committing"] = True
            state["result"] = result
        return result

    def _settle(self, exc: BaseException, state: dict[str, Any], action: str) -> Any:
        """The connection died while committing: committed or not, per the server."""
        xid = state["xid"]
        status = None
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.timeout))
            ) as conn:
                row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                status = None if row is None else row[0]
        except psycopg.Error:
            status = None
        self._purge()
        if status == "committed":
            log.warning("store.pg_commit_confirmed", xid=xid, error=str(exc))
            return state["result"]
        err = map_pg_error(exc, action, self.where)
        if status is None and isinstance(err, StoreError):
            err.message += (
                " (the connection was lost while committing and the server could not be "
                "asked whether the transaction committed: check before repeating it)"
            )
            err.data["outcome"] = "unknown"
            err.args = (err.message,)
        raise err from exc
