"""``MemoryService``: the App component that owns the session memory runtime.

It holds what the ingest, compaction and forget code share across calls:

* per-session locks: ``ingest_lock(sid)`` serializes ingests of one session (position
  counter, duplicate check); ``compaction_lock(sid)`` serializes compactions. They are
  separate, so a running (background) compaction never blocks ingest, and they exist only
  while held or awaited (:class:`KeyedLocks`), so idle sessions cost nothing;
  ``namespace_lock(ns)`` serializes what rewrites a namespace's facts (``memory.update``,
  ingest's change marks, forget). On a shared (PostgreSQL) store each of them is also
  the store's lock of the same key, held across every daemon on the database
  (:class:`SharedLocks`);
* the auto-compaction :class:`TokenAccumulator` and the background tasks it starts;
* the :class:`CompactionBarrier` (per-session compaction epoch) and the invalidation hook
  (:meth:`subscribe`) that assemblers and caches use;
* :class:`IdleSessions`: a session idle for ``compaction.idle_forget_s`` (an hour) has its
  token count and epoch dropped, so the daemon's memory does not grow with every session
  it ever saw. Nothing stored is lost: the epoch is read back from the stored compaction
  generation, and the token count restarts at 0 (the next auto-compaction comes later).

The operations themselves live in :mod:`sessions`, :mod:`compactor` and :mod:`forget`;
the methods here are thin entry points so callers need only this object.

It is also the door to :mod:`sidecar.memory.core.ownership`: a request's :class:`Address`
(the namespace and session it names) becomes the namespace it works in here, for every
service above (retrieval, the namespace's memory, v1 writes), so no handler resolves a
namespace or reads a session's owner itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from protocol.core import ComponentState
from sidecar.config import Settings
from sidecar.memory.compaction.autocompact import (
    AutoCompactPolicy,
    CompactionBarrier,
    IdleSessions,
    Pressure,
    TokenAccumulator,
)
from sidecar.memory.compaction.compactor import (
    CompactionOptions,
    CompactionOutcome,
    ExpandedItem,
    compact_session,
    expand_summary,
)
from sidecar.memory.compaction.continuity import GUIDANCE_PROTOTYPES
from sidecar.memory.core import layout as C
from sidecar.memory.core import ownership
from sidecar.memory.core.callbacks import Listeners
from sidecar.memory.core.errors import MemoryNotFound
from sidecar.memory.core.progress import Progress, no_progress
from sidecar.memory.core.shared_locks import SharedLocks
from sidecar.memory.ingest.gate import GatingConfig
from sidecar.memory.ingest.sessions import IngestOutcome, MessageIn, ingest
from sidecar.store.aio import AsyncStore
from sidecar.store.service import StoreService

if TYPE_CHECKING:
    from sidecar.engines import EngineHub
    from sidecar.memory.ingest.neighbours import ViewNeighbours

log = structlog.get_logger(__name__)

F32 = np.ndarray[Any, np.dtype[np.float32]]


@dataclass(frozen=True, slots=True)
class InvalidationEvent:
    """Something derived from a session or namespace before this event is stale.

    ``reason`` is ``"compaction"`` (``session_id`` and its new ``epoch`` set) or
    ``"forget"`` (``namespace`` set; ``session_id``/``epoch`` set once per forgotten
    session).
    """

    reason: str
    session_id: str | None = None
    namespace: str | None = None
    epoch: int = 0


Listener = Callable[[InvalidationEvent], None]


@dataclass(frozen=True, slots=True)
class Address:
    """Where a request says it works: the namespace it names (``namespace``, else
    ``userId``), its session, both or neither, as the request gave them. The services
    resolve it through :class:`MemoryService` before they read or write."""

    namespace: str | None = None
    user_id: str | None = None
    session_id: str | None = None


class MemoryService:
    name = "memory"

    def __init__(
        self,
        settings: Settings,
        store_service: StoreService,
        hub: EngineHub | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.store_service = store_service
        self.hub = hub
        comp = settings.compaction
        self.accumulator = TokenAccumulator(
            AutoCompactPolicy(
                session_budget_tokens=max(1, comp.session_budget_tokens),
                soft_fraction=comp.soft_fraction,
                emergency_fraction=comp.emergency_fraction,
                enabled=comp.auto,
            )
        )
        self.barrier = CompactionBarrier()
        self.idle = IdleSessions(comp.idle_forget_s, clock)
        self._compaction_slots = asyncio.Semaphore(max(1, comp.max_concurrent))
        self.gating: GatingConfig = settings.gating
        # retrieval's views, set once it exists (services.py): they propose a large
        # collection's neighbours to ingest (memory/ingest/neighbours.py)
        self.neighbours: ViewNeighbours | None = None
        self._ingest_locks = SharedLocks("ingest", self._store)
        self._compaction_locks = SharedLocks("compact", self._store)
        self._namespace_locks = SharedLocks("ns", self._store)
        self._listeners: Listeners[InvalidationEvent] = Listeners("memory.listener_failed")
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Sessions with a compaction requested and not yet started, at the highest pressure
        # asked for; a request during a run makes the run go again.
        self._levels: dict[str, Pressure] = {}
        self._prototypes: F32 | None = None
        self.auto_runs = 0
        self.auto_failures = 0
        self.auto_last_at: int | None = None  # epoch ms of the last finished run
        self.auto_last_session = ""
        self._closed = False

    # ---- component ---------------------------------------------------------------------

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    def states(self) -> dict[str, ComponentState]:
        return {}

    async def counts(self) -> dict[str, int]:
        return {}

    # ---- shared handles ----------------------------------------------------------------

    @property
    def store(self) -> AsyncStore:
        return self.store_service.store

    def _store(self) -> AsyncStore:
        return self.store_service.store

    async def embed(self, texts: Sequence[str], kind: str = "document") -> F32:
        """One batched embedding call; blank texts get a zero vector (cosine 0 to all)."""
        out = np.zeros((len(texts), self.store.store.embed_dims), dtype=np.float32)
        rows = [i for i, t in enumerate(texts) if t.strip()]
        if rows:
            vecs = await self.store_service.embed([texts[i] for i in rows], kind)
            out[rows] = np.asarray(vecs, dtype=np.float32)
        return out

    async def prototype_vectors(self) -> F32:
        """Document embeddings of the guidance prototypes (computed once)."""
        if self._prototypes is None:
            self._prototypes = await self.embed(list(GUIDANCE_PROTOTYPES), "document")
        return self._prototypes

    def ingest_lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Held while one ingest of the session runs (``async with``)."""
        return self._ingest_locks.hold(session_id)

    def compaction_lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Held while one compaction of the session runs (``async with``)."""
        return self._compaction_locks.hold(session_id)

    def namespace_lock(self, namespace: str) -> AbstractAsyncContextManager[None]:
        """Held while a namespace's facts are rewritten (``memory.update``, ingest's change
        marks, forget); taken after any session lock."""
        return self._namespace_locks.hold(namespace)

    def held_session_locks(self) -> int:
        """Session locks with a holder or a waiter (idle sessions keep none)."""
        return len(self._ingest_locks) + len(self._compaction_locks) + len(self._namespace_locks)

    # ---- where a request works (memory.core.ownership, for every verb) ----------------

    async def namespace_of(self, who: Address) -> str:
        """The namespace a read works in: its session's when it names one (-32012 for a
        session of another namespace than the one named), else the one it names; a
        request naming neither is refused (-32009)."""
        return await ownership.reader_namespace(
            self.store, who.session_id, who.namespace, who.user_id
        )

    async def session_namespace(self, who: Address) -> str:
        """The namespace of ``who``'s session (which it must name): its owner's (a new
        session's: the one named), -32012 when ``who`` names another."""
        return await ownership.session_namespace(
            self.store, who.session_id or "", who.namespace, who.user_id
        )

    @staticmethod
    def required_namespace(who: Address) -> str:
        """The namespace a request over a whole namespace must name (``forget``,
        ``sessions.list``: a session id alone would name only itself)."""
        return ownership.required_namespace(
            who.namespace, who.user_id, "namespace or userId is required"
        )

    @staticmethod
    def named_namespace(who: Address) -> str | None:
        """The namespace the request names, if any, as given."""
        return ownership.named_namespace(who.namespace, who.user_id)

    @asynccontextmanager
    async def v1_turn(self, session_id: str, user: object, tokens: int) -> AsyncIterator[None]:
        """Held while a v1 turn of ``tokens`` is written into the session: under its
        ingest lock, as v2 ingest, so the owner checked is the one written against (a v2
        ingest of another namespace cannot claim the session in between); a turn naming
        a user other than the owner is refused (-32012). The tokens count towards
        auto-compaction once the write is done."""
        async with self.ingest_lock(session_id):
            await ownership.refuse_another_owner(self.store, session_id, user)
            yield
        self.note_ingested(session_id, tokens)

    # ---- epoch and invalidation --------------------------------------------------------

    def epoch(self, session_id: str) -> int:
        """The session's compaction epoch as known in this process (0 before any)."""
        return self.barrier.epoch(session_id)

    async def load_epoch(self, session_id: str) -> int:
        """The epoch, restored from the stored ``compaction_generation`` if higher."""
        rec = await self.store.get(C.session_state(session_id), C.SESSION_STATE_ID)
        if rec is not None:
            gen = rec.metadata.get("compaction_generation")
            if isinstance(gen, int) and not isinstance(gen, bool):
                self.barrier.set(session_id, gen)
        return self.barrier.epoch(session_id)

    def is_current(self, session_id: str, epoch: int) -> bool:
        return self.barrier.is_current(session_id, epoch)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` after every compaction and forget; returns an
        unsubscribe function. Listeners run synchronously and must not block."""
        return self._listeners.add(listener)

    def publish(self, event: InvalidationEvent) -> None:
        self._listeners.notify(event, reason=event.reason)

    def advance_epoch(self, session_id: str, at_least: int = 0) -> int:
        if at_least:
            self.barrier.set(session_id, at_least - 1)
        epoch = self.barrier.advance(session_id)
        self.publish(InvalidationEvent("compaction", session_id=session_id, epoch=epoch))
        return epoch

    # ---- operations --------------------------------------------------------------------

    async def ingest(
        self,
        session_id: str,
        messages: Sequence[MessageIn],
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        progress: Progress | None = None,
        advancement_key: str | None = None,
    ) -> IngestOutcome:
        return await ingest(
            self,
            session_id,
            messages,
            namespace=namespace,
            user_id=user_id,
            progress=progress or no_progress,
            advancement_key=advancement_key,
        )

    async def compact(
        self,
        session_id: str,
        options: CompactionOptions | None = None,
        progress: Progress | None = None,
    ) -> CompactionOutcome:
        opts = options or CompactionOptions.from_settings(self.settings)
        self.idle.touch(session_id)  # compaction keeps an epoch for the session too
        async with self.compaction_lock(session_id), self._compaction_slots:
            if progress is None:
                return await compact_session(self, session_id, opts)
            return await compact_session(self, session_id, opts, progress)

    async def compact_known(
        self, session_id: str, options: CompactionOptions, progress: Progress | None = None
    ) -> CompactionOutcome:
        """:meth:`compact` of a session something was stored for; an unknown session is
        refused (not found) rather than compacted to nothing."""
        if not ownership.session_exists(self.store, session_id):
            raise MemoryNotFound(f"unknown session {session_id!r}: nothing was ingested for it")
        return await self.compact(session_id, options, progress)

    async def expand(
        self, session_id: str, summary_id: str, max_depth: int | None
    ) -> list[ExpandedItem] | None:
        """What a summary of the session covers, down to ``max_depth`` levels (None for
        an unknown summary; ``max_depth`` None or <= 0: down to the raw turns)."""
        return await expand_summary(self, session_id, summary_id, max_depth)

    # ---- auto-compaction ---------------------------------------------------------------

    def note_ingested(self, session_id: str, tokens: int) -> Pressure:
        """Count ingested tokens; start a background compaction on new pressure."""
        self.idle.touch(session_id)
        self._drop_idle()
        level = self.accumulator.add(session_id, tokens)
        if level != Pressure.NONE and not self._closed:
            self.schedule_compaction(session_id, level)
        return level

    def schedule_compaction(self, session_id: str, level: Pressure = Pressure.SOFT) -> None:
        self._levels[session_id] = max(level, self._levels.get(session_id, Pressure.NONE))
        task = self._tasks.get(session_id)
        if task is not None and not task.done():
            return
        self._tasks[session_id] = asyncio.get_running_loop().create_task(
            self._auto(session_id), name=f"auto-compact:{session_id}"
        )

    def _auto_options(self, level: Pressure) -> CompactionOptions | None:
        """Soft pressure compacts as configured. Emergency pressure skips the seq2seq model
        (seconds per cluster on a CPU) so that the shrink lands before the budget runs out."""
        if level < Pressure.EMERGENCY:
            return None
        return CompactionOptions.from_settings(self.settings, extractive_only=True)

    async def _auto(self, session_id: str) -> None:
        try:
            while True:
                level = self._levels.pop(session_id, Pressure.SOFT)
                try:
                    out = await self.compact(session_id, self._auto_options(level))
                    self.auto_runs += 1
                    self.auto_last_at = int(time.time() * 1000)
                    self.auto_last_session = session_id
                    log.info(
                        "memory.auto_compaction",
                        session=session_id,
                        pressure=level.name.lower(),
                        did_compact=out.did_compact,
                        turns_covered=out.turns_covered,
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.auto_failures += 1
                    log.warning("memory.auto_compaction_failed", session=session_id, error=str(exc))
                if session_id not in self._levels or self._closed:
                    break
        finally:
            self._tasks.pop(session_id, None)

    @property
    def auto_running(self) -> int:
        """Background compactions under way now."""
        return sum(1 for t in self._tasks.values() if not t.done())

    async def wait_idle(self, limit_s: float = 30.0) -> None:
        """Wait for running background compactions (tests and shutdown)."""
        deadline = asyncio.get_running_loop().time() + limit_s
        while self._tasks:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError("background compaction still running")
            await asyncio.wait(list(self._tasks.values()), timeout=remaining)

    def _drop_idle(self) -> None:
        """Drop the bookkeeping of sessions idle for ``compaction.idle_forget_s`` (module
        doc); a session with a compaction running or a lock held is kept."""
        for sid in self.idle.sweep():
            task = self._tasks.get(sid)
            busy = task is not None and not task.done()
            if busy or self._ingest_locks.locked(sid) or self._compaction_locks.locked(sid):
                self.idle.touch(sid)
                continue
            self.accumulator.forget(sid)
            self.barrier.forget(sid)
            self._levels.pop(sid, None)

    def forget_sessions(self, session_ids: Sequence[str]) -> None:
        for sid in session_ids:
            self.accumulator.forget(sid)
