"""The PostgreSQL store's schema and its versioned migrations.

Everything lives in the ``libravdb`` schema of the database the URL names (the ``vector``
extension wherever it is installed). ``libravdb.schema_version`` holds one row per applied
migration. Each migration runs in one transaction together with its row, under a
transaction-scoped advisory lock, so a crash mid-migration leaves the previous version and
two daemons starting at once never both migrate (the second waits, then finds the work
done). Migrations only move forward; a database newer than :data:`SCHEMA_VERSION` is refused
with ``SchemaTooNew``. Add one by appending a function to ``MIGRATIONS``; never edit a
released one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import psycopg
from psycopg import sql

from sidecar.store.errors import SchemaTooNew, StorageUnavailable
from sidecar.store.files import now_ms
from sidecar.store.names import ts_from_metadata
from sidecar.store.pg.codec import filter_json
from sidecar.store.pg.conn import LOCK_MIGRATE, SCHEMA
from sidecar.store.record_keys import backfill

Conn = psycopg.Connection[Any]
Migration = Callable[[Conn], None]


def _v1(conn: Conn) -> None:
    """Collections, records (vectors as pgvector ``vector``), tombstones, meta."""
    for stmt in (
        # A new extension goes to public (where applications expect it), not our schema.
        "SET LOCAL search_path TO public",
        "CREATE EXTENSION IF NOT EXISTS vector",
        f"SET LOCAL search_path TO {SCHEMA}, public",
        "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
        # The store-wide write sequence: every change of a record takes the next value.
        "CREATE SEQUENCE seq AS bigint",
        # n_records and version change in the transaction of every write to the collection
        # (docs/store.md "PostgreSQL backend": counts and collection_versions from SQL).
        """CREATE TABLE collections (
            cid        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name       text COLLATE "C" NOT NULL UNIQUE,
            dims       integer NOT NULL CHECK (dims >= 1),
            kind       text NOT NULL CHECK (kind IN ('vector', 'vectorless')),
            created_ms bigint NOT NULL,
            n_records  bigint NOT NULL DEFAULT 0,
            version    bigint NOT NULL DEFAULT nextval('seq')
        )""",
        # id in byte order (COLLATE "C"), as the SQLite store sorts. text cannot hold NUL:
        # such a text is kept exactly in text_raw (UTF-8) and with U+FFFD in text.
        # metadata is the JSON object exactly as written (key order, 1 vs 1.0, big ints).
        """CREATE TABLE records (
            rid        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            cid        bigint NOT NULL REFERENCES collections (cid) ON DELETE CASCADE,
            id         text COLLATE "C" NOT NULL,
            text       text NOT NULL,
            text_raw   bytea,
            metadata   text NOT NULL,
            embedding  vector,
            version    bigint NOT NULL,
            seq        bigint NOT NULL,
            created_ms bigint NOT NULL,
            updated_ms bigint NOT NULL,
            UNIQUE (cid, id)
        )""",
        """CREATE TABLE tombstones (
            namespace  text COLLATE "C" NOT NULL,
            key        text COLLATE "C" NOT NULL,
            reason     text NOT NULL DEFAULT '',
            created_ms bigint NOT NULL,
            PRIMARY KEY (namespace, key)
        )""",
        "CREATE INDEX tombstones_key ON tombstones (key)",
    ):
        conn.execute(stmt)  # constant DDL


def _v2(conn: Conn) -> None:
    """Filters in SQL: ``meta`` (jsonb copy of the metadata, for ``where``) and ``ts_ms``
    (the record timestamp, for time ranges), filled from every existing record."""
    conn.execute("ALTER TABLE records ADD COLUMN meta jsonb, ADD COLUMN ts_ms bigint")
    after = 0
    while True:
        rows = conn.execute(
            "SELECT rid, metadata, created_ms FROM records WHERE rid > %s ORDER BY rid LIMIT 2000",
            (after,),
        ).fetchall()
        if not rows:
            break
        updates = []
        for rid, raw, created in rows:
            try:
                decoded = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                decoded = {}
            meta = decoded if isinstance(decoded, dict) else {}
            updates.append((filter_json(raw, meta), ts_from_metadata(meta, created), rid))
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE records SET meta = %s::jsonb, ts_ms = %s WHERE rid = %s", updates
            )
        after = rows[-1][0]
    for stmt in (
        "ALTER TABLE records ALTER COLUMN meta SET NOT NULL, ALTER COLUMN ts_ms SET NOT NULL",
        "CREATE INDEX records_cid_ts ON records (cid, ts_ms)",
        # scalar equality filters are containment tests (meta @> '{"k": v}'): GIN-indexable
        "CREATE INDEX records_meta ON records USING gin (meta jsonb_path_ops)",
    ):
        conn.execute(stmt)  # constant DDL


# The end of a write transaction, per collection it touched (writes.PgTx.finish): under
# the collection row's lock, the count, the removal counter and a fresh version. Record
# seqs are taken mid-transaction, before that lock: when another transaction committed to
# the collection since this one began (its version is not older than p_start, the
# sequence's value when this one began), this one's records there are given fresh seqs,
# greater than that version. So every record committed to a collection after a version V
# has a seq above V: the version is the watermark of changed_since (CollectionState.max_seq).
_FINISH = f"""
CREATE FUNCTION finish_collection(p_cid bigint, p_delta bigint, p_removed bigint,
                                  p_start bigint) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    old bigint;
    n bigint;
