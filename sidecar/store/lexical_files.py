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
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from sidecar.store.types import CollectionState


class FileKind(NamedTuple):
    """A kind of file saved beside the store: its directory, suffix and first bytes; with
    a ``body`` suffix, the file is a header and its body the file of that suffix beside
    it (removed with it)."""

    folder: str
    suffix: str
    magic: bytes
    body: str = ""


TERMS = FileKind("lexical", ".terms", b"LIBRAVDB-TERMS\n")
VIEWS = FileKind("views", ".view", b"LIBRAVDB-VIEW\n")
# sidecar/assembly/graph_file.py: the header, and usearch's own file beside it
GRAPHS = FileKind("views", ".graph", b"LIBRAVDB-GRAPH\n", ".usearch")
KINDS = (TERMS, VIEWS, GRAPHS)
MAGIC, SUFFIX = TERMS.magic, TERMS.suffix
LEN = struct.Struct("<I")
lock = threading.Lock()  # one writer or scrubber at a time in this process
#: A part of a body to write: bytes, or a view of an array's memory (written as it is).
Piece = bytes | bytearray | memoryview


def companion(path: Path, kind: FileKind | None = None) -> Path:
    """The body file beside the header file ``path`` (``GRAPHS``' by default)."""
    return path.with_suffix((kind or GRAPHS).body)


def directory(data_dir: Path, kind: FileKind = TERMS) -> Path:
    return data_dir / kind.folder


