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

import secrets
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sidecar.store import view_files
from sidecar.store.pg import saves
from sidecar.store.view_files import Section, Target

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState


#: The layouts a saved view names as its first rows' (the last saves'): a graph over an
#: older one is built again.
MAX_BASES = 8


class PgViewPlace:
    """The saved views of one PostgreSQL store (``store``: its state, whose pool it uses);
    ``part_bytes``: the size of a row's part (the last one shorter)."""

    def __init__(self, store: PgState, part_bytes: int = saves.PART_BYTES) -> None:
        self.blobs = saves.SavedBlobs(store.db, saves.VIEW, part_bytes)

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], target: Target
    ) -> tuple[bool, dict[str, Any] | None]:
        magic = view_files.KIND.magic

        def use(parts: saves.Parts) -> dict[str, Any] | None:
            return view_files.read_checked(parts, parts.size, collection, check, target, magic)

        return self.blobs.read(collection, use)

    def write(
        self,
        collection: str,
        header: dict[str, Any],
        sections: Sequence[Section],
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        del holds  # the transaction checks the collection itself (saves.claim)
        # Rows past those this daemon took are in its own order, which another daemon's
        # may not share: saved under a new token, naming the ones its rows so far are
        # (graph_file.py: which saved graph labels them)
        bases = [[header.get("layout", ""), header.get("rows", 0)]]
        bases += list(header.get("layout_bases") or ())[: MAX_BASES - 1]
        header = {**header, "layout": secrets.token_hex(8), "layout_bases": bases}
        # (a save rerun by the connection layer finds its pieces spent and fails:
        # ValueError, nothing saved; the next save of the view writes it)
        return self.blobs.write(
            collection, header, lambda: view_files.encode(collection, header, sections)
        )

    def remove(self, collection: str) -> None:
        self.blobs.remove(collection)
