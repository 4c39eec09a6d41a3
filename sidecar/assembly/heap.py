"""Keeping CPython's cyclic garbage collector off the long-lived caches.

The retrieval caches hold about a dozen tracked objects per record (the record, its
metadata, its candidate, its lexical term counts, ...): 675k objects for the benchmark's
50k memories. A full collection walks every tracked object, and at that size it takes
~0.5 s, a pause that lands on whatever request is running (measured: one ``assemble`` of
465 ms in 270, with 17 ms once the caches were frozen).

:func:`gc.freeze` moves every object alive now into the permanent generation, which
collections skip. Reference counting still frees a frozen object when its last reference
goes (a reloaded collection's old rows are released as before); only a reference cycle
among frozen objects would outlive its last use, and the caches build none.

:func:`paused` keeps the collector off *while* a cache loads: a load creates several
objects per record and no garbage cycles, yet every 700 allocations start a collection,
and the older generations' collections walk the growing cache again and again (3.4 s of
collections in a 16.6 s first ``assemble`` at 100k memories; 10.9 s without them, the
same result). Reference counting frees as usual meanwhile.

A large load also leaves free holes in the C heap (its temporary buffers and lists), which
glibc keeps: :class:`HeapSettler` hands them back to the system
(:func:`~sidecar.allocator.release_free_memory`) once :data:`RELEASE_MIN_ROWS` rows have
been loaded since it last did. A restart of a 100k-memory daemon: 110-130 MB less resident
after its views load, its peak 40-60 MB lower (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

from sidecar.allocator import release_free_memory

#: Rows (re)loaded into the caches since the last freeze that make the next one worth it.
FREEZE_MIN_ROWS = 2048
#: Rows loaded since the heap's free pages were last released that make the next release
#: worth its 1-5 ms: large views, not every cold namespace of a few hundred memories.
RELEASE_MIN_ROWS = 50_000


_pause_lock = threading.Lock()
_pauses = 0  # callers inside paused() now
_resume = False  # whether the first of them found the collector enabled


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off for the block (process-wide; nested and concurrent blocks
    leave it off until the last ends, then as the first found it)."""
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


class HeapSettler:
    """Counts the rows loaded into long-lived caches and freezes the heap once enough
    have accumulated."""

    def __init__(
        self, min_rows: int = FREEZE_MIN_ROWS, release_rows: int = RELEASE_MIN_ROWS
    ) -> None:
        self.min_rows = max(1, int(min_rows))
        self.release_rows = max(1, int(release_rows))
        self.pending = 0
        self.freezes = 0
        self.unreleased = 0  # rows loaded since the free pages were last released
        self.releases = 0  # releases that gave pages back
        self._lock = threading.Lock()

    def loaded(self, rows: int) -> bool:
        """Note ``rows`` newly cached rows; True when this froze the heap. Every
        :attr:`release_rows` rows it also releases the heap's free pages."""
        n = max(0, int(rows))
        with self._lock:
            self.pending += n
            self.unreleased += n
            release = self.unreleased >= self.release_rows
            if release:
                self.unreleased = 0
            freeze = self.pending >= self.min_rows
            if freeze:
                self.pending = 0
                self.freezes += 1
        if freeze:
            gc.freeze()
        if release and release_free_memory():
            self.releases += 1
        return freeze
