"""Saved BM25 terms in the database (``terms_place.py``; ``saves.py``: the
``saved_parts`` blobs of kind ``TERMS``).

Every daemon on the database reads one collection's terms at a view's load instead of
analyzing every text again, and the first daemon that had to analyze saves them for the
others. The blob is a terms file's bytes (``lexical_files.py``: the magic, the header,
the body), the body read straight into one buffer a part at a time; the header carries
the body's SHA-256, checked at every read, as a file's is. It never outlives a removal
(``saves.py``): a save that raced a removal either waited for its commit and is refused,
or committed first and is deleted by it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from sidecar.store.lexical_files import LEN, MAGIC, Piece, as_bytes, is_sealed, sealed_header
from sidecar.store.pg import saves
from sidecar.store.pg.conn import LOCK_SAVED_TERMS
from sidecar.store.terms_place import Saved

#: A save at a time in this process: a view's save holds its encoded arrays while it
#: writes (a 100k view's 36 MB), and a start's views finish their loads together.
_one_save = threading.Lock()

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState


class PgTermsPlace:
    """The saved terms of one PostgreSQL store (``store``: its state, whose pool it uses);
    ``part_bytes``: the size of a row's part (the last one shorter)."""

    def __init__(self, store: PgState, part_bytes: int = saves.PART_BYTES) -> None:
        self.store = store
        self.part_bytes = part_bytes

    def read(self, collection: str) -> Saved | None:
        if "\x00" in collection:  # not a name the database can hold
            return None

        def use(parts: saves.Parts) -> Saved | None:
            lead = parts.read(len(MAGIC) + LEN.size)
            if len(lead) != len(MAGIC) + LEN.size or not lead.startswith(MAGIC):
                return None
            head = parts.read(LEN.unpack_from(lead, len(MAGIC))[0])
            meta = json.loads(head)
            body = bytearray(parts.size - len(lead) - len(head))
            if parts.readinto(memoryview(body)) != len(body) or parts.read(1):
                return None
            return (meta, body) if isinstance(meta, dict) else None

        found, got = self.store.db.call(
            lambda conn: saves.read_parts(conn, collection, saves.TERMS, use), "read terms"
        )
        if got is not None and is_sealed(got[0], collection, got[1]):
            return got
        if found:
            self.remove(collection)
        return None

    def write(self, collection: str, header: dict[str, Any], body: Sequence[Piece]) -> bool:
        if "\x00" in collection:
            return False
        head = sealed_header(header, collection, body)
        lead = [MAGIC, LEN.pack(len(head)), head]
        size = sum(len(b) for b in lead) + sum(as_bytes(piece).nbytes for piece in body)

        def pieces() -> Iterator[memoryview]:
            for piece in (*lead, *body):
                yield as_bytes(piece)

        def save(conn: psycopg.Connection[Any]) -> bool:
            cid = saves.claim(conn, collection, header, LOCK_SAVED_TERMS)
            if cid is None:
                return False
            saves.write_parts(conn, cid, saves.TERMS, size, pieces(), self.part_bytes)
            return True

        with _one_save:
            return self.store.db.transact(save, "save terms")

    def remove(self, collection: str) -> None:
        if "\x00" not in collection:
            self.store.db.transact(
                lambda conn: saves.delete_saved(conn, saves.TERMS, collection), "remove terms"
            )
