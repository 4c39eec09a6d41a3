"""The SQLite store's background indexer thread: collections with index work are queued
(``notify``) and handed, one step at a time, to the step function it was given
(``maintenance._index_step``: builds, tail moves, rebuilds, shrinks)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)


class Indexer(threading.Thread):
    """Background index maintenance: builds, tail moves, rebuilds, shrinks."""

    def __init__(self, step: Callable[[int], bool]) -> None:
        super().__init__(name="libravdb-store-indexer", daemon=True)
        self._step = step  # one step of a collection's work; True: more to do
        self._cond = threading.Condition()
        self._pending: dict[int, None] = {}
        self._stopping = False

    def notify(self, cid: int) -> None:
        with self._cond:
            self._pending[cid] = None
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait(1.0)
                if self._stopping:
                    return
                cid = next(iter(self._pending))
                del self._pending[cid]
            try:
                more = self._step(cid)
            except Exception:
                log.exception("index.indexer_failed")
                more = False
            if more:
                with self._cond:
                    self._pending[cid] = None
