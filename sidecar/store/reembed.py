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
  finishes the re-embed (see ``Store._check_fingerprint``).

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from sidecar.store import names as N
from sidecar.store.errors import InvalidInput, StorageUnavailable
from sidecar.store.lock import DirLock
from sidecar.store.reembed_stage import (
    CREATE_STAGE,
    STAGE_TABLE,
    TARGET_DIMS_KEY,
    TARGET_KEY,
    TARGET_MODEL_KEY,
    discard_stage,
    staged_progress,
)
from sidecar.store.schema import migrate
from sidecar.store.scrub import SECURE_DELETE
from sidecar.store.store import DB_NAME, INDEX_DIR
from sidecar.store.writer import map_sqlite_error

log = structlog.get_logger(__name__)

EmbedFn = Callable[[list[str]], Any]
Progress = Callable[[int, int | None], None]


@dataclass(frozen=True, slots=True)
class ReembedStats:
    records: int
    collections: int
    old_fingerprint: str
    new_fingerprint: str
    embed_dims: int
    resumed: bool
    seconds: float
    blank: int = 0  # records without text: zero vector, nothing embedded


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def reembed(
    data_dir: str | os.PathLike[str],
    embed: EmbedFn,
    fingerprint: str,
    progress: Progress | None = None,
    *,
    embed_dims: int | None = None,
    batch: int = 64,
    model: str = "",
) -> ReembedStats:
    """Re-embed every vector record of the store in ``data_dir`` with ``embed``.

    ``embed(texts) -> array (len(texts), D)``; ``fingerprint``: the current model's;
    ``model``: its name, for messages. ``embed_dims``: D (probed with one call when None).
    Collections sized by the embedder take the new D; Matryoshka tier collections
    (``:64d``/``:256d``) take the re-normalized prefix. ``progress(done, total)`` is called
    after each batch.
    """
    started = time.monotonic()
    root = Path(data_dir).expanduser().absolute()
    if not (root / DB_NAME).exists():
        raise InvalidInput(f"no store in {root}")
    if not fingerprint:
        raise InvalidInput("reembed needs the current model's fingerprint")
    if batch < 1:
        raise InvalidInput("batch must be >= 1")
    if embed_dims is None:
        embed_dims = int(_embed_rows(embed, ["dimension probe"], None).shape[1])
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
            job = _Job(conn, embed, fingerprint, embed_dims, batch, progress, model)
            stats = job.run(started)
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "re-embed") from exc
        finally:
            conn.close()
        _remove_indexes(root / INDEX_DIR)
        log.info("store.reembedded", **dataclasses.asdict(stats))
        return stats
    finally:
        lock.release()


def _embed_rows(embed: EmbedFn, texts: list[str], dims: int | None) -> npt.NDArray[np.float32]:
    vecs = np.asarray(embed(texts), dtype=np.float32)
    want = (len(texts), dims if dims is not None else (vecs.shape[1] if vecs.ndim == 2 else -1))
    if vecs.ndim != 2 or vecs.shape != want:
        raise InvalidInput(f"the embedder returned shape {vecs.shape}, expected {want}")
    return vecs


def new_vectors(
    embed: EmbedFn, texts: list[str], dims: int, new_dims: int
) -> tuple[npt.NDArray[np.float32], int]:
    """New vectors for ``texts`` (embedded, cut to the tier, zero where there is no text)
    and how many texts were blank. Shared with the PostgreSQL re-embed."""
    out = np.zeros((len(texts), dims), dtype=np.float32)
    rows = [i for i, t in enumerate(texts) if t.strip()]
    if rows:
        out[rows] = _embed_rows(embed, [texts[i] for i in rows], dims)
    if new_dims < dims:
        return N.normalize_rows(np.ascontiguousarray(out[:, :new_dims])), len(texts) - len(rows)
    return out, len(texts) - len(rows)


def embed_rows(embed: EmbedFn, texts: list[str], dims: int | None) -> npt.NDArray[np.float32]:
    return _embed_rows(embed, texts, dims)


