"""The saved files of the views a sync loads for the first time, read ahead.

A restart's first request loads its large views one after the other (the history, then
the durable memories, whose load takes terms from the history's). Most of reading a
view's saved file (``view_snapshot.load``: the file's bytes into the arrays, the
checksum, the matrix) runs without the GIL, so the files of the views after the first
are read by one background thread while the views before them load; a view's load then
takes its file from there instead of reading it itself. The file is read for the state
the sync read, as the load would have (``view_snapshot.load`` checks it and drops a file
that does not hold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from sidecar.assembly import view_snapshot
from sidecar.assembly.cache import CollectionView, saved_dir
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState

# One reader for every Retrieval of the process: the reads are disk and memory bound.
_READS = ThreadPoolExecutor(1, thread_name_prefix="libravdb-view-read")


def read_ahead(
    store: StoreBackend,
    names: Sequence[str],
    states: Mapping[str, CollectionState],
    views: Mapping[str, CollectionView],
) -> dict[str, Future[view_snapshot.Loaded | None]]:
    """Start reading the saved files of ``names`` but the first that will load for the
    first time (no view, or one never loaded) and are large enough to have one."""
    where = saved_dir(store)
    if where is None:
        return {}
    out: dict[str, Future[view_snapshot.Loaded | None]] = {}
    first = True
    for name in names:
        view, state = views.get(name), states.get(name)
        if (view is not None and view.state is not None) or state is None:
            continue
        if state.count < (view.snapshot_min_rows if view else view_snapshot.MIN_ROWS):
            continue
        if first:  # its load starts now: nothing to overlap with
            first = False
            continue
        out[name] = _READS.submit(view_snapshot.load, where, name, state, store.embed_dims)
    return out
