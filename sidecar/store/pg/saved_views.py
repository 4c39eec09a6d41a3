"""Saved views in the database (``view_place.py``; schema ``_v6``).

A daemon's start reads a large collection's view from ``saved_views`` instead of every
row and vector from ``records`` (and decoding them), then replays what was put or
patched since the saved ``max_seq``, as a SQLite start does from its file. The rows hold
the view file's own bytes (``view_files.py``: header, sections, CRC-32) cut into parts
of :data:`PART_BYTES`, so a view is never one value (PostgreSQL's limit is 1 GB; a 1M
view's matrix alone is 768 MB) and a read holds one part at a time beside the view's
own buffers.

What the saved view holds is the collection as one daemon read it at a state (``cid``,
``removals``, ``max_seq``): ``changed_since`` gives every daemon the records committed
after that state, whoever wrote them (schema ``_FINISH`` keeps every later commit's seqs
above it), so another daemon's view taken from it is the one its own read would give.
It must never outlive a removal, and the database enforces it as for the saved terms:

* any transaction that removes a record of the collection deletes the rows, after it has
  taken the collection row's lock (``finish_collection``);
* a save claims that row in share mode first (``saves.claim``) and writes only while
  the collection's ``removals`` is the one the view was taken at.

The bodies are stored uncompressed (``STORAGE EXTERNAL``: vectors do not compress, and a
start would pay the decompression).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from sidecar.store import view_files
from sidecar.store.pg.conn import LOCK_SAVED_VIEWS
from sidecar.store.pg.saves import SIGNATURE, TRAILER, claim
from sidecar.store.view_files import Section, Target

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

#: The bytes of a view in one row: a read holds one part at a time.
PART_BYTES = 8 << 20
_COPY = "COPY saved_views (cid, part, body) FROM STDIN (FORMAT BINARY)"
_ROW = struct.Struct(">hiqiii")  # fields, the cid's length and value, the part's, the body's
#: A save at a time in this process (a start's views finish their loads together; each
#: save sends its whole view).
_one_save = threading.Lock()


class PgViewPlace:
    """The saved views of one PostgreSQL store (``store``: its state, whose pool it uses);
    ``part_bytes``: the size of a row's part (the last one shorter)."""

    def __init__(self, store: PgState, part_bytes: int = PART_BYTES) -> None:
        self.store = store
        self.part_bytes = part_bytes

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], target: Target
    ) -> dict[str, Any] | None:
        if "\x00" in collection:  # not a name the database can hold
            return None

        def go(conn: psycopg.Connection[Any]) -> tuple[bool, dict[str, Any] | None]:
            rows = conn.cursor(binary=True).stream(
                "SELECT v.part, v.body, sum(length(v.body)) OVER () FROM saved_views v "
                "JOIN collections c USING (cid) WHERE c.name = %s ORDER BY v.part",
                (collection,),
            )
            try:
                first = next(rows, None)
                if first is None:
                    return False, None
                source = _Parts(first, rows)
                try:
                    meta = view_files.read_checked(
                        source, int(first[2]), collection, check, target, view_files.KIND.magic
                    )
                except ValueError:  # parts missing or out of order, a header not JSON
                    meta = None
                return True, meta
            finally:
                if isinstance(rows, Generator):  # the rest of one that did not check: not fetched
                    rows.close()

        found, meta = self.store.db.call(go, "read view")
        if found and meta is None:
            self.remove(collection)
        return meta

    def write(
        self,
        collection: str,
        header: dict[str, Any],
        sections: Sequence[Section],
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        del holds  # the transaction checks the collection itself (saves.claim)
        if "\x00" in collection:
            return False

        def save(conn: psycopg.Connection[Any]) -> bool:
            cid = claim(conn, collection, header, LOCK_SAVED_VIEWS)
            if cid is None:
                return False
            conn.execute("DELETE FROM saved_views WHERE cid = %s", (cid,))
            # (a save rerun by the connection layer finds its pieces spent and fails:
            # ValueError, nothing saved; the next save of the view writes it)
            size, pieces = view_files.encode(collection, header, sections)
            with conn.cursor() as cur, cur.copy(_COPY) as copy:
                copy.write(SIGNATURE)
                for data in _rows(cid, size, pieces, self.part_bytes):
                    copy.write(data)
                copy.write(TRAILER)
            return True

        with _one_save:
            return self.store.db.transact(save, "save view")

    def remove(self, collection: str) -> None:
        if "\x00" in collection:
            return
        self.store.db.transact(
            lambda conn: conn.execute(
                "DELETE FROM saved_views WHERE cid = (SELECT cid FROM collections WHERE name = %s)",
                (collection,),
            ),
            "remove view",
        )

    def exists(self, collection: str) -> bool:
        if "\x00" in collection:
            return False
        rows = self.store.db.read(
            "SELECT 1 FROM saved_views v JOIN collections c USING (cid) "
            "WHERE c.name = %s AND v.part = 0",
            (collection,),
        )
        return bool(rows)


def _rows(cid: int, size: int, pieces: Iterator[memoryview], part_bytes: int) -> Iterator[Any]:
    """The COPY rows of a view's ``size`` bytes, given as ``pieces``: each part's row
    header, then its bytes (the pieces cut where a part ends, never copied)."""
    part, left = 0, 0
    for piece in pieces:
        rest = piece if piece.ndim == 1 and piece.format == "B" else piece.cast("B")
        while rest.nbytes:
            if left == 0:
                left = min(part_bytes, size - part * part_bytes)
                if left <= 0:
                    raise ValueError(f"more than the {size} bytes announced")
                yield _ROW.pack(3, 8, cid, 4, part, left)
                part += 1
            take = min(left, rest.nbytes)
            yield rest[:take]
            rest, left = rest[take:], left - take
    if left:
        raise ValueError(f"fewer than the {size} bytes announced")


class _Parts:
    """The bytes of a view's parts, in order (``view_files.Source``): each part is let go
    once read; a part missing or out of order is ValueError."""

    def __init__(self, first: tuple[Any, ...], rest: Iterator[tuple[Any, ...]]) -> None:
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
        done = 0
        while done < buf.nbytes:
            if self._at >= self._part.nbytes:
                row = next(self._rows, None)
                if row is None:
                    break
                self._take(row)
                continue
            k = min(buf.nbytes - done, self._part.nbytes - self._at)
            buf[done : done + k] = self._part[self._at : self._at + k]
            done += k
            self._at += k
        return done

    def read(self, n: int) -> bytes:
        out = bytearray(n)
        return bytes(out[: self.readinto(memoryview(out))])
