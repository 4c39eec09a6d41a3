"""Copies of a forgotten memory left in a SQLite data directory's files: its text, and
its vector as SQLite stores it (raw float32) and as an HNSW graph stores it (the unit
vector, or the re-normalized prefix of a tier graph).

Used by the forget checks of `make stress` (``forget_disk.py``) and by the store's tests:
they read the raw bytes of ``store.sqlite3``, ``store.sqlite3-wal`` and every file under
``index/``, with nothing but ``bytes.find``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from sidecar.store.names import normalize_rows

DB_FILES = ("store.sqlite3", "store.sqlite3-wal")
#: Bytes of a vector looked for: 8 floats, at the start and in the middle. Either is as
#: unlikely as a hash collision in unrelated data, and a half-scrubbed vector is caught.
WINDOW = 32


def vector_needles(raw: bytes, ann_dims: Iterable[int] = ()) -> dict[str, bytes]:
    """Byte windows of one stored vector (little-endian float32 ``raw``) in every form a
    file can hold it: as stored, as a unit vector, and as each tier's unit prefix."""
    vec = np.frombuffer(raw, dtype="<f4")
    # normalized exactly as the store does before a graph gets them (bit for bit)
    unit = normalize_rows(vec[None, :])
    forms = {"vector": vec, "unit vector": unit[0]}
    for dims in ann_dims:
        if 0 < dims < len(vec):
            head = np.ascontiguousarray(unit[:, :dims])
            forms[f"unit {dims}-d prefix"] = normalize_rows(head)[0]
    out: dict[str, bytes] = {}
    for name, form in forms.items():
        data = form.tobytes()
        mid = (len(data) // 2) // 4 * 4
        out[f"{name} (start)"] = data[:WINDOW]
        out[f"{name} (middle)"] = data[mid : mid + WINDOW]
    return out


def text_needles(*texts: str) -> dict[str, bytes]:
    return {f"text {t!r}": t.encode() for t in texts}


def scanned_files(data_dir: Path, *, indexes: bool = True) -> list[Path]:
    files = [data_dir / name for name in DB_FILES]
    if indexes and (data_dir / "index").is_dir():
        files += sorted(p for p in (data_dir / "index").rglob("*") if p.is_file())
    return [p for p in files if p.is_file()]


def traces(data_dir: Path, needles: Mapping[str, bytes], *, indexes: bool = True) -> list[str]:
    """``"<file>: <needle>"`` for every needle found in a file of ``data_dir``."""
    found = []
    for path in scanned_files(data_dir, indexes=indexes):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            # an index save renamed its temporary file away between the listing and this
            # read: what it held is in the file it became, read under that name
            continue
        found += [f"{path.name}: {name}" for name, b in needles.items() if b and b in data]
    return found


def stored_vector(data_dir: Path, collection: str, record_id: str) -> bytes | None:
    """The vector blob of one record, read from the database file directly (a read
    connection of its own, closed at once: a reader left open would hold a snapshot and
    keep the log from being checkpointed)."""
    uri = f"file:{data_dir / 'store.sqlite3'}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=30.0)
    try:
        row = conn.execute(
            "SELECT r.vector FROM records r JOIN collections c ON c.cid = r.cid "
            "WHERE c.name = ? AND r.id = ?",
            (collection, record_id),
        ).fetchone()
    finally:
        conn.close()
    return None if row is None or row[0] is None else bytes(row[0])
