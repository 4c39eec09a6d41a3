"""Is the store's server answering? ``health``'s and ``status``'s probe of a PostgreSQL store.

A SQLite store lives in the daemon and is there while the daemon is; a PostgreSQL server
can stop or become unreachable under a running daemon, whose writes then fail with -32005
while ``health`` used to answer ``ok: true`` with the store ``ready``. So ``health`` and
``status`` ask, cheaply and never for long:

* at most one probe at a time, and none while the last answer is younger than
  :data:`PROBE_TTL_S` (callers polling ``health`` share it);
* the probe opens a connection of its own and runs ``SELECT 1`` in a thread of its own
  (not the read pool, which an outage may fill with waiting reads), bounded by libpq's
  ``connect_timeout``;
* the caller waits at most :data:`PROBE_WAIT_S`: a server that has not answered by then
  counts as unreachable until the probe ends.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

PROBE_TTL_S = 2.0  # an answer stands this long
PROBE_WAIT_S = 1.5  # health waits this long at most for a probe
PROBE_CONNECT_S = 2.0  # libpq's connect_timeout (whole seconds, at least 2)


# A store's ``ping(timeout)``: None when its server answers, else why not (``PgStore``).
Ping = Callable[[float], str | None]


class StoreProbe:
    """The last answer of the server (``down``: None when it answered) and the probe."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.down: str | None = None
        self._at = float("-inf")  # monotonic time of the last answer
        self._running: Future[str | None] | None = None
        self._lock = threading.Lock()

    async def check(self, ping: Ping) -> None:
        """Refresh :attr:`down` when the last answer is stale; wait for it boundedly."""
        fut = self._start(ping)
        if fut is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), PROBE_WAIT_S)
        except TimeoutError:
            self.down = f"PostgreSQL at {self.where} did not answer within {PROBE_WAIT_S} s"

    def _start(self, ping: Ping) -> Future[str | None] | None:
        with self._lock:
            if self._running is not None:
                return self._running
            if time.monotonic() - self._at < PROBE_TTL_S:
                return None
            fut: Future[str | None] = Future()
            self._running = fut

        def run() -> None:
            try:
                problem = ping(PROBE_CONNECT_S)
            except Exception as exc:  # a closed store, a driver's surprise: not an answer
                problem = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.down = None if problem is None else f"PostgreSQL at {self.where}: {problem}"
                self._at = time.monotonic()
                self._running = None
            fut.set_result(problem)

        threading.Thread(target=run, name="libravdb-store-probe", daemon=True).start()
        return fut
