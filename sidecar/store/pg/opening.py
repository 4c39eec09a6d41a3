"""Opening a PostgreSQL store: connect, migrate, the pool's session settings, the presence
lock, and the embedding fingerprint (checked and first written under the migration lock,
so two daemons opening an empty database with different models cannot both win)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import psycopg
import structlog
from psycopg import sql

from sidecar.config import scrub
from sidecar.store.common import STAGE_DISCARDED, check_fingerprint, meta_writes
from sidecar.store.errors import StorageUnavailable
from sidecar.store.pg.conn import SCHEMA, Db, map_pg_error
from sidecar.store.pg.reembed import discard_stage, staged_progress
from sidecar.store.pg.schema import SCHEMA_VERSION, lock_migrations, migrate
from sidecar.store.reembed_stage import TARGET_DIMS_KEY, TARGET_KEY

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

log = structlog.get_logger(__name__)

Conn = psycopg.Connection[Any]


def open_db(store: PgState, url: str, *, pool_size: int, timeout: float) -> Db:
    """Migrate the database and return the store's pool (configured for its sessions)."""
    where = store.location
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout))) as c:
            applied = migrate(c)
            vschema, oid, sync = _server_facts(c)
    except psycopg.Error as exc:
        err = map_pg_error(exc, "open", where)
        if isinstance(err, StorageUnavailable):
            raise StorageUnavailable(
                f"cannot open the store database {where}: {scrub(str(exc).strip(), url) or exc!r}",
                postgres=err.data.get("postgres"),
            ) from exc
        raise err from exc
    if applied:
        log.info("store.migrated", versions=applied, schema=SCHEMA_VERSION, database=where)
    session = [
        # the funnel's defaults for every query of the session (one SET per connection
        # instead of SET LOCAL and a transaction per search)
        f"SET hnsw.ef_search = {int(store.params.ef_search)}",
        "SET hnsw.iterative_scan = relaxed_order",
    ]
    if sync == "off":
        # an acknowledged write must be durable: never weaker than the default
        session.append("SET synchronous_commit = on")
    search_path = sql.SQL(", ").join([sql.Identifier(SCHEMA), sql.Identifier(vschema)])
    return Db(
        url,
        search_path=search_path.as_string(None),
        session_sql=session,
        vector_oid=oid,
        pool_size=pool_size,
        timeout=timeout,
    )


# halfvec, l2_normalize and subvector: 0.7; iterative index scans (filters in the funnel): 0.8
MIN_PGVECTOR = (0, 8)


def _server_facts(conn: Conn) -> tuple[str, int, str]:
    """(schema of the vector extension, the vector type's oid, synchronous_commit)."""
    row = conn.execute(
        "SELECT n.nspname, t.oid, e.extversion FROM pg_extension e JOIN pg_namespace n ON "
        "n.oid = e.extnamespace JOIN pg_type t ON t.typname = 'vector' AND t.typnamespace = "
        "n.oid WHERE e.extname = 'vector'"
    ).fetchone()
    if row is None:
        raise StorageUnavailable("the vector extension is missing: CREATE EXTENSION vector")
    version = tuple(int(p) for p in str(row[2]).split(".")[:2] if p.isdigit())
    if version < MIN_PGVECTOR:
        raise StorageUnavailable(
            f"pgvector {row[2]} is too old: the store needs 0.8 or newer "
            "(ALTER EXTENSION vector UPDATE after installing it)"
        )
    got = conn.execute("SHOW synchronous_commit").fetchone()
    return str(row[0]), int(row[1]), str(got[0]) if got else "on"


def check_meta(store: PgState, allow_mismatch: bool, profile: Mapping[str, Any] | None) -> None:
    """Refuse another model's vectors (as the SQLite store does); record this model."""

    def run(conn: Conn) -> None:
        lock_migrations(conn)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if not allow_mismatch:
            _check_fingerprint(store, conn, meta)
        writes = meta_writes(meta, store, profile)
        for key, value in writes.items():
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    store.db.transact(run, "open")


def _check_fingerprint(store: PgState, conn: Conn, meta: dict[str, str]) -> None:
    target = meta.get(TARGET_KEY, "")
    where = store.location
    check_fingerprint(
        meta,
        fingerprint=store.fingerprint,
        model=store.model,
        where=where,
        progress=lambda: staged_progress(conn),
    )
    if target and TARGET_DIMS_KEY in meta:
        discard_stage(conn)
        log.warning(
            "store.reembed_discarded",
            database=where,
            reason=STAGE_DISCARDED,
        )
