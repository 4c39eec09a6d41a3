"""Derived data a view saves in the database (``saved_terms.py``, ``saved_views.py``,
``saved_graphs.py``):
blobs of the ``saved_parts`` table (schema ``_v6``), one per collection and kind, each
the bytes of the file a SQLite store keeps for it, cut into parts of
:data:`PART_BYTES`. A blob is never one value (PostgreSQL's limit is 1 GB; a 1M view's
matrix alone is 768 MB), and a read holds one part at a time beside the reader's own
buffers (one value read whole is held twice: libpq's copy and Python's).

What is saved is a function of the collection at a state and must never outlive a
removal from it; the database enforces that:

* any transaction that removes a record of the collection deletes its blobs, after it
  has taken the collection row's lock (``finish_collection``);
* a save claims that row in share mode first (:func:`claim`) and writes only while the
  collection's ``removals`` is the one the blob was taken at;
* a dropped collection takes its blobs with it (``ON DELETE CASCADE``).

The parts are stored uncompressed (``STORAGE EXTERNAL``: vectors and term ids hardly
compress, and every start would pay the decompression).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, TypeVar

import psycopg

from sidecar.store.pg.conn import LOCK_SAVED_GRAPHS, LOCK_SAVED_TERMS, LOCK_SAVED_VIEWS, Db

#: What a blob holds (``saved_parts.kind``), its name in errors, the advisory lock its
#: saves take, and the lock that has this process save one of the kind at a time.
TERMS, VIEW, GRAPH = 1, 2, 3
_NAMES = {TERMS: "terms", VIEW: "view", GRAPH: "graph"}
_LOCKS = {TERMS: LOCK_SAVED_TERMS, VIEW: LOCK_SAVED_VIEWS, GRAPH: LOCK_SAVED_GRAPHS}
_ONE_SAVE = {kind: threading.Lock() for kind in _NAMES}
#: The bytes of a blob in one row.
PART_BYTES = 8 << 20

T = TypeVar("T")
_COPY = "COPY saved_parts (cid, kind, part, body) FROM STDIN (FORMAT BINARY)"
#: Binary COPY: the signature with no flags and no extension, then rows; a row is its
#: field count, then each value as its length and its bytes (integers big-endian).
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
# fields; the cid's length and value, the kind's, the part's; the body's length
_ROW = struct.Struct(">hiqihiii")
_READ = (
    "SELECT p.part, p.body, sum(length(p.body)) OVER () FROM saved_parts p "
    "JOIN collections c USING (cid) WHERE c.name = %s AND p.kind = %s ORDER BY p.part"
)
_EXISTS = (
    "SELECT EXISTS (SELECT 1 FROM saved_parts p JOIN collections c USING (cid) "
    "WHERE c.name = %s AND p.kind = %s AND p.part = 0)"
)


def claim(
    conn: psycopg.Connection[Any], collection: str, header: Mapping[str, Any], lock: int
) -> int | None:
    """The collection's ``cid`` when it is still the one ``header`` was taken at, with no
    removal since (else None: nothing may be saved), the collection row held in share
    mode and the save's advisory lock taken for it.

    Share mode waits for a removal's transaction holding the row (which then shows its new
    count) and holds back one that comes after until the save commits: the removal then
    deletes what was saved. The advisory lock puts two daemons' saves of one collection
    one after the other; the last one's stays."""
    row = conn.execute(
        "SELECT cid, removals FROM collections WHERE name = %s FOR SHARE", (collection,)
    ).fetchone()
    if row is None or (row[0], row[1]) != (header.get("cid"), header.get("removals")):
        return None
    cid = int(row[0])
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (lock, cid))
    return cid


def _write_parts(
    conn: psycopg.Connection[Any],
    cid: int,
    kind: int,
    size: int,
    pieces: Iterator[memoryview],
    part_bytes: int = PART_BYTES,
) -> None:
    """Replace the ``kind`` blob of ``cid`` (claimed) with ``size`` bytes given as
    ``pieces``, streamed in one binary COPY (never joined into one copy); ValueError when
    the pieces do not add up to ``size`` (the transaction must not commit)."""
    conn.execute("DELETE FROM saved_parts WHERE cid = %s AND kind = %s", (cid, kind))
    with conn.cursor() as cur, cur.copy(_COPY) as copy:
        copy.write(_SIGNATURE)
        part, left = 0, 0
        for piece in pieces:
            rest = piece if piece.ndim == 1 and piece.format == "B" else piece.cast("B")
            while rest.nbytes:
                if left == 0:
                    left = min(part_bytes, size - part * part_bytes)
                    if left <= 0:
                        raise ValueError(f"more than the {size} bytes announced")
                    copy.write(_ROW.pack(4, 8, cid, 2, kind, 4, part, left))
                    part += 1
                take = min(left, rest.nbytes)
                copy.write(rest[:take])  # a view: the piece cut where a part ends
                rest, left = rest[take:], left - take
        if left or part * part_bytes < size:
            raise ValueError(f"fewer than the {size} bytes announced")
        copy.write(_TRAILER)


