"""Where a store's views keep their saved BM25 terms (``sidecar/assembly/view_terms.py``).

A saved-terms blob is a header (a JSON object: the format, the analyzer, the collection's
``cid`` and ``removals`` when saved, the body's section sizes) and a body. It holds a
record's terms only while that record's text has the saved digest, so it may lag the
collection (a start takes what holds and analyzes the rest) but must never outlive a
removal: it would keep a forgotten record's words.

* SQLite (:class:`FilePlace`): a file beside the store (``lexical_files.py``: atomic
  writes, a checksum, the scrub after a forget). One daemon owns the directory.
* PostgreSQL (``pg/saved_terms.py``): the same bytes in rows of ``saved_parts``
  (``pg/saves.py``), shared by every daemon on the database. The transaction of any
  removal from the collection deletes them, and a save is refused unless the collection
  has had no removal since the state it was taken at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sidecar.store import lexical_files
from sidecar.store.lexical_files import Piece
from sidecar.store.types import CollectionState

#: ``(header, body)`` of a saved blob that is whole (its checksum matched).
Saved = tuple[dict[str, Any], bytes | bytearray]


class TermsPlace(Protocol):
    """The saved terms of a store's collections, one blob per collection."""

    def read(self, collection: str) -> Saved | None:
        """The whole blob of ``collection`` (a damaged one is removed), or None."""

    def write(self, collection: str, header: dict[str, Any], body: Sequence[Piece]) -> bool:
        """Save ``collection``'s blob, its body the concatenation of the ``body`` pieces
        (never joined into one copy), replacing any before; False when refused (the
        collection changed under it: dropped, or a record removed since ``header``'s
        ``removals``)."""

    def remove(self, collection: str) -> None:
        """Drop ``collection``'s blob (one that does not hold)."""


@dataclass(frozen=True, slots=True)
class FilePlace:
    """Saved terms as files in ``data_dir`` (a SQLite store's directory); ``states`` is
    the store's ``collection_states``."""

    data_dir: Path
    states: Callable[[list[str]], Mapping[str, CollectionState]]

    def read(self, collection: str) -> Saved | None:
        return lexical_files.read(self.data_dir, collection)

    def write(self, collection: str, header: dict[str, Any], body: Sequence[Piece]) -> bool:
        # a background save may end after a forget and its scrub: asked right before the
        # rename, under the lock the scrub takes
        def holds() -> bool:
            return lexical_files.holds(header, self.states([collection])[collection])

        return lexical_files.write(self.data_dir, collection, header, body, holds)

    def remove(self, collection: str) -> None:
        lexical_files.remove(self.data_dir, collection)