BEGIN
    SELECT version INTO old FROM {SCHEMA}.collections WHERE cid = p_cid FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF old >= p_start THEN
        UPDATE {SCHEMA}.records SET seq = nextval('{SCHEMA}.seq')
         WHERE cid = p_cid AND seq >= p_start AND seq <= old
           AND xmin = pg_current_xact_id()::xid;
    END IF;
    UPDATE {SCHEMA}.collections
       SET n_records = n_records + p_delta, removals = removals + p_removed,
           version = nextval('{SCHEMA}.seq')
     WHERE cid = p_cid RETURNING n_records INTO n;
    RETURN n;
END
$fn$
"""


def _v3(conn: Conn) -> None:
    """Catching up in O(changes) (collection_states, changed_since): a removal counter per
    collection (existing ones start at 0), the records of a collection in seq order, and
    the end of a write transaction that keeps seqs above the version (``_FINISH``)."""
    for stmt in (
        "ALTER TABLE collections ADD COLUMN removals bigint NOT NULL DEFAULT 0",
        "CREATE INDEX records_cid_seq ON records (cid, seq)",
        _FINISH,
        # versions above every seq written before (increments, and the rare writer whose
        # seqs were below another's version: what _FINISH now prevents)
        "UPDATE collections SET version = nextval('seq')",
    ):
        conn.execute(stmt)  # constant DDL


def _v4(conn: Conn) -> None:
    """Listing by time (docs/store.md): each record's session and marks (record_keys.py),
    filled from the records stored before, and the newest-first indexes that carry them
    (they replace ``records_cid_ts``, whose ranges they serve as well)."""
    conn.execute(
        'ALTER TABLE records ADD COLUMN session_key text COLLATE "C", '
        "ADD COLUMN marks integer NOT NULL DEFAULT 0"
    )

    def write(updates: list[tuple[str | None, int, int]]) -> None:
        if updates:
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE records SET session_key = %s, marks = %s WHERE rid = %s", updates
                )

    backfill(
        lambda after: conn.execute(
            "SELECT rid, metadata FROM records WHERE rid > %s ORDER BY rid LIMIT 5000", (after,)
        ).fetchall(),
        write,
    )
    for stmt in (
        "DROP INDEX records_cid_ts",
        "CREATE INDEX records_cid_time ON records (cid, ts_ms DESC, id) INCLUDE (marks)",
        "CREATE INDEX records_cid_session_time ON records (cid, session_key, ts_ms DESC, id) "
        "INCLUDE (marks) WHERE session_key IS NOT NULL",
    ):
        conn.execute(stmt)  # constant DDL


def _finish_deleting(*tables: str) -> str:
    """``_FINISH``, and then the rows of ``tables`` (what was saved from the collection:
    pg/saves.py) go in the transaction of any removal from it, once it holds the
    collection row's lock (a save takes that lock in share mode)."""
    update = f"    UPDATE {SCHEMA}.collections\n"
    deletes = "".join(f"        DELETE FROM {SCHEMA}.{t} WHERE cid = p_cid;\n" for t in tables)
    delete = "    IF p_removed > 0 THEN\n" + deletes + "    END IF;\n"
    made = _FINISH.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    assert made.count(update) == 1  # released text: it does not change
    return made.replace(update, delete + update)


def _v5(conn: Conn) -> None:
    """Saved BM25 terms shared by the daemons (pg/saved_terms.py): one row per collection,
    its body stored uncompressed, deleted by the transaction of any removal from the
    collection (``_finish_deleting``) and with the collection."""
    for stmt in (
        """CREATE TABLE saved_terms (
            cid    bigint PRIMARY KEY REFERENCES collections (cid) ON DELETE CASCADE,
            header text NOT NULL,
            body   bytea NOT NULL
        )""",
        "ALTER TABLE saved_terms ALTER COLUMN body SET STORAGE EXTERNAL",
        _finish_deleting("saved_terms"),
    ):
        conn.execute(stmt)  # constant DDL


def _v6(conn: Conn) -> None:
    """What views save, as blobs in parts (pg/saves.py): the saved BM25 terms (which move
    here: v5's rows are dropped, derived data a load analyzes and saves again) and the
    saved views, stored uncompressed, deleted by the transaction of any removal from the
    collection (``_finish_deleting``) and with the collection."""
    for stmt in (
        """CREATE TABLE saved_parts (
            cid  bigint NOT NULL REFERENCES collections (cid) ON DELETE CASCADE,
            kind smallint NOT NULL,
            part integer NOT NULL,
            body bytea NOT NULL,
            PRIMARY KEY (cid, kind, part)
        )""",
        "ALTER TABLE saved_parts ALTER COLUMN body SET STORAGE EXTERNAL",
        _finish_deleting("saved_parts"),
        "DROP TABLE saved_terms",
    ):
        conn.execute(stmt)  # constant DDL


MIGRATIONS: tuple[Migration, ...] = (_v1, _v2, _v3, _v4, _v5, _v6)
SCHEMA_VERSION = len(MIGRATIONS)


def lock_migrations(conn: Conn) -> None:
    """Take the migration lock for the current transaction (also guards the first
    fingerprint write: two daemons opening an empty database must agree on one model)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_MIGRATE,))


def schema_version(conn: Conn) -> int:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",)
    ).fetchone()
    if row is None or not row[0]:
        return 0
    got = conn.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_version").format(
            sql.Identifier(SCHEMA)
        )
    ).fetchone()
    return 0 if got is None else int(got[0])


def _refuse_newer(current: int) -> None:
    SchemaTooNew.refuse(current, SCHEMA_VERSION)


def migrate(conn: Conn, target: int = SCHEMA_VERSION) -> list[int]:
    """Bring the database to ``target`` (autocommit connection); returns the versions applied."""
    applied: list[int] = []
    while True:
        with conn.transaction():
            lock_migrations(conn)
            current = schema_version(conn)
            _refuse_newer(current)
            if current >= target:
                return applied
            if current == 0:
                try:
                    conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA))
                    )
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise StorageUnavailable(
                        f"cannot create schema {SCHEMA}: {exc}; grant CREATE on the database "
                        "to the store's role"
                    ) from exc
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {}.schema_version "
                        "(version integer PRIMARY KEY, applied_ms bigint NOT NULL)"
                    ).format(sql.Identifier(SCHEMA))
                )
            conn.execute(
                sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(SCHEMA))
            )
            try:
                MIGRATIONS[current](conn)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StorageUnavailable(
                    f"schema migration {current + 1} needs a privilege the store's role lacks "
                    f"({exc}); the vector extension needs a superuser once: "
                    "CREATE EXTENSION vector"
                ) from exc
            conn.execute(
                "INSERT INTO schema_version (version, applied_ms) VALUES (%s, %s)",
                (current + 1, now_ms()),
            )
        applied.append(current + 1)
