"""A lean view's metadata, read from the store for the rows a request makes candidates of.

A view the store's index ranks keeps no metadata (``ViewRows.lean``: about 600 bytes a
durable memory, most of a large view's strings), because a request reads a few hundred
of its rows. :class:`LeanMetas` reads theirs with one query
(``StoreBackend.metadata_many``) before their candidates are built, or one row's alone
when a candidate is asked for by itself.

The metadata is the store's as the request reads it: the view is in step with the store
at the request's start, so it is the metadata of the row's record unless a writer
changed it since, which the next request's sync brings into the rest of the row too. A
record removed since has none (``{}``), as a record without metadata.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sidecar.assembly.view_rows import ViewRows

if TYPE_CHECKING:
    from sidecar.store.interface import StoreBackend


class LeanMetas:
    """The metadata read ahead for a lean view's rows, by row, until taken."""

    __slots__ = ("_ready", "store")

    def __init__(self) -> None:
        self.store: StoreBackend | None = None  # the view's store, set by its load
        self._ready: dict[int, dict[str, Any]] = {}

    def prefetch(self, name: str, rows: ViewRows, want: Iterable[int]) -> None:
        """Read the metadata of rows ``want`` of collection ``name`` with one query."""
        if rows.lean:
            self._ready.update(self._read(name, rows, [i for i in want if i not in self._ready]))

    def take(self, name: str, rows: ViewRows, i: int) -> dict[str, Any]:
        """Row ``i``'s metadata: read ahead, else read now (not kept: another thread's
        request may clear what was read ahead meanwhile)."""
        meta = self._ready.pop(i, None)
        return self._read(name, rows, [i])[i] if meta is None else meta

    def _read(self, name: str, rows: ViewRows, todo: list[int]) -> dict[int, dict[str, Any]]:
        if not todo:
            return {}
        if self.store is None:
            raise RuntimeError("a lean view reads its metadata from its store: none is set")
        ids = rows.ids
        got = self.store.metadata_many(name, [ids[i] for i in dict.fromkeys(todo)])
        return {i: got.get(ids[i], {}) for i in todo}

    def clear(self) -> None:
        """Forget what was read ahead (rows rewritten, or a request's candidates built)."""
        self._ready.clear()
