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
"""

from __future__ import annotations

import gc
import threading

#: Rows (re)loaded into the caches since the last freeze that make the next one worth it.
FREEZE_MIN_ROWS = 2048


class HeapSettler:
    """Counts the rows loaded into long-lived caches and freezes the heap once enough
    have accumulated."""

    def __init__(self, min_rows: int = FREEZE_MIN_ROWS) -> None:
        self.min_rows = max(1, int(min_rows))
        self.pending = 0
        self.freezes = 0
        self._lock = threading.Lock()

    def loaded(self, rows: int) -> bool:
        """Note ``rows`` newly cached rows; True when this froze the heap."""
        with self._lock:
            self.pending += max(0, int(rows))
            if self.pending < self.min_rows:
                return False
            self.pending = 0
            self.freezes += 1
        gc.freeze()
        return True
