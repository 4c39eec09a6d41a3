"""Doctor checks that read the store: the embedding fingerprint it records against the
configured model's, and its saved HNSW graphs against the rows in SQLite.

SQLite is opened read-only (WAL mode lets it be read beside a running daemon) and the
store's lock is not taken. Graphs are only persisted for collections large enough to have
one (``store.exact_threshold`` records); smaller ones are searched exactly from memory
loaded at start, so for them there is no file to disagree.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sidecar.ops.doctor_result import Check, fail, ok, q, warn
from sidecar.store.files import DB_NAME, INDEX_DIR
from sidecar.store.graph_files import file_crc
from sidecar.store.index import INDEX_FORMAT
from sidecar.store.reembed_stage import TARGET_KEY

INDEX_FILE = re.compile(r"^c(\d+)-d(\d+)\.json$")
BUSY_TIMEOUT_S = 5.0


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(
        f"file:{quote(str(db))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
    )
    try:
        yield conn
    finally:
        conn.close()


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def check_fingerprint(data_dir: Path, configured: str, profile: str, reembed_fix: str) -> Check:
    name = "fingerprint"
    db = data_dir / DB_NAME
    if not db.is_file():
        return ok(
            name, f"no store in {data_dir} yet: the first start records the model's fingerprint"
        )
    try:
        with read_only(db) as conn:
            meta = _meta(conn)
    except sqlite3.Error as exc:
        return fail(name, f"cannot read {db}: {exc}", f"check {q(db)} (libravdbd serve says why)")
    return compare_fingerprint(meta, configured, profile, reembed_fix, stopped="daemon stopped")


def compare_fingerprint(
    meta: dict[str, str],
    configured: str,
    profile: str,
    reembed_fix: str,
    *,
    stopped: str,
    configure: str = "the model the store was written with",
) -> Check:
    """The fingerprint check over a store's ``meta`` rows, for either backend: ``stopped``
    says which daemons the fix needs stopped, ``configure`` names the other way out."""
    name = "fingerprint"
    stored = meta.get("fingerprint", "")
    if not stored:
        return ok(name, "the store records no fingerprint yet (no vectors written)")
    if not configured:
        return warn(name, f"store has {stored[:12]}; cannot compare: the embedder is unavailable")
    model = meta.get("model") or "another model"
    if meta.get(TARGET_KEY) == configured and stored != configured:
        return fail(
            name,
            f"an unfinished re-embed to {profile} ({configured[:12]}): the store still holds "
            f"{model}'s vectors ({stored[:12]})",
            f"{reembed_fix}   (resumes where it stopped; {stopped})",
        )
    if stored != configured:
        return fail(
            name,
            f"the store was written by {model} (fingerprint {stored[:12]}) but the settings "
            f"select {profile} ({configured[:12]}); the daemon refuses to open it",
            f"{reembed_fix}   ({stopped}), or configure {configure}",
        )
    return ok(name, f"store and settings agree: {profile} ({stored[:12]})")


@dataclass(frozen=True, slots=True)
class _Collection:
    cid: int
    name: str
    dims: int
    count: int


def check_indexes(data_dir: Path, exact_threshold: int) -> list[Check]:
    db, index_dir = data_dir / DB_NAME, data_dir / INDEX_DIR
    if not db.is_file():
        return [ok("indexes", "no store yet")]
    try:
        with read_only(db) as conn:
            return _check_indexes(conn, index_dir, exact_threshold)
    except sqlite3.Error as exc:
        return [fail("indexes", f"cannot read {db}: {exc}", f"check {q(db)}")]


def _check_indexes(conn: sqlite3.Connection, index_dir: Path, exact_threshold: int) -> list[Check]:
    seq = int(_meta(conn).get("seq", "0"))
    collections = {
        cid: _Collection(cid, name, dims, 0)
        for cid, name, dims in conn.execute(
            "SELECT cid, name, dims FROM collections WHERE kind = 'vector'"
        )
    }
    for cid, n in conn.execute("SELECT cid, count(*) FROM records GROUP BY cid"):
        if cid in collections:
            c = collections[cid]
            collections[cid] = _Collection(c.cid, c.name, c.dims, n)
    files = sorted(index_dir.glob("c*-d*.json")) if index_dir.is_dir() else []
    checks: list[Check] = []
    agreed: list[str] = []
    for meta_path in files:
        finding = _check_file(conn, meta_path, collections, seq)
        if isinstance(finding, Check):
            checks.append(finding)
        else:
            agreed.append(finding)
    with_graph = {int(m.group(1)) for p in files if (m := INDEX_FILE.match(p.name))}
    big = [
        c for c in collections.values() if c.count >= exact_threshold and c.cid not in with_graph
    ]
    dirty = conn.execute("SELECT count(*) FROM dirty_tiers").fetchone()[0]
    if dirty:
        checks.append(
            warn("indexes", f"{dirty} index tier(s) marked for rebuild (done at the next start)")
        )
    if not checks:
        small = len(collections) - len(with_graph) - len(big)
        parts = [f"{len(agreed)} saved graph(s) agree with SQLite", *agreed]
        if big:
            names = ", ".join(c.name for c in big[:3])
            parts.append(f"{len(big)} large collection(s) without a saved graph yet ({names})")
        parts.append(f"{small} collection(s) under {exact_threshold} records: exact, no file")
        checks.append(ok("indexes", "; ".join(parts)))
    return checks


def _fix(meta_path: Path) -> str:
    graph = meta_path.with_suffix(".hnsw")
    return (
        f"rm {q(meta_path)} {q(graph)}   (then restart the daemon: it rebuilds the graph "
        "from SQLite)"
    )


def _check_file(
    conn: sqlite3.Connection,
    meta_path: Path,
    collections: dict[int, _Collection],
    store_seq: int,
) -> Check | str:
    """A FAIL line, or a short description of a graph that agrees with SQLite. A running
    daemon may replace the graph while it is read, so a failure is judged once more."""
    result = _read_and_judge(conn, meta_path, collections, store_seq)
    if isinstance(result, Check):
        result = _read_and_judge(conn, meta_path, collections, store_seq)
    return result


def _read_and_judge(
    conn: sqlite3.Connection,
    meta_path: Path,
    collections: dict[int, _Collection],
    store_seq: int,
) -> Check | str:
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        return _judge(conn, meta_path, meta, collections, store_seq)
    except (OSError, ValueError) as exc:
        return fail(f"index {meta_path.stem}", f"unreadable: {exc}", _fix(meta_path))


def _judge(
    conn: sqlite3.Connection,
    meta_path: Path,
    meta: dict[str, Any],
    collections: dict[int, _Collection],
    store_seq: int,
) -> Check | str:
    name = f"index {meta_path.stem}"
    fix = _fix(meta_path)
    m = INDEX_FILE.match(meta_path.name)
    cid, ann_dims = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    coll = collections.get(cid)
    if coll is None:
        return fail(name, f"belongs to no vector collection of the store (cid {cid})", fix)
    expect = {"format": INDEX_FORMAT, "cid": cid, "collection": coll.name, "dims": coll.dims}
    expect["ann_dims"] = ann_dims
    for key, want in expect.items():
        if meta.get(key) != want:
            return fail(name, f"{key} is {meta.get(key)!r}, SQLite says {want!r}", fix)
    stored_fp = _meta(conn).get("fingerprint", "")
    if meta.get("fingerprint") != stored_fp:
        return fail(name, f"built for another model ({str(meta.get('fingerprint'))[:12]})", fix)
    seq = meta.get("seq")
    if not isinstance(seq, int) or not 0 <= seq <= store_seq:
        return fail(name, f"covers seq {seq!r}, beyond the store's {store_seq}", fix)
    graph = meta_path.with_suffix(".hnsw")
    size = graph.stat().st_size if graph.exists() else -1
    if size != meta.get("size"):
        return fail(name, f"graph file is {size} bytes, its metadata says {meta.get('size')}", fix)
    if file_crc(graph) != meta.get("crc32"):
        return fail(name, "graph file checksum mismatch (damaged)", fix)
    labels = _graph_labels(graph, ann_dims)
    live = {
        rid
        for (rid,) in conn.execute(
            "SELECT rid FROM records WHERE cid = ? AND vseq <= ?", (cid, seq)
        )
    }
    missing = len(live - labels)
    if missing:
        return fail(
            name,
            f"{coll.name}: the graph lacks {missing} of the {len(live)} records SQLite holds "
            f"up to seq {seq}",
            fix,
        )
    newer = coll.count - len(live)
    return f"{coll.name} tier {ann_dims}: {len(live)} in the graph + {newer} newer rows"


def _graph_labels(graph: Path, ann_dims: int) -> set[int]:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=ann_dims)
    try:
        index.load_index(str(graph))
    except (RuntimeError, MemoryError) as exc:
        raise ValueError(f"graph does not load: {exc}") from exc
    return {int(x) for x in index.get_ids_list()}