class Parts:
    """The bytes of a blob's parts, in order: each part let go once read; a part missing
    or out of order is ValueError. ``size``: the blob's whole size."""

    def __init__(self, first: tuple[Any, ...], rest: Iterator[tuple[Any, ...]]) -> None:
        self.size = int(first[2])
        self._rows = rest
        self._next = 0
        self._part = memoryview(b"")
        self._at = 0
        self._take(first)

    def _take(self, row: tuple[Any, ...]) -> None:
        if int(row[0]) != self._next:
            raise ValueError(f"part {row[0]} where {self._next} was due")
        self._next += 1
        self._part, self._at = memoryview(row[1]), 0

    def readinto(self, buf: memoryview) -> int:
        into = buf if buf.ndim == 1 and buf.format == "B" else buf.cast("B")
        done = 0
        while done < into.nbytes:
            if self._at >= self._part.nbytes:
                row = next(self._rows, None)
                if row is None:
                    break
                self._take(row)
                continue
            k = min(into.nbytes - done, self._part.nbytes - self._at)
            into[done : done + k] = self._part[self._at : self._at + k]
            done += k
            self._at += k
        return done

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (a length read from damaged bytes allocates no more than the
        blob holds)."""
        out = bytearray(max(0, min(n, self.size)))
        return bytes(out[: self.readinto(memoryview(out))])


def _read_parts(
    conn: psycopg.Connection[Any], collection: str, kind: int, use: Callable[[Parts], T]
) -> tuple[bool, T | None]:
    """``use(parts)`` on the ``kind`` blob of ``collection``, streamed from the server a
    row at a time: ``(False, None)`` when there is none, ``(True, None)`` when ``use``
    raised ValueError (parts missing or out of order, bytes that do not parse)."""
    rows = conn.cursor(binary=True).stream(_READ, (collection, kind))
    try:
        first = next(rows, None)
        if first is None:
            return False, None
        try:
            return True, use(Parts(first, rows))
        except ValueError:
            return True, None
    finally:
        if isinstance(rows, Generator):  # the rest of one that did not check: not fetched
            rows.close()


class SavedBlobs:
    """The ``kind`` blobs of one store's collections (``db``: its pool); ``part_bytes``:
    the size of a row's part (the last one shorter). A collection name the database
    cannot hold (a NUL) has none."""

    def __init__(self, db: Db, kind: int, part_bytes: int = PART_BYTES) -> None:
        self.db = db
        self.kind = kind
        self.part_bytes = part_bytes

    def exists(self, collection: str) -> bool:
        if "\x00" in collection:
            return False
        row = self.db.call(
            lambda conn: conn.execute(_EXISTS, (collection, self.kind)).fetchone(),
            f"find {_NAMES[self.kind]}",
        )
        return bool(row and row[0])

    def read(self, collection: str, use: Callable[[Parts], T | None]) -> tuple[bool, T | None]:
        """``(whether there was one, use(parts))``; one that ``use`` did not take (None, or
        ValueError) is deleted."""
        if "\x00" in collection:
            return False, None
        found, got = self.db.call(
            lambda conn: _read_parts(conn, collection, self.kind, use), f"read {_NAMES[self.kind]}"
        )
        if found and got is None:
            self.remove(collection)
        return found, got

    def write(
        self,
        collection: str,
        header: Mapping[str, Any],
        blob: Callable[[], tuple[int, Iterator[memoryview]]],
    ) -> bool:
        """Replace ``collection``'s blob with ``blob()``'s bytes (its size and pieces,
        asked inside the transaction) once the collection is claimed (:func:`claim`);
        False when it is not. One save of a kind at a time in this process: a save holds
        its encoded arrays, and a start's views finish their loads together."""
        if "\x00" in collection:
            return False

        def save(conn: psycopg.Connection[Any]) -> bool:
            cid = claim(conn, collection, header, _LOCKS[self.kind])
            if cid is None:
                return False
            size, pieces = blob()
            _write_parts(conn, cid, self.kind, size, pieces, self.part_bytes)
            return True

        with _ONE_SAVE[self.kind]:
            return self.db.transact(save, f"save {_NAMES[self.kind]}")

    def remove(self, collection: str) -> None:
        if "\x00" in collection:
            return
        self.db.transact(
            lambda conn: conn.execute(
                "DELETE FROM saved_parts WHERE kind = %s AND cid = "
                "(SELECT cid FROM collections WHERE name = %s)",
                (self.kind, collection),
            ),
            f"remove {_NAMES[self.kind]}",
        )
