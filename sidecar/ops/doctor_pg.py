"""Doctor checks of a PostgreSQL store (``store.url``): the server answers, the database has
the ``vector`` extension and the store's schema, the fingerprint it records against the
configured model's, and which daemons have it open. Reads only: one connection, a few
catalog queries, no lock taken. The URL's password never appears in a finding."""

from __future__ import annotations

from typing import Any

from sidecar.config import mask_url
from sidecar.ops.doctor_result import Check, fail, ok, warn
from sidecar.ops.doctor_store import compare_fingerprint

CONNECT_TIMEOUT_S = 5


def check_postgres(url: str, configured: str, profile: str, reembed_fix: str) -> list[Check]:
    import psycopg
    from psycopg import errors as pge

    from sidecar.store.pg.conn import SCHEMA

    shown = mask_url(url)
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        return [
            fail(
                "store",
                f"cannot reach {shown}: {_first_line(exc, url)}",
                "start the server, or fix store.url / LIBRAVDB_STORE_URL (a password belongs "
                "in ~/.pgpass or passfile=, not in the URL)",
            )
        ]
    with conn:
        version = _one(conn, "SHOW server_version") or "?"
        vector = _one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        if vector is None:
            return [_no_extension(conn, f"PostgreSQL {version} at {shown}")]
        meta: dict[str, str] | None
        try:
            rows = conn.execute(f"SELECT key, value FROM {SCHEMA}.meta").fetchall()
            meta = {str(k): str(v) for k, v in rows}
        except pge.UndefinedTable:
            meta = None
        daemons = _daemons(conn)
    where = f"PostgreSQL {version} at {shown}, pgvector {vector}"
    if meta is None:
        return [ok("store", f"{where}: no store yet (the first daemon creates it)")]
    open_by = f"{daemons} daemon(s) have it open" if daemons else "no daemon has it open"
    return [
        ok("store", f"{where}; {open_by}"),
        compare_fingerprint(
            meta,
            configured,
            profile,
            reembed_fix,
            stopped="every daemon on the database stopped",
            configure="that model",
        ),
    ]


def _no_extension(conn: Any, where: str) -> Check:
    """The database lacks ``vector``: fine for a new database whose first daemon may create
    it (a superuser role), a failure when the server does not have pgvector at all."""
    available = _one(
        conn, "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
    )
    if available is None:
        return fail(
            "store",
            f"{where} answers, but pgvector is not installed on the server",
            "install pgvector (the vector extension) on the server, then in the database, as a "
            "superuser: CREATE EXTENSION vector",
        )
    superuser = _one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    if superuser in ("t", "True", "true"):
        return ok("store", f"{where}: no store yet; the first daemon creates it and pgvector")
    return warn(
        "store",
        f"{where} answers; pgvector {available} is installed on the server but not created in "
        "this database, and this role may not create it",
        "as a superuser, in that database: CREATE EXTENSION vector",
    )


def _one(conn: Any, sql: str) -> str | None:
    row = conn.execute(sql).fetchone()
    return None if row is None else str(row[0])


def _daemons(conn: Any) -> int:
    from sidecar.store.pg.locks import holders

    try:
        return len(holders(conn))
    except Exception:  # a server without pg_stat_activity rights: not worth a failure
        return 0


def _first_line(exc: BaseException, url: str) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return mask_url(text.replace(url, mask_url(url)))
