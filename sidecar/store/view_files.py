"""Files of saved views beside the store (``<data dir>/views/``; the views' graphs beside
them, ``kind`` :data:`~sidecar.store.lexical_files.GRAPHS`): how one is written
(atomically, streamed) and read (checked, streamed into the caller's buffers). What they
hold is the assembly's business (``sidecar/assembly/view_snapshot.py``, whose module doc
describes the sections); where they live, the lock and :func:`lexical_files.scrub` (which
removes those a forget made stale) are shared with the saved BM25 terms.

A file is ``MAGIC``, the header's length (4 bytes, little-endian), a JSON header (which
names the collection, the ``cid`` and ``removals`` of its state when saved, and the byte
size of each body section), the body's sections one after the other, and the CRC-32 of
everything before it (4 bytes, little-endian). A view is hundreds of megabytes: it is
written a chunk at a time straight from the caller's arrays and read a section at a time
into the reader's own buffers, never held twice in memory.
"""

from __future__ import annotations

import io
import json
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol

from sidecar.store import lexical_files as LF

KIND = LF.VIEWS
_CHUNK = 1 << 20  # bytes hashed and written (or read and hashed) at a time


class _Crc:
    """CRC-32 of everything written or read (zlib's: twice as fast as SHA-256 here, and
    what is checked is damage, not tampering: the files are the daemon's own, 0600)."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes | memoryview) -> None:
        self.value = zlib.crc32(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "little")


def path_of(data_dir: Path, collection: str, kind: LF.FileKind = KIND) -> Path:
    return LF.path_of(data_dir, collection, kind)


class Section(NamedTuple):
    """A body section to write: its size in bytes and its bytes, in pieces."""

    size: int
    pieces: Iterable[bytes | memoryview]


def of_buffer(buf: memoryview) -> Section:
    """A section of ``buf``'s bytes, a chunk at a time (not copied)."""
    return Section(buf.nbytes, _chunks(buf))


def _chunks(buf: memoryview) -> Iterator[memoryview]:
    """``buf``'s bytes as consecutive views of :data:`_CHUNK` bytes (the last shorter)."""
    flat = buf.cast("B") if buf.ndim != 1 or buf.format != "B" else buf
    return (flat[a : a + _CHUNK] for a in range(0, flat.nbytes, _CHUNK))


def _read_all(
    f: LF.Source,
    parts: Iterable[memoryview],
    digest: _Crc | None,
    spill: BinaryIO | None = None,
) -> bool:
    """Fill each of ``parts`` from ``f`` in turn (hashed into ``digest``, then written to
    ``spill``); False at the file's end."""
    for part in parts:
        if f.readinto(part) != part.nbytes:
            return False
        if digest is not None:
            digest.update(part)
        if spill is not None:
            spill.write(part)
    return True


def encode(
    collection: str,
    header: Mapping[str, Any],
    sections: Sequence[Section],
    kind: LF.FileKind = KIND,
) -> tuple[int, Iterator[memoryview]]:
    """The bytes of ``collection``'s file (module doc): its size and its pieces in order,
    each checksummed as it is handed out, then the checksum. A buffer that changes after
    its piece was handed out gives bytes whose checksum fails (dropped at read), never
    wrong bytes that check; a section whose pieces do not add up to its size raises
    ValueError (before the checksum: nothing that reads as whole)."""
    meta = {**header, "collection": collection, "sections": [s.size for s in sections]}
    head = json.dumps(meta, sort_keys=True).encode()
    lead = (kind.magic, LF.LEN.pack(len(head)), head)
    size = sum(len(b) for b in lead) + sum(s.size for s in sections) + 4

    def pieces() -> Iterator[memoryview]:
        digest = _Crc()
        for part in lead:
            digest.update(part)
            yield memoryview(part)
        for section in sections:
            wrote = 0
            for piece in section.pieces:
                view = memoryview(piece)
                digest.update(view)
                yield view
                wrote += view.nbytes
            if wrote != section.size:
                raise ValueError(f"a section of {wrote} bytes, {section.size} announced")
        yield memoryview(digest.digest())

    return size, pieces()


