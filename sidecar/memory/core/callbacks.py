"""Change notifications inside the daemon: a list of callbacks called synchronously with
one value, each failure logged without stopping the others."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")


class Listeners(Generic[T]):
    """Callbacks registered with :meth:`add` and called by :meth:`notify` (listeners run
    on the notifier's thread and must not block). ``failure``: the log event of a
    listener that raised."""

    def __init__(self, failure: str) -> None:
        self.failure = failure
        self._items: list[Callable[[T], None]] = []

    def add(self, listener: Callable[[T], None]) -> Callable[[], None]:
        """Register ``listener``; returns the function that unregisters it."""
        self._items.append(listener)

        def remove() -> None:
            if listener in self._items:
                self._items.remove(listener)

        return remove

    def notify(self, value: T, **log_fields: Any) -> None:
        for listener in list(self._items):
            try:
                listener(value)
            except Exception:
                log.exception(self.failure, **log_fields)