def _remove_indexes(index_dir: Path) -> None:
    """The saved graphs hold the old vectors; the daemon rebuilds them at start."""
    try:
        if index_dir.exists():
            shutil.rmtree(index_dir)
    except OSError as exc:
        raise StorageUnavailable(f"cannot remove stale indexes in {index_dir}: {exc}") from exc


@contextlib.contextmanager
def _txn(conn: sqlite3.Connection) -> Any:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@dataclass(slots=True)
class _Job:
    conn: sqlite3.Connection
    embed: EmbedFn
    fingerprint: str
    dims: int
    batch: int
    progress: Progress | None
    model: str
    blank: int = 0

    def run(self, started: float) -> ReembedStats:
        conn = self.conn
        meta = _meta(conn)
        old_fp = meta.get("fingerprint", "")
        resumed = self._begin(meta)
        colls = conn.execute(
            "SELECT cid, name FROM collections WHERE kind = 'vector' ORDER BY cid"
        ).fetchall()
        for _cid, name in colls:
            if N.dims_for_collection(name, self.dims) > self.dims:
                raise InvalidInput(
                    f"collection {name} needs {N.dims_for_collection(name, self.dims)} dims; "
                    f"the model has {self.dims}"
                )
        done, total = staged_progress(conn)
        for cid, name in colls:
            done = self._stage_collection(cid, N.dims_for_collection(name, self.dims), done, total)
        self._swap(colls)
        return ReembedStats(
            records=done,
            collections=len(colls),
            old_fingerprint=old_fp,
            new_fingerprint=self.fingerprint,
            embed_dims=self.dims,
            resumed=resumed,
            seconds=round(time.monotonic() - started, 3),
            blank=self.blank,
        )

    def _begin(self, meta: dict[str, str]) -> bool:
        """Start a stage for this model, or resume this model's; True when resuming."""
        same = meta.get(TARGET_KEY) == self.fingerprint and meta.get(TARGET_DIMS_KEY) == str(
            self.dims
        )
        with _txn(self.conn):
            resumed = same and bool(
                self.conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                    (STAGE_TABLE,),
                ).fetchone()
            )
            if not resumed:  # another model's stage (or none): start afresh
                discard_stage(self.conn)
            self.conn.execute(CREATE_STAGE)
            _set_meta(self.conn, TARGET_KEY, self.fingerprint)
            _set_meta(self.conn, TARGET_DIMS_KEY, str(self.dims))
            _set_meta(self.conn, TARGET_MODEL_KEY, self.model)
        return resumed

    def _stage_collection(self, cid: int, new_dims: int, done: int, total: int) -> int:
        after = 0
        while True:
            rows = self.conn.execute(
                f"SELECT r.rid, r.text FROM records r LEFT JOIN {STAGE_TABLE} s "
                "ON s.rid = r.rid WHERE r.cid = ? AND r.rid > ? AND s.rid IS NULL "
                "ORDER BY r.rid LIMIT ?",
                (cid, after, self.batch),
            ).fetchall()
            if not rows:
                return done
            vecs = self._vectors([text for _rid, text in rows], new_dims)
            with _txn(self.conn):
                self.conn.executemany(
                    f"INSERT INTO {STAGE_TABLE} (rid, vector) VALUES (?, ?)",
                    [
                        (rid, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                        for (rid, _t), v in zip(rows, vecs, strict=True)
                    ],
                )
            after = rows[-1][0]
            done += len(rows)
            if self.progress is not None:
                self.progress(done, total)

    def _vectors(self, texts: list[str], new_dims: int) -> npt.NDArray[np.float32]:
        vecs, blank = new_vectors(self.embed, texts, self.dims, new_dims)
        self.blank += blank
        return vecs

    def _swap(self, colls: list[tuple[int, str]]) -> None:
        """One transaction: staged vectors into the records, the new model into meta."""
        conn = self.conn
        with _txn(conn):
            seq = int(_meta(conn).get("seq", "0"))
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
            _set_meta(conn, "fingerprint", self.fingerprint)
            _set_meta(conn, "embed_dims", str(self.dims))
            if self.model:
                _set_meta(conn, "model", self.model)
            discard_stage(conn)
            conn.execute("DELETE FROM dirty_tiers")
