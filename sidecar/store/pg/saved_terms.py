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

import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sidecar.store.lexical_files import LEN, MAGIC, Piece, as_bytes, read_blob, sealed_header
from sidecar.store.pg import saves
from sidecar.store.terms_place import Saved

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState


class PgTermsPlace:
    """The saved terms of one PostgreSQL store (``store``: its state, whose pool it uses);
    ``part_bytes``: the size of a row's part (the last one shorter)."""

    def __init__(self, store: PgState, part_bytes: int = saves.PART_BYTES) -> None:
        self.blobs = saves.SavedBlobs(store.db, saves.TERMS, part_bytes)

    def read(self, collection: str) -> Saved | None:
        def use(parts: saves.Parts) -> Saved | None:
            try:
                return read_blob(parts, parts.size, collection)
            except struct.error:  # the bytes end inside the header's length
                return None

        return self.blobs.read(collection, use)[1]

    def write(self, collection: str, header: dict[str, Any], body: Sequence[Piece]) -> bool:
        head = sealed_header(header, collection, body)
        lead = [MAGIC, LEN.pack(len(head)), head]
        size = sum(len(b) for b in lead) + sum(as_bytes(piece).nbytes for piece in body)

        def pieces() -> Iterator[memoryview]:
            for piece in (*lead, *body):
                yield as_bytes(piece)

        return self.blobs.write(collection, header, lambda: (size, pieces()))

    def remove(self, collection: str) -> None:
        self.blobs.remove(collection)
