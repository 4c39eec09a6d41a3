"""SQLite schema and its versioned migrations.

The schema version lives in ``PRAGMA user_version``. Each migration moves the database from
version ``n - 1`` to ``n`` inside one transaction, together with the ``user_version`` bump,
so a crash during a migration leaves the previous version intact. Migrations only ever move
forward; a database newer than :data:`SCHEMA_VERSION` is refused (an older daemon must not
write a format it does not understand).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import msgspec

from sidecar.store.errors import SchemaTooNew

Migration = Callable[[sqlite3.Connection], None]


def _exec_script(conn: sqlite3.Connection, script: str) -> None:
    """Run each statement of ``script`` in the current transaction.

    (``executescript`` would COMMIT the migration's transaction first.)
    """
    buf = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            conn.execute(buf)
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf!r}")


def _v1(conn: sqlite3.Connection) -> None:
    _exec_script(
        conn,
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE collections (
            cid        INTEGER PRIMARY KEY AUTOINCREMENT,
            name       TEXT NOT NULL UNIQUE,
            dims       INTEGER NOT NULL CHECK (dims >= 1),
            kind       TEXT NOT NULL CHECK (kind IN ('vector', 'vectorless')),
            created_ms INTEGER NOT NULL
        );

        -- rid: stable row id, also the label in the ANN index (never reused: AUTOINCREMENT).
        -- seq: store-wide monotonic write sequence of the last change to the record.
        -- vseq: seq of the last change of the vector (index backfill key).
        CREATE TABLE records (
            rid        INTEGER PRIMARY KEY AUTOINCREMENT,
            cid        INTEGER NOT NULL REFERENCES collections(cid),
            id         TEXT NOT NULL,
            text       TEXT NOT NULL,
            metadata   TEXT NOT NULL,
            vector     BLOB,
            version    INTEGER NOT NULL,
            seq        INTEGER NOT NULL,
            vseq       INTEGER NOT NULL,
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            UNIQUE (cid, id)
        );
        CREATE INDEX records_cid_vseq ON records (cid, vseq);

        INSERT INTO meta (key, value) VALUES ('seq', '0');
        """,
    )


def _v2(conn: sqlite3.Connection) -> None:
    # Time-range filters: a materialized record timestamp (metadata.ts, else created_ms).
    conn.execute("ALTER TABLE records ADD COLUMN ts_ms INTEGER")
    rows = conn.execute("SELECT rid, metadata, created_ms FROM records").fetchall()
    from sidecar.store.names import ts_from_metadata  # local: avoid import cycles at load

    for rid, meta, created in rows:
        try:
            decoded = msgspec.json.decode(meta)
        except msgspec.DecodeError:
            decoded = {}
        ts = ts_from_metadata(decoded if isinstance(decoded, dict) else {}, created)
        conn.execute("UPDATE records SET ts_ms = ? WHERE rid = ?", (ts, rid))
    _exec_script(
        conn,
        """
        CREATE INDEX records_cid_ts ON records (cid, ts_ms);

        -- "forget" leaves tombstones so that nothing re-ingested resurrects it.
        CREATE TABLE tombstones (
            namespace  TEXT NOT NULL,
            key        TEXT NOT NULL,
            reason     TEXT NOT NULL DEFAULT '',
            created_ms INTEGER NOT NULL,
            PRIMARY KEY (namespace, key)
        ) WITHOUT ROWID;

        -- An index (collection, tier) whose in-memory update failed; repaired (rebuilt)
        -- at the next checkpoint or start.
        CREATE TABLE dirty_tiers (
            cid        INTEGER NOT NULL,
            dims       INTEGER NOT NULL,
            reason     TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            PRIMARY KEY (cid, dims)
        ) WITHOUT ROWID;
        """,
    )


def _v3(conn: sqlite3.Connection) -> None:
    # Record keys name their collection (and so their session), which makes them unique
    # across namespaces: writers check a key wherever it was forgotten.
    conn.execute("CREATE INDEX tombstones_key ON tombstones (key)")


def _v4(conn: sqlite3.Connection) -> None:
    # Catching up in O(changes) (collection_states, changed_since): how many records were
    # ever removed from each collection (existing collections start at 0), and the
    # records of a collection in write order.
    _exec_script(
        conn,
        """
        ALTER TABLE collections ADD COLUMN removals INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX records_cid_seq ON records (cid, seq);
        """,
    )


def _v5(conn: sqlite3.Connection) -> None:
    # Listing by time (docs/store.md): each record's session and marks (record_keys.py),
    # filled from the records stored before, and the newest-first indexes that carry them.
    from sidecar.store.record_keys import backfill  # local: load order

    _exec_script(
        conn,
        """
        ALTER TABLE records ADD COLUMN session_key TEXT;
        ALTER TABLE records ADD COLUMN marks INTEGER NOT NULL DEFAULT 0;
        """,
    )
    backfill(
        lambda after: conn.execute(
            "SELECT rid, metadata FROM records WHERE rid > ? ORDER BY rid LIMIT 5000", (after,)
        ).fetchall(),
        lambda updates: conn.executemany(
            "UPDATE records SET session_key = ?, marks = ? WHERE rid = ?", updates
        ),
    )
    _exec_script(
        conn,
        """
        DROP INDEX records_cid_ts;
        CREATE INDEX records_cid_time ON records (cid, ts_ms DESC, id, marks);
        CREATE INDEX records_cid_session_time ON records (cid, session_key, ts_ms DESC, id, marks)
            WHERE session_key IS NOT NULL;
        """,
    )


MIGRATIONS: tuple[Migration, ...] = (_v1, _v2, _v3, _v4, _v5)
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> list[int]:
    """Bring the database to ``target``; returns the versions applied.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    current = schema_version(conn)
    SchemaTooNew.refuse(current, SCHEMA_VERSION)
    applied: list[int] = []
    for version in range(current + 1, target + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[version - 1](conn)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied
