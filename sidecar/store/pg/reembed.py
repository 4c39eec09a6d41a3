"""``libravdb reembed`` on a PostgreSQL store: the SQLite algorithm, in SQL.

New vectors are staged in ``reembed_stage`` (one transaction per batch) while the records
keep the old ones; when every record is staged, one transaction drops the ANN indexes
(their expressions name the old dimension), copies the staged vectors into the records
(each with a fresh sequence number), adapts the collections' dimensions, bumps their
versions, switches the model in ``meta`` and drops the stage. A kill at any instant leaves
the old model's store plus a stage that a rerun resumes. The re-embed holds the presence
lock exclusively: it refuses to start while a daemon serves the database, and no daemon
starts while it runs (``locks.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import structlog

from sidecar.store import names as N
from sidecar.store.pg import saves
from sidecar.store.pg.conn import LOCK_PRESENCE, SCHEMA, map_pg_error, redact, register_vector
from sidecar.store.pg.locks import DatabaseInUse, holders
from sidecar.store.pg.schema import migrate
from sidecar.store.reembed_job import F32s, ReembedArgs, ReembedJob, ReembedStats
from sidecar.store.reembed_stage import TARGET_DIMS_KEY, TARGET_KEY, TARGET_MODEL_KEY

log = structlog.get_logger(__name__)

Conn = psycopg.Connection[Any]
STAGE = "reembed_stage"


def _set_meta(conn: Conn, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def discard_stage(conn: Conn) -> bool:
    """Drop an unfinished re-embed's stage and markers (in the caller's transaction)."""
    had = conn.execute("SELECT 1 FROM meta WHERE key = %s", (TARGET_KEY,)).fetchone()
    conn.execute(f"DROP TABLE IF EXISTS {STAGE}")
    conn.execute(
        "DELETE FROM meta WHERE key IN (%s, %s, %s)",
        (TARGET_KEY, TARGET_MODEL_KEY, TARGET_DIMS_KEY),
    )
    return had is not None


def staged_progress(conn: Conn) -> tuple[int, int]:
    """(records staged, records to re-embed) of an unfinished re-embed."""
    done = 0
    row = conn.execute("SELECT to_regclass(%s)", (STAGE,)).fetchone()
    if row is not None and row[0] is not None:
        got = conn.execute(f"SELECT count(*) FROM {STAGE}").fetchone()
        done = 0 if got is None else int(got[0])
    total = conn.execute(
        "SELECT coalesce(sum(n_records), 0) FROM collections WHERE kind = 'vector'"
    ).fetchone()
    return done, 0 if total is None else int(total[0])


def reembed(url: str, args: ReembedArgs) -> ReembedStats:
    """Re-embed every vector record of the PostgreSQL store at ``url`` (see
    :func:`sidecar.store.backend.reembed`)."""
    started = time.monotonic()
    where = redact(url)
    dims = args.checked_dims()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            migrate(conn)
            _take_database(conn, where)
            conn.execute(f"SET search_path TO {SCHEMA}, public")
            oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()
            assert oid is not None
            register_vector(conn, int(oid[0]))
            stats = _Job(args, dims, conn).run(started)
    except psycopg.Error as exc:
        raise map_pg_error(exc, "re-embed", where) from exc
    log.info("store.reembedded", **dataclasses.asdict(stats))
    return stats


def _take_database(conn: Conn, where: str) -> None:
    row = conn.execute("SELECT pg_try_advisory_lock(%s, 0)", (LOCK_PRESENCE,)).fetchone()
    if not (row and row[0]):
        who = holders(conn)
        raise DatabaseInUse(
            where,
            f"{len(who) or 'some'} daemon(s) serve it ({', '.join(who) or 'unknown'}); stop "
            "them before `libravdb reembed`",
        )


@dataclasses.dataclass(slots=True)
class _Job(ReembedJob):
    """A re-embed in the PostgreSQL database (its primitives; the steps are ReembedJob's)."""

    conn: Conn

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        return self.conn.transaction()

    def set_meta(self, key: str, value: str) -> None:
        _set_meta(self.conn, key, value)

    def stage_exists(self) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s)", (STAGE,)).fetchone()
        return row is not None and row[0] is not None

    def create_stage(self) -> None:
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {STAGE} "
            "(rid bigint PRIMARY KEY, embedding vector NOT NULL)"
        )

    def discard_stage(self) -> None:
        discard_stage(self.conn)

    def staged_progress(self) -> tuple[int, int]:
        return staged_progress(self.conn)

    def unstaged(self, cid: int, after: int, limit: int) -> list[tuple[int, str]]:
        rows = self.conn.execute(
            f"SELECT r.rid, r.text, r.text_raw FROM records r LEFT JOIN {STAGE} s "
            "ON s.rid = r.rid WHERE r.cid = %s AND r.rid > %s AND s.rid IS NULL "
            "ORDER BY r.rid LIMIT %s",
            (cid, after, limit),
        ).fetchall()
        return [(rid, t if raw is None else bytes(raw).decode()) for rid, t, raw in rows]

    def insert_staged(self, rows: Sequence[tuple[int, F32s]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {STAGE} (rid, embedding) VALUES (%s, %s)",
                [(rid, np.ascontiguousarray(v, dtype=np.float32)) for rid, v in rows],
            )

    def swap(self, colls: list[tuple[int, str]]) -> None:
        """One transaction: staged vectors into the records, the new model into meta."""
        conn = self.conn
        with conn.transaction():
            for (name,) in conn.execute(
                "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                "WHERE x.indrelid = 'records'::regclass AND i.relname ~ '^records_ann_c'"
            ).fetchall():
                conn.execute(f"DROP INDEX IF EXISTS {SCHEMA}.{name}")
            conn.execute(
                f"UPDATE records r SET embedding = s.embedding, seq = nextval('seq') "
                f"FROM {STAGE} s WHERE s.rid = r.rid"
            )
            # the saved views and their graphs hold the old vectors (a start would replay
            # every record, and a graph's neighbours are the old vectors')
            conn.execute(
                f"DELETE FROM {SCHEMA}.saved_parts WHERE kind IN (%s, %s)",
                (saves.VIEW, saves.GRAPH),
            )
            # versions after the records' seqs: a version stays above its records' seqs
            # (CollectionState.max_seq is the version)
            for cid, name in colls:
                conn.execute(
                    "UPDATE collections SET dims = %s, version = nextval('seq') WHERE cid = %s",
                    (N.dims_for_collection(name, self.dims), cid),
                )
            self.switch_model()
