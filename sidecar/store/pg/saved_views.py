"""Saved views in the database (``view_place.py``; ``saves.py``: the ``saved_parts``
blobs of kind ``VIEW``).

A daemon's start reads a large collection's view from its blob instead of every row and
vector from ``records`` (and decoding them), then replays what was put or patched since
the saved ``max_seq``, as a SQLite start does from its file. The blob is the view file's
own bytes (``view_files.py``: header, sections, CRC-32), streamed into the view's
buffers a part at a time; nothing is mapped.

What the saved view holds is the collection as one daemon read it at a state (``cid``,
``removals``, ``max_seq``): ``changed_since`` gives every daemon the records committed
after that state, whoever wrote them (schema ``_FINISH`` keeps every later commit's seqs
above it), so another daemon's view taken from it is the one its own read would give.
It never outlives a removal (``saves.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from sidecar.store import view_files
from sidecar.store.pg import saves
from sidecar.store.pg.conn import LOCK_SAVED_VIEWS
from sidecar.store.view_files import Section, Target

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

#: A save at a time in this process (a start's views finish their loads together; each
#: save sends its whole view).
_one_save = threading.Lock()


class PgViewPlace:
    """The saved views of one PostgreSQL store (``store``: its state, whose pool it uses);
    ``part_bytes``: the size of a row's part (the last one shorter)."""

    def __init__(self, store: PgState, part_bytes: int = saves.PART_BYTES) -> None:
        self.store = store
        self.part_bytes = part_bytes

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], target: Target
    ) -> dict[str, Any] | None:
        if "\x00" in collection:  # not a name the database can hold
            return None
        magic = view_files.KIND.magic

        def use(parts: saves.Parts) -> dict[str, Any] | None:
            return view_files.read_checked(parts, parts.size, collection, check, target, magic)

        found, meta = self.store.db.call(
            lambda conn: saves.read_parts(conn, collection, saves.VIEW, use), "read view"
        )
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
            cid = saves.claim(conn, collection, header, LOCK_SAVED_VIEWS)
            if cid is None:
                return False
            # (a save rerun by the connection layer finds its pieces spent and fails:
            # ValueError, nothing saved; the next save of the view writes it)
            size, pieces = view_files.encode(collection, header, sections)
            saves.write_parts(conn, cid, saves.VIEW, size, pieces, self.part_bytes)
            return True

        with _one_save:
            return self.store.db.transact(save, "save view")

    def remove(self, collection: str) -> None:
        if "\x00" not in collection:
            self.store.db.transact(
                lambda conn: saves.delete_saved(conn, saves.VIEW, collection), "remove view"
            )

    def exists(self, collection: str) -> bool:
        if "\x00" in collection:
            return False
        return self.store.db.call(lambda conn: saves.exists(conn, collection, saves.VIEW))
