"""Re-embed every record of a store with the current embedding model.

This is the store side of ``libravdb reembed``: it is what a fingerprint mismatch tells the
operator to run. It works on SQLite directly (no daemon may hold the directory: it takes the
same lock), re-embeds each record's text in batches, one transaction per batch, and records
a cursor so an interrupted run resumes where it stopped. Until it finishes, the store keeps
a ``reembed_target`` marker and the daemon refuses to open it. At the end the fingerprint
and dimension are switched and the saved indexes are deleted (they rebuild at start).
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
import structlog

from sidecar.store import names as N
from sidecar.store.errors import InvalidInput, StorageUnavailable
from sidecar.store.lock import DirLock
from sidecar.store.schema import migrate
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
) -> ReembedStats:
    """Re-embed every vector record of the store in ``data_dir`` with ``embed``.

    ``embed(texts) -> array (len(texts), D)``; ``fingerprint``: the current model's.
    ``embed_dims``: D (probed with one call when None). Collections sized by the embedder
    take the new D; Matryoshka tier collections (``:64d``/``:256d``) take the re-normalized
    prefix. ``progress(done, total)`` is called after each batch.
    """
    started = time.monotonic()
    root = Path(data_dir).expanduser().absolute()
    if not (root / DB_NAME).exists():
        raise InvalidInput(f"no store in {root}")
    if not fingerprint:
        raise InvalidInput("reembed needs the current model's fingerprint")
    if embed_dims is None:
        probe = np.asarray(embed(["dimension probe"]), dtype=np.float32)
        if probe.ndim != 2 or probe.shape[0] != 1:
            raise InvalidInput("the embedder must return a (n, dims) array")
        embed_dims = int(probe.shape[1])
    lock = DirLock(root)
    lock.acquire()
    try:
        try:
            conn = sqlite3.connect(root / DB_NAME, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            migrate(conn)
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "open") from exc
        try:
            return _run(conn, root, embed, fingerprint, embed_dims, batch, progress, started)
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "re-embed") from exc
        finally:
            conn.close()
    finally:
        lock.release()


def _run(
    conn: sqlite3.Connection,
    root: Path,
    embed: EmbedFn,
    fingerprint: str,
    dims: int,
    batch: int,
    progress: Progress | None,
    started: float,
) -> ReembedStats:
    meta = _meta(conn)
    old_fp = meta.get("fingerprint", "")
    resumed = meta.get("reembed_target") == fingerprint and bool(meta.get("reembed_cursor"))
    cur_cid, cur_rid = 0, 0
    if resumed:
        a, _, b = meta["reembed_cursor"].partition(":")
        cur_cid, cur_rid = int(a), int(b)
    conn.execute("BEGIN IMMEDIATE")
    _set_meta(conn, "reembed_target", fingerprint)
    if not resumed:
        _set_meta(conn, "reembed_cursor", "0:0")
    conn.execute("COMMIT")

    colls = conn.execute(
        "SELECT cid, name, dims, kind FROM collections WHERE kind = 'vector' ORDER BY cid"
    ).fetchall()
    total = int(
        conn.execute(
            "SELECT count(*) FROM records r JOIN collections c ON c.cid = r.cid "
            "WHERE c.kind = 'vector'"
        ).fetchone()[0]
    )
    done = int(
        conn.execute(
            "SELECT count(*) FROM records r JOIN collections c ON c.cid = r.cid "
            "WHERE c.kind = 'vector' AND (r.cid < ? OR (r.cid = ? AND r.rid <= ?))",
            (cur_cid, cur_cid, cur_rid),
        ).fetchone()[0]
    )
    seq = int(_meta(conn).get("seq", "0"))
    for cid, name, old_dims, _kind in colls:
        if cid < cur_cid:
            continue
        new_dims = N.dims_for_collection(name, dims)
        if new_dims > dims:
            raise InvalidInput(f"collection {name} needs {new_dims} dims; the model has {dims}")
        if new_dims != old_dims:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE collections SET dims = ? WHERE cid = ?", (new_dims, cid))
            conn.execute("COMMIT")
        after = cur_rid if cid == cur_cid else 0
        while True:
            rows = conn.execute(
                "SELECT rid, text FROM records WHERE cid = ? AND rid > ? ORDER BY rid LIMIT ?",
                (cid, after, batch),
            ).fetchall()
            if not rows:
                break
            vecs = np.asarray(embed([r[1] for r in rows]), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape != (len(rows), dims):
                raise InvalidInput(
                    f"the embedder returned shape {vecs.shape}, expected ({len(rows)}, {dims})"
                )
            if new_dims < dims:
                vecs = N.normalize_rows(np.ascontiguousarray(vecs[:, :new_dims]))
            conn.execute("BEGIN IMMEDIATE")
            try:
                for (rid, _t), vec in zip(rows, vecs, strict=True):
                    seq += 1
                    conn.execute(
                        "UPDATE records SET vector = ?, seq = ?, vseq = ? WHERE rid = ?",
                        (np.ascontiguousarray(vec, dtype=np.float32).tobytes(), seq, seq, rid),
                    )
                _set_meta(conn, "seq", str(seq))
                _set_meta(conn, "reembed_cursor", f"{cid}:{rows[-1][0]}")
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            after = rows[-1][0]
            done += len(rows)
            if progress is not None:
                progress(done, total)
    conn.execute("BEGIN IMMEDIATE")
    _set_meta(conn, "fingerprint", fingerprint)
    _set_meta(conn, "embed_dims", str(dims))
    conn.execute("DELETE FROM meta WHERE key IN ('reembed_target', 'reembed_cursor')")
    conn.execute("DELETE FROM dirty_tiers")
    conn.execute("COMMIT")
    index_dir = root / INDEX_DIR
    try:
        if index_dir.exists():
            shutil.rmtree(index_dir)
    except OSError as exc:
        raise StorageUnavailable(f"cannot remove stale indexes in {index_dir}: {exc}") from exc
    stats = ReembedStats(
        records=done,
        collections=len(colls),
        old_fingerprint=old_fp,
        new_fingerprint=fingerprint,
        embed_dims=dims,
        resumed=resumed,
        seconds=round(time.monotonic() - started, 3),
    )
    log.info("store.reembedded", **dataclasses.asdict(stats))
    return stats
