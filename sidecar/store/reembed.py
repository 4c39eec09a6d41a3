"""Re-embed every record of a store with the current embedding model.

This is the store side of ``libravdb reembed``: it is what a fingerprint mismatch tells the
operator to run. It works on SQLite directly (no daemon may hold the directory: it takes the
same lock).

Crash safety comes from staging. The new vectors are written, one transaction per batch,
to a side table (``reembed_stage``) and the records keep their old vectors meanwhile; the
``reembed_target`` meta key names the model being moved to. Only when every record is
staged does one transaction copy the staged vectors into ``records``, switch the
fingerprint and dimensions and drop the stage. So at every instant the store is either
entirely the old model's (plus a stage that a rerun resumes from) or entirely the new
model's: a kill or an error at any point leaves a store that opens.

* Rerun with the same model: resumes after the last staged record.
* A daemon opened with the *old* model discards the stage (its vectors are still intact)
  and serves; a daemon opened with the *new* model is refused with the command that
  finishes the re-embed (see ``opening._check_fingerprint``).

The steps (stage, resume, swap) are ``reembed_job.ReembedJob``'s, shared with the
PostgreSQL re-embed; this module supplies them on a SQLite connection.

Records without text (a host message that carried only a tool call, stored by an earlier
version) have nothing to embed: they keep a zero vector (cosine 0 to everything), as the
daemon gives blank texts at ingest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import structlog

from sidecar.store import names as N
from sidecar.store.errors import InvalidInput, StorageUnavailable
from sidecar.store.files import DB_NAME, INDEX_DIR
from sidecar.store.lock import DirLock
from sidecar.store.reembed_job import F32s, ReembedArgs, ReembedJob, ReembedStats
from sidecar.store.reembed_stage import (
    CREATE_STAGE,
    STAGE_TABLE,
    discard_stage,
    staged_progress,
)
from sidecar.store.schema import migrate
from sidecar.store.scrub import SECURE_DELETE
from sidecar.store.writer import map_sqlite_error

log = structlog.get_logger(__name__)


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def reembed(data_dir: str | os.PathLike[str], args: ReembedArgs) -> ReembedStats:
    """Re-embed every vector record of the store in ``data_dir`` (see
    :func:`sidecar.store.backend.reembed`)."""
    started = time.monotonic()
    root = Path(data_dir).expanduser().absolute()
    if not (root / DB_NAME).exists():
        raise InvalidInput(f"no store in {root}")
    dims = args.checked_dims()
    lock = DirLock(root)
    lock.acquire()
    try:
        try:
            conn = sqlite3.connect(root / DB_NAME, isolation_level=None, timeout=30.0)
            conn.execute(SECURE_DELETE)  # old vectors zeroed as they are replaced
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            migrate(conn)
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "open", str(root / DB_NAME)) from exc
        try:
            stats = _Job(args, dims, conn).run(started)
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "re-embed") from exc
        finally:
            conn.close()
        _remove_indexes(root / INDEX_DIR)
        log.info("store.reembedded", **dataclasses.asdict(stats))
        return stats
    finally:
        lock.release()


def _remove_indexes(index_dir: Path) -> None:
    """The saved graphs hold the old vectors; the daemon rebuilds them at start."""
    try:
        if index_dir.exists():
            shutil.rmtree(index_dir)
    except OSError as exc:
        raise StorageUnavailable(f"cannot remove stale indexes in {index_dir}: {exc}") from exc


@contextlib.contextmanager
def _txn(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@dataclasses.dataclass(slots=True)
class _Job(ReembedJob):
    """A re-embed on the SQLite database (its primitives; the steps are ReembedJob's)."""

    conn: sqlite3.Connection

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return _txn(self.conn)

    def set_meta(self, key: str, value: str) -> None:
        _set_meta(self.conn, key, value)

    def stage_exists(self) -> bool:
        return bool(
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (STAGE_TABLE,)
            ).fetchone()
        )

    def create_stage(self) -> None:
        self.conn.execute(CREATE_STAGE)

    def discard_stage(self) -> None:
        discard_stage(self.conn)

    def staged_progress(self) -> tuple[int, int]:
        return staged_progress(self.conn)

    def unstaged(self, cid: int, after: int, limit: int) -> list[tuple[int, str]]:
        return self.conn.execute(
            f"SELECT r.rid, r.text FROM records r LEFT JOIN {STAGE_TABLE} s "
            "ON s.rid = r.rid WHERE r.cid = ? AND r.rid > ? AND s.rid IS NULL "
            "ORDER BY r.rid LIMIT ?",
            (cid, after, limit),
        ).fetchall()

    def insert_staged(self, rows: Sequence[tuple[int, F32s]]) -> None:
        self.conn.executemany(
            f"INSERT INTO {STAGE_TABLE} (rid, vector) VALUES (?, ?)",
            [(rid, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for rid, v in rows],
        )

    def swap(self, colls: list[tuple[int, str]]) -> None:
        """One transaction: staged vectors into the records, the new model into meta."""
        conn = self.conn
        with _txn(conn):
            seq = int(self.meta().get("seq", "0"))
            for cid, name in colls:
                conn.execute(
                    "UPDATE collections SET dims = ? WHERE cid = ?",
                    (N.dims_for_collection(name, self.dims), cid),
                )
            # Every re-embedded record gets a fresh write sequence, so any index saved with
            # the old vectors is older than the store and is rebuilt.
            rids = [r[0] for r in conn.execute(f"SELECT rid FROM {STAGE_TABLE} ORDER BY rid")]
            conn.executemany(
                "UPDATE records SET vector = (SELECT vector FROM reembed_stage s "
                "WHERE s.rid = records.rid), seq = ?, vseq = ? WHERE rid = ?",
                [(seq + i + 1, seq + i + 1, rid) for i, rid in enumerate(rids)],
            )
            _set_meta(conn, "seq", str(seq + len(rids)))
            self.switch_model()
            conn.execute("DELETE FROM dirty_tiers")
