"""Saved BM25 terms in the database (``terms_place.py``; schema ``_v5``).

Every daemon on the database reads one collection's terms from ``saved_terms`` at a
view's load instead of analyzing every text again, and the first daemon that had to
analyze saves them for the others. The row is kept out of the removal's way:

* any transaction that removes a record of the collection deletes the row, after it has
  taken the collection row's lock (``finish_collection``), so no forgotten record's words
  stay behind its commit;
* a save takes that lock in share mode first and writes only while the collection's
  ``removals`` is the one the terms were taken at: a save that raced a removal either
  waited for its commit and is refused, or committed first and is deleted by it.

The body is stored uncompressed (``STORAGE EXTERNAL``: it is mostly integers, and a 1M
view's 355 MB would cost a compression at every save and a decompression at every
start). The header carries the body's SHA-256, checked at every read, as a file's is.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from sidecar.store.lexical_files import Piece, as_bytes, is_sealed, sealed_header
from sidecar.store.pg.conn import LOCK_SAVED_TERMS
from sidecar.store.pg.saves import LEN, SIGNATURE, TRAILER, claim
from sidecar.store.terms_place import Saved

#: One row in PostgreSQL's binary COPY format, written piece by piece (a value is its
#: length, then its bytes: bigint 8 bytes big-endian, text and bytea as they are).
_COPY = "COPY saved_terms (cid, header, body) FROM STDIN (FORMAT BINARY)"
_ROW = struct.Struct(">hiqi")  # fields, the cid's length and value, the header's length
#: A save at a time in this process: a view's save holds its encoded arrays while it
#: writes (a 100k view's 36 MB), and a start's views finish their loads together.
_one_save = threading.Lock()

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState


class PgTermsPlace:
    """The saved terms of one PostgreSQL store (``store``: its state, whose pool it uses)."""

    def __init__(self, store: PgState) -> None:
        self.store = store

    def read(self, collection: str) -> Saved | None:
        if "\x00" in collection:  # not a name the database can hold
            return None
        rows = self.store.db.read(
            "SELECT t.header, t.body FROM saved_terms t JOIN collections c USING (cid) "
            "WHERE c.name = %s",
            (collection,),
            binary=True,  # the body as it is: text format would send it as hex, twice its size
        )
        if not rows:
            return None
        header, body = rows[0][0], rows[0][1]
        try:
            meta = json.loads(header)
        except ValueError:
            meta = None
        if isinstance(meta, dict) and is_sealed(meta, collection, body):
            return meta, body
        self.remove(collection)
        return None

    def write(self, collection: str, header: dict[str, Any], body: Sequence[Piece]) -> bool:
        if "\x00" in collection:
            return False
        head = sealed_header(header, collection, body)
        size = sum(as_bytes(piece).nbytes for piece in body)

        def save(conn: psycopg.Connection[Any]) -> bool:
            cid = claim(conn, collection, header, LOCK_SAVED_TERMS)
            if cid is None:
                return False
            conn.execute("DELETE FROM saved_terms WHERE cid = %s", (cid,))
            with conn.cursor() as cur, cur.copy(_COPY) as copy:
                copy.write(SIGNATURE + _ROW.pack(3, 8, cid, len(head)) + head + LEN.pack(size))
                for piece in body:  # streamed: the body is never one more copy in memory
                    copy.write(as_bytes(piece))
                copy.write(TRAILER)
            return True

        with _one_save:
            return self.store.db.transact(save, "save terms")

    def remove(self, collection: str) -> None:
        if "\x00" in collection:
            return
        self.store.db.transact(
            lambda conn: conn.execute(
                "DELETE FROM saved_terms WHERE cid = (SELECT cid FROM collections WHERE name = %s)",
                (collection,),
            ),
            "remove terms",
        )
