"""Micro-batching of concurrent requests into one call of a blocking function in a worker thread.

Policy (per event loop):

* When the worker is idle, a request is dispatched on the next loop iteration, so a lone caller
  pays no waiting time; every request submitted in the same loop iteration joins that batch.
* While a batch runs, new requests queue up; when it finishes, everything queued (up to
  ``max_batch`` items) goes out as the next batch. Under load, batches therefore form by
  themselves without any timer.
* Adaptive linger: if the previous batch carried several requests and finished less than
  ``linger_window_s`` ago (concurrent clients are active), an idle worker waits up to
  ``max_wait_ms`` for companions before dispatching, and stops waiting as soon as as many
  requests as the previous batch held (or ``max_batch`` items) are queued.
  Concurrent clients that receive their results together resubmit within a few hundred
  microseconds, and this keeps them in one batch instead of splitting into 1 + (n - 1).

Lanes: up to ``lanes`` batches run at once (the executor needs that many threads). When several
lanes are free and several requests are queued, the queue is split evenly across them. On a
small CPU model a batch of n short texts costs nearly n single runs, so two single-threaded
runs side by side beat one two-threaded run of the same items; see docs/engines.md.

The blocking function receives the flat list of items of all requests in the batch and a flag
``parallel`` (true when another batch runs beside it, so it should use one core only), and must
return one output per item, in order. It runs on the given executor, so the event loop never
blocks.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


@dataclass
class _Request(Generic[I, O]):
    items: list[I]
    future: asyncio.Future[list[O]]


@dataclass
class _LoopState(Generic[I, O]):
    loop: asyncio.AbstractEventLoop
    queue: deque[_Request[I, O]] = field(default_factory=deque)
    queued_items: int = 0
    running: int = 0  # batches in flight
    handle: asyncio.Handle | asyncio.TimerHandle | None = None
    lingering: bool = False
    last_batch_requests: int = 0
    last_done: float = -1e9


@dataclass
class BatchStats:
    batches: int = 0
    requests: int = 0
    items: int = 0
    max_requests_in_batch: int = 0
    max_items_in_batch: int = 0
    parallel_batches: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "requests": self.requests,
            "items": self.items,
            "maxRequestsInBatch": self.max_requests_in_batch,
            "maxItemsInBatch": self.max_items_in_batch,
            "parallelBatches": self.parallel_batches,
            "meanRequestsPerBatch": round(self.requests / self.batches, 3) if self.batches else 0,
        }


class MicroBatcher(Generic[I, O]):
    def __init__(
        self,
        fn: Callable[[list[I], bool], Sequence[O]],
        *,
        executor: Executor,
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        linger_window_s: float = 0.05,
        lanes: int = 1,
    ) -> None:
        self._fn = fn
        self._executor = executor
        self.lanes = max(1, int(lanes))
        self.max_batch = max(1, int(max_batch))
        self.max_wait_s = max(0.0, float(max_wait_ms)) / 1000.0
        self.linger_window_s = linger_window_s
        self.stats = BatchStats()
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState[I, O]] = (
            weakref.WeakKeyDictionary()
        )

    def _state(self) -> _LoopState[I, O]:
        loop = asyncio.get_running_loop()
        st = self._states.get(loop)
        if st is None:
            st = _LoopState(loop=loop)
            self._states[loop] = st
        return st

    async def submit(self, items: Sequence[I]) -> list[O]:
        """Run ``items`` as part of a batch; returns their outputs in order."""
        if not items:
            return []
        st = self._state()
        fut: asyncio.Future[list[O]] = st.loop.create_future()
        st.queue.append(_Request(list(items), fut))
        st.queued_items += len(items)
        self._kick(st)
        return await fut

    # -- scheduling ------------------------------------------------------------------------------
    def _kick(self, st: _LoopState[I, O]) -> None:
        if st.running >= self.lanes:
            return
        if st.handle is not None:
            if st.lingering and self._enough(st):
                st.handle.cancel()
                st.handle = st.loop.call_soon(self._dispatch, st)
                st.lingering = False
            return
        recent = st.loop.time() - st.last_done < self.linger_window_s
        if self.max_wait_s > 0 and st.last_batch_requests > 1 and recent and not self._enough(st):
            st.lingering = True
            st.handle = st.loop.call_later(self.max_wait_s, self._dispatch, st)
        else:
            st.lingering = False
            st.handle = st.loop.call_soon(self._dispatch, st)

    def _enough(self, st: _LoopState[I, O]) -> bool:
        # Stop lingering once a full batch, or as many requests as the last batch, is queued.
        return st.queued_items >= self.max_batch or len(st.queue) >= st.last_batch_requests

    def _dispatch(self, st: _LoopState[I, O]) -> None:
        st.handle = None
        st.lingering = False
        free = self.lanes - st.running
        if free <= 0:
            return
        self._drop_cancelled(st)
        # Split the queue across the free lanes, a share of requests each.
        share = -(-len(st.queue) // free) if free > 1 else len(st.queue)
        batches: list[list[_Request[I, O]]] = []
        while st.queue and len(batches) < free:
            batch = self._take(st, max(1, share))
            if batch:
                batches.append(batch)
        parallel = st.running + len(batches) > 1
        for batch in batches:
            self._start(st, batch, parallel)

    def _drop_cancelled(self, st: _LoopState[I, O]) -> None:
        kept = [req for req in st.queue if not req.future.done()]
        if len(kept) != len(st.queue):
            st.queue = deque(kept)
            st.queued_items = sum(len(req.items) for req in kept)

    def _take(self, st: _LoopState[I, O], max_requests: int) -> list[_Request[I, O]]:
        batch: list[_Request[I, O]] = []
        count = 0
        while st.queue and len(batch) < max_requests:
            req = st.queue[0]
            if batch and count + len(req.items) > self.max_batch:
                break
            st.queue.popleft()
            st.queued_items -= len(req.items)
            batch.append(req)
            count += len(req.items)
        return batch

    def _start(self, st: _LoopState[I, O], batch: list[_Request[I, O]], parallel: bool) -> None:
        count = sum(len(req.items) for req in batch)
        st.running += 1
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.items += count
        self.stats.parallel_batches += int(parallel)
        self.stats.max_requests_in_batch = max(self.stats.max_requests_in_batch, len(batch))
        self.stats.max_items_in_batch = max(self.stats.max_items_in_batch, count)
        flat = [item for req in batch for item in req.items]
        try:
            cfut = st.loop.run_in_executor(self._executor, self._fn, flat, parallel)
        except RuntimeError as exc:  # executor shut down
            st.running -= 1
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(exc)
            return
        cfut.add_done_callback(lambda f: self._done(st, batch, f))

    def _done(
        self, st: _LoopState[I, O], batch: list[_Request[I, O]], f: asyncio.Future[Sequence[O]]
    ) -> None:
        st.running -= 1
        st.last_batch_requests = len(batch)
        st.last_done = st.loop.time()
        if f.cancelled():
            for req in batch:
                if not req.future.done():
                    req.future.cancel()
        elif (exc := f.exception()) is not None:
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(exc)
        else:
            results = f.result()
            pos = 0
            for req in batch:
                part = list(results[pos : pos + len(req.items)])
                pos += len(req.items)
                if not req.future.done():
                    req.future.set_result(part)
        if st.queue and st.handle is None:
            # Work that accumulated during the run goes out at once (no linger).
            st.handle = st.loop.call_soon(self._dispatch, st)