def path_of(data_dir: Path, collection: str, kind: FileKind = TERMS) -> Path:
    name = hashlib.sha256(collection.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return directory(data_dir, kind) / (name + kind.suffix)


def local_dir(store: object) -> Path | None:
    """The data directory of a store that keeps its files locally (SQLite), else None."""
    d = getattr(store, "data_dir", None)
    return d if isinstance(d, Path) else None


def write(
    data_dir: Path,
    collection: str,
    header: Mapping[str, Any],
    body: Sequence[Piece],
    holds: Callable[[], bool] | None = None,
) -> bool:
    """Write ``collection``'s file, its body the concatenation of the ``body`` pieces
    (written one after another: never joined into one copy), atomically: a temporary
    file in the same directory, fsync'ed, renamed over the old one, the directory
    fsync'ed. A kill at any point
    leaves the old file, the new one or none (and at worst a temporary file, which
    :func:`scrub` removes). ``holds``: asked under the files' lock right before the rename
    (as the scrub after a forget checks under it): False, and the new file is removed
    instead (a record was removed since the terms were taken: its words must not go back
    on disk); returns whether the file was written."""
    head = sealed_header(header, collection, body)
    folder = directory(data_dir)
    with lock:
        folder.mkdir(mode=0o700, exist_ok=True)
        final = path_of(data_dir, collection)
        tmp = final.with_name(f"{final.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for part in (MAGIC, LEN.pack(len(head)), head, *body):
                write_all(fd, as_bytes(part))
            os.fsync(fd)
        finally:
            os.close(fd)
        if holds is not None and not holds():
            unlink(tmp)
            return False
        os.replace(tmp, final)
        fsync_dir(folder)
    return True


class Source(Protocol):
    """Where a saved blob's bytes are read from: its file, or its copy elsewhere (a
    PostgreSQL store's ``saved_parts``, read a part at a time)."""

    def read(self, n: int) -> bytes: ...

    def readinto(self, buf: memoryview) -> int: ...


def read(data_dir: Path, collection: str) -> tuple[dict[str, Any], bytearray] | None:
    """``(header, body)`` of ``collection``'s file when it is whole and names it (the
    checksum matches); None otherwise (no file, or a damaged one, which is removed)."""
    path = path_of(data_dir, collection)
    try:
        with path.open("rb") as f:
            got = read_blob(f, os.fstat(f.fileno()).st_size, collection)
    except (OSError, struct.error):
        return None
    if got is not None:
        return got
    remove(data_dir, collection)
    return None


def read_blob(src: Source, size: int, collection: str) -> tuple[dict[str, Any], bytearray] | None:
    """``(header, body)`` of the ``size`` bytes of a saved-terms blob read from ``src``
    when they are whole and ``collection``'s (the checksum matches), else None;
    ``struct.error`` when they end inside the header's length. The body is read straight
    into its own buffer: a 1M view's blob is about 370 MB, which reading it whole and
    then slicing the body out of it held twice."""
    head = src.read(len(MAGIC) + LEN.size)
    n = LEN.unpack_from(head, len(MAGIC))[0] if head.startswith(MAGIC) else 0
    head += src.read(n)
    got = _parse_header(head)
    if got is None:
        return None
    body = bytearray(max(size - len(head), 0))
    if src.readinto(memoryview(body)) != len(body) or src.read(1):
        return None
    return (got[0], body) if is_sealed(got[0], collection, body) else None


def remove(data_dir: Path, collection: str) -> None:
    with lock:
        unlink(path_of(data_dir, collection))


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
    with lock:
        for kind in KINDS:
            for path, meta in _files(data_dir, kind):
                name = meta.get("collection")
                if not isinstance(name, str) or not holds(
                    meta, states.get(name, CollectionState())
                ):
                    unlink(path)
                    removed += 1
                    if kind.body:
                        unlink(companion(path, kind))
            if kind.body:  # a body whose header is gone (a save cut short, a kill)
                for body in directory(data_dir, kind).glob("*" + kind.body):
                    if not body.with_suffix(kind.suffix).exists():
                        unlink(body)
                        removed += 1
            for tmp in directory(data_dir, kind).glob("*.tmp"):
                unlink(tmp)
                removed += 1
    return removed


def saved(data_dir: Path, kind: FileKind | None = TERMS) -> list[str]:
    """The collections that have a file of ``kind`` (None: of any kind)."""
    kinds = KINDS if kind is None else (kind,)
    return list(
        dict.fromkeys(
            c
            for k in kinds
            for _, m in _files(data_dir, k)
            if isinstance(c := m.get("collection"), str)
        )
    )


def scrub_store(store: Any) -> int:
    """:func:`scrub` for ``store``'s directory with its collections' current states (a
    store without a local directory keeps no files: 0)."""
    data_dir = local_dir(store)
    if data_dir is None or not any(directory(data_dir, k).is_dir() for k in KINDS):
        return 0
    names = saved(data_dir, None)
    states: dict[str, CollectionState] = store.collection_states(names) if names else {}
    return scrub(data_dir, states)


def _parse_header(raw: bytes, magic: bytes = MAGIC) -> tuple[dict[str, Any], int] | None:
    start = len(magic) + LEN.size
    if not raw.startswith(magic) or len(raw) < start:
        return None
    (n,) = LEN.unpack_from(raw, len(magic))
    try:
        meta = json.loads(raw[start : start + n])
    except ValueError:
        return None
    return (meta, start + n) if isinstance(meta, dict) else None


def _files(data_dir: Path, kind: FileKind) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every file of ``kind`` and its header (empty when unreadable)."""
    magic = kind.magic
    for path in sorted(directory(data_dir, kind).glob("*" + kind.suffix)):
        try:
            with path.open("rb") as f:
                head = f.read(len(magic) + LEN.size)
                n = LEN.unpack_from(head, len(magic))[0] if head.startswith(magic) else 0
                got = _parse_header(head + f.read(n), magic)
        except (OSError, struct.error):
            got = None
        yield path, got[0] if got else {}


def as_bytes(piece: Piece) -> memoryview:
    """``piece`` (bytes, or a view of a numpy array) as a flat view of its bytes."""
    return memoryview(piece).cast("B")


def sealed_header(header: Mapping[str, Any], collection: str, body: Sequence[Piece]) -> bytes:
    """The JSON header a saved-terms blob is written with: ``header``, the collection it
    belongs to and the SHA-256 of its body (the concatenation of ``body``, not made)."""
    digest = hashlib.sha256()
    for piece in body:
        digest.update(as_bytes(piece))
    meta = {**header, "collection": collection, "sha256": digest.hexdigest()}
    return json.dumps(meta, sort_keys=True).encode()


def is_sealed(meta: Mapping[str, Any], collection: str, body: bytes | bytearray) -> bool:
    """Whether a blob read with header ``meta`` is ``collection``'s and whole (its body
    has the SHA-256 :func:`sealed_header` wrote)."""
    return (
        meta.get("collection") == collection
        and meta.get("sha256") == hashlib.sha256(body).hexdigest()
    )


def write_all(fd: int, view: memoryview) -> None:
    """Write all of ``view`` to ``fd`` (``os.write`` may take part of it)."""
    while view:
        view = view[os.write(fd, view) :]


def unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
