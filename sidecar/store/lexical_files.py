"""Files of saved BM25 terms beside the store (``<data dir>/lexical/``): where they are,
how one is written (atomically) and read (checked), and :func:`scrub`, which removes
those a forget made stale. What they hold is the assembly's business
(``sidecar/assembly/view_terms.py``, whose module doc describes the format).

A file is ``MAGIC``, the header's length (4 bytes, little-endian), a JSON header and a
body whose SHA-256 the header holds. The header names the collection and the
``cid`` and ``removals`` of its :class:`~sidecar.store.types.CollectionState` when it was
saved: once the collection's ``removals`` move (a forget, a delete), the file may hold
the terms of records that are gone, and :func:`scrub` removes it (``AsyncStore.
scrub_after_forget`` runs it before a forget answers).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sidecar.store.types import CollectionState

MAGIC = b"LIBRAVDB-TERMS\n"
SUFFIX = ".terms"
_LEN = struct.Struct("<I")
_lock = threading.Lock()  # one writer or scrubber at a time in this process


def directory(data_dir: Path) -> Path:
    return data_dir / "lexical"


def path_of(data_dir: Path, collection: str) -> Path:
    name = hashlib.sha256(collection.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return directory(data_dir) / (name + SUFFIX)


def local_dir(store: object) -> Path | None:
    """The data directory of a store that keeps its files locally (SQLite), else None."""
    d = getattr(store, "data_dir", None)
    return d if isinstance(d, Path) else None


def write(data_dir: Path, collection: str, header: Mapping[str, Any], body: bytes) -> None:
    """Write ``collection``'s file atomically: a temporary file in the same directory,
    fsync'ed, renamed over the old one, the directory fsync'ed. A kill at any point
    leaves the old file, the new one or none (and at worst a temporary file, which
    :func:`scrub` removes)."""
    meta = {**header, "collection": collection, "sha256": hashlib.sha256(body).hexdigest()}
    head = json.dumps(meta, sort_keys=True).encode()
    folder = directory(data_dir)
    with _lock:
        folder.mkdir(mode=0o700, exist_ok=True)
        final = path_of(data_dir, collection)
        tmp = final.with_name(f"{final.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for part in (MAGIC, _LEN.pack(len(head)), head, body):
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        _fsync_dir(folder)


def read(data_dir: Path, collection: str) -> tuple[dict[str, Any], bytes] | None:
    """``(header, body)`` of ``collection``'s file when it is whole and names it (the
    checksum matches); None otherwise (no file, or a damaged one, which is removed)."""
    path = path_of(data_dir, collection)
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    got = _parse_header(raw)
    if got is not None:
        meta, at = got
        body = raw[at:]
        if meta.get("collection") == collection and meta.get("sha256") == (
            hashlib.sha256(body).hexdigest()
        ):
            return meta, body
    remove(data_dir, collection)
    return None


def remove(data_dir: Path, collection: str) -> None:
    with _lock:
        _unlink(path_of(data_dir, collection))


def holds(meta: Mapping[str, Any], state: CollectionState) -> bool:
    """Whether a file saved with header ``meta`` still holds for ``state``: the same
    collection (``cid``) and no record removed since (``removals``)."""
    return bool(state.cid) and (meta.get("cid"), meta.get("removals")) == (
        state.cid,
        state.removals,
    )


def scrub(data_dir: Path, states: Mapping[str, CollectionState]) -> int:
    """Remove the files that no longer hold (:func:`holds`; ``states``: the current state
    of the collections of :func:`saved`, missing = gone), unreadable ones and leftover
    temporary files; returns how many were removed."""
    removed = 0
    with _lock:
        for path, meta in _files(data_dir):
            name = meta.get("collection")
            if not isinstance(name, str) or not holds(meta, states.get(name, CollectionState())):
                _unlink(path)
                removed += 1
        for tmp in directory(data_dir).glob("*.tmp"):
            _unlink(tmp)
            removed += 1
    return removed


def saved(data_dir: Path) -> list[str]:
    """The collections that have a file."""
    return [c for _, m in _files(data_dir) if isinstance(c := m.get("collection"), str)]


def scrub_store(store: Any) -> int:
    """:func:`scrub` for ``store``'s directory with its collections' current states (a
    store without a local directory keeps no files: 0)."""
    data_dir = local_dir(store)
    if data_dir is None or not directory(data_dir).is_dir():
        return 0
    names = saved(data_dir)
    states: dict[str, CollectionState] = store.collection_states(names) if names else {}
    return scrub(data_dir, states)


def _parse_header(raw: bytes) -> tuple[dict[str, Any], int] | None:
    start = len(MAGIC) + _LEN.size
    if not raw.startswith(MAGIC) or len(raw) < start:
        return None
    (n,) = _LEN.unpack_from(raw, len(MAGIC))
    try:
        meta = json.loads(raw[start : start + n])
    except ValueError:
        return None
    return (meta, start + n) if isinstance(meta, dict) else None


def _files(data_dir: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every file and its header (empty when unreadable)."""
    for path in sorted(directory(data_dir).glob("*" + SUFFIX)):
        try:
            with path.open("rb") as f:
                head = f.read(len(MAGIC) + _LEN.size)
                n = _LEN.unpack_from(head, len(MAGIC))[0] if head.startswith(MAGIC) else 0
                got = _parse_header(head + f.read(n))
        except (OSError, struct.error):
            got = None
        yield path, got[0] if got else {}


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
