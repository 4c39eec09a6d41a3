"""Saved view graphs in the database (``graph_place.py``; ``saves.py``: the
``saved_parts`` blobs of kind ``GRAPH``).

Without them every daemon's every start built its large views' graphs again (8.6 s of
CPU at 100k memories, about ten minutes at 1M), while the store's slower index ranked.
A blob is a view file's bytes (``view_files.py``: the header, one section, CRC-32) whose
section is usearch's serialisation of the graph. usearch reads and writes a graph from a
file, so a save has usearch write a temporary file and streams it into the ``COPY``, and
a read streams the parts into a temporary file (checked as they pass) that usearch then
reads; neither holds the graph's bytes in this process beside usearch's own graph.

What a saved graph's labels mean is ``graph_file.py``'s business (the rows' layout it
was built over); that it never outlives a removal is ``saves.py``'s.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sidecar.store import view_files
from sidecar.store.graph_place import KIND, Dump, Load, chunks_of, load_body
from sidecar.store.pg import saves
from sidecar.store.view_files import Section, Spill

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

T = TypeVar("T")


class PgGraphPlace:
    """The saved graphs of one PostgreSQL store (``store``: its state, whose pool it
    uses); ``part_bytes``: the size of a row's part (the last one shorter)."""

    def __init__(self, store: PgState, part_bytes: int = saves.PART_BYTES) -> None:
        self.blobs = saves.SavedBlobs(store.db, saves.GRAPH, part_bytes)

    def exists(self, collection: str) -> bool:
        return self.blobs.exists(collection)

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], load: Load[T]
    ) -> tuple[dict[str, Any], T] | None:
        def one_section(meta: dict[str, Any]) -> bool:
            return len(meta.get("sections") or ()) == 1 and check(meta)

        with tempfile.TemporaryDirectory(prefix="libravdb-graph-") as tmp:
            body = Path(tmp) / "graph.usearch"

            def spill(parts: saves.Parts) -> dict[str, Any] | None:
                with body.open("wb") as f:  # (a read run again starts the file again)
                    return view_files.read_checked(
                        parts,
                        parts.size,
                        collection,
                        one_section,
                        lambda _i, _n: Spill(f),
                        KIND.magic,
                    )

            meta = self.blobs.read(collection, spill)[1]  # (one that did not check: removed)
            got = None if meta is None else load_body(collection, load, body)
        if meta is not None and got is None:
            self.remove(collection)
        return None if meta is None or got is None else (meta, got)

    def write(
        self,
        collection: str,
        header: Mapping[str, Any],
        dump: Dump,
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        del holds  # the transaction checks the collection itself (saves.claim)
        with tempfile.TemporaryDirectory(prefix="libravdb-graph-") as tmp:
            body = Path(tmp) / "graph.usearch"
            dump(body)
            size = body.stat().st_size

            def blob() -> tuple[int, Iterator[memoryview]]:
                section = Section(size, chunks_of(body))
                return view_files.encode(collection, header, [section], KIND)

            return self.blobs.write(collection, header, blob)

    def remove(self, collection: str) -> None:
        self.blobs.remove(collection)