def write(
    data_dir: Path,
    collection: str,
    header: Mapping[str, Any],
    sections: Sequence[Section],
    holds: Callable[[], bool] | None = None,
    kind: LF.FileKind = KIND,
) -> bool:
    """Write ``collection``'s file atomically (as ``lexical_files.write``: a temporary
    file fsync'ed, renamed, the directory fsync'ed). Each piece is checksummed, then
    written: a buffer that changes in between gives a file whose checksum fails (dropped
    at read), never a wrong file that checks; a section whose pieces do not add up to its
    size is an error (nothing replaces the old file). ``holds``: asked under the files'
    lock right before the rename (as the scrub after a forget checks under it): False,
    and the new file is removed instead (records were removed while it was written: it
    must not put their texts back on disk); returns whether the file was written."""
    _, pieces = encode(collection, header, sections, kind)
    folder = LF.directory(data_dir, kind)
    with LF.lock:
        folder.mkdir(mode=0o700, exist_ok=True)
        final = path_of(data_dir, collection, kind)
        for left in folder.glob(f"{final.name}.*.tmp"):  # a writer killed (one per store)
            LF.unlink(left)
        tmp = final.with_name(f"{final.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for piece in pieces:
                LF.write_all(fd, piece)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            LF.unlink(tmp)
            raise
        os.close(fd)
        if holds is not None and not holds():
            LF.unlink(tmp)
            return False
        os.replace(tmp, final)
        LF.fsync_dir(folder)
    return True


class Mappable(Protocol):
    """A section's destination that takes the file's pages instead of a copy of its bytes
    (``mapped_rows.MappedRows``): the bytes are checked as they stream past, and mapped
    once the whole file has checked."""

    def buffer(self, at: int) -> memoryview:
        """The bytes the section fills, given its offset in the file (read into them when
        it cannot be mapped)."""
        ...

    def overlay(self, fd: int, at: int, size: int) -> bool:
        """Map the section's bytes from the file; False: read them instead."""
        ...


class Spill(NamedTuple):
    """A section's destination written as its bytes stream past, a chunk at a time (a
    saved graph's body, which its library reads from a file); whether all of it checked
    is :func:`read_checked`'s answer."""

    file: BinaryIO


#: Given a section's index and size, the writable buffer to read it into, a
#: :class:`Mappable` or a :class:`Spill` (None: the sizes do not fit what the reader
#: expects, the file is not used).
Target = Callable[[int, int], "memoryview | Mappable | Spill | None"]


def read(
    data_dir: Path,
    collection: str,
    check: Callable[[dict[str, Any]], bool],
    target: Target,
    kind: LF.FileKind = KIND,
) -> dict[str, Any] | None:
    """Read ``collection``'s file: its header, when it names the collection and
    ``check(header)`` holds, then each section into ``target(i, size)``; the header when
    the whole file checks (the checksum matches, nothing left over), else None. A damaged
    file or one that does not check is removed; a missing one is None."""
    path = path_of(data_dir, collection, kind)
    try:
        f = path.open("rb")
    except OSError:
        return None
    ok = False
    try:
        with f:
            size = os.fstat(f.fileno()).st_size
            meta = read_checked(f, size, collection, check, target, kind.magic)
            ok = meta is not None
    except (OSError, ValueError):
        meta = None
    if not ok:
        remove(data_dir, collection, kind)
    return meta


def remove(data_dir: Path, collection: str, kind: LF.FileKind = KIND) -> None:
    with LF.lock:
        LF.unlink(path_of(data_dir, collection, kind))


def read_checked(
    f: LF.Source,
    size: int,
    collection: str,
    check: Callable[[dict[str, Any]], bool],
    target: Target,
    magic: bytes,
) -> dict[str, Any] | None:
    """Read a file's ``size`` bytes from ``f`` (module doc; :func:`read`'s rules): its
    header, when it names ``collection`` and ``check(header)`` holds, then each section
    into ``target(i, size)``; the header when everything checks, else None (ValueError:
    a header that is not JSON). A :class:`Mappable` target maps its section from ``f``
    once everything checked when ``f`` is the file itself; otherwise it is read into. A
    :class:`Spill` is written as it is read (the caller drops what it wrote unless the
    header comes back)."""
    file = f if isinstance(f, io.BufferedReader) else None  # what can be mapped from
    digest = _Crc()
    lead = f.read(len(magic) + LF.LEN.size)
    if not lead.startswith(magic) or len(lead) != len(magic) + LF.LEN.size:
        return None
    (n,) = LF.LEN.unpack_from(lead, len(magic))
    head = f.read(n)
    meta = json.loads(head)
    sizes = meta.get("sections") if isinstance(meta, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(x, int) and x >= 0 for x in sizes):
        return None
    left = size - len(lead) - len(head) - 4
    if sum(sizes) != left or meta.get("collection") != collection or not check(meta):
        return None
    digest.update(lead)
    digest.update(head)
    at = len(lead) + len(head)
    maps: list[tuple[Mappable, memoryview, int]] = []
    scratch = memoryview(bytearray(_CHUNK)) if file is not None else None
    for i, wanted in enumerate(sizes):
        got = target(i, wanted)  # the sizes were checked above
        if got is None:
            return None
        if isinstance(got, Spill):
            chunk = scratch if scratch is not None else memoryview(bytearray(_CHUNK))
            spilt = (chunk[: min(_CHUNK, wanted - a)] for a in range(0, wanted, _CHUNK))
            if not _read_all(f, spilt, digest, got.file):
                return None
            at += wanted
            continue
        if isinstance(got, memoryview):
            into, parts = got, _chunks(got)
        elif scratch is None:  # nothing to map from: read into its buffer
            into = got.buffer(at)
            parts = _chunks(into)
        else:  # checked as it streams past a scratch buffer, mapped once the file checks
            into = got.buffer(at)
            parts = (scratch[: min(_CHUNK, wanted - a)] for a in range(0, wanted, _CHUNK))
            maps.append((got, into, at))
        if into.nbytes != wanted or not _read_all(f, parts, digest):
            return None
        at += wanted
    if f.read(5) != digest.digest():
        return None
    for mappable, into, at in maps:  # the file checked: its pages, else its bytes again
        assert file is not None  # maps only with a file
        if not mappable.overlay(file.fileno(), at, into.nbytes):
            file.seek(at)
            if not _read_all(file, _chunks(into), None):
                return None
    checked: dict[str, Any] = meta
    return checked
