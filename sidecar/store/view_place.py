"""Where a store's views keep their saved rows (``sidecar/assembly/view_snapshot.py``).

A saved view is the bytes of a view file (``view_files.py``: a header naming the
collection's ``cid``, ``removals`` and ``max_seq`` when saved, the sections, a CRC-32).
It may lag the collection (a start replays what was put or patched since its
``max_seq``) but must never outlive a removal: it would keep a forgotten record's text
and vector.

* SQLite (:class:`FileViewPlace`): a file beside the store (atomic writes, mapped at a
  start; ``lexical_files.scrub`` removes the stale ones after a forget). One daemon owns
  the directory.
* PostgreSQL (``pg/saved_views.py``): the same bytes in parts, rows of ``saved_parts``
  (``pg/saves.py``), shared by every daemon on the database. The transaction of any removal from the
  collection deletes them, and a save is refused unless the collection has had no
  removal since the state it was taken at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sidecar.store import view_files
from sidecar.store.view_files import Section, Target


class ViewPlace(Protocol):
    """The saved views of a store's collections, one per collection."""

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], target: Target
    ) -> tuple[bool, dict[str, Any] | None]:
        """Read ``collection``'s saved view (``view_files.read_checked``'s rules): whether
        there was one, and its header when all of it checked (else None: one that does not
        check is removed)."""

    def write(
        self,
        collection: str,
        header: dict[str, Any],
        sections: Sequence[Section],
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        """Save ``collection``'s view, replacing any before, unless the collection changed
        under it (dropped, or a record removed since ``header``'s ``removals``; ``holds``
        asks the store, when given, where the place cannot); returns whether it was
        saved."""

    def remove(self, collection: str) -> None:
        """Drop ``collection``'s saved view (one that does not hold)."""


@dataclass(frozen=True, slots=True)
class FileViewPlace:
    """Saved views as files in ``data_dir`` (a SQLite store's directory)."""

    data_dir: Path

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], target: Target
    ) -> tuple[bool, dict[str, Any] | None]:
        found = view_files.path_of(self.data_dir, collection).exists()
        return found, view_files.read(self.data_dir, collection, check, target)

    def write(
        self,
        collection: str,
        header: dict[str, Any],
        sections: Sequence[Section],
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        return view_files.write(self.data_dir, collection, header, sections, holds)

    def remove(self, collection: str) -> None:
        view_files.remove(self.data_dir, collection)
