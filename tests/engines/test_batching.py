"""MicroBatcher scheduling: coalescing, lanes, splitting, cancellation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator

import pytest

from sidecar.engines.batching import MicroBatcher


class Recorder:
    """A blocking batch function that records each call and can be held open."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], bool]] = []
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Semaphore(0)
        self._lock = threading.Lock()

    def __call__(self, items: list[int], parallel: bool) -> list[int]:
        with self._lock:
            self.calls.append((list(items), parallel))
        self.started.release()
        self.release.wait(5)
        return [i * 10 for i in items]


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    ex = concurrent.futures.ThreadPoolExecutor(max_workers=4)
    yield ex
    ex.shutdown(wait=True)


async def test_lone_request_runs_alone_and_not_parallel(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=2)
    assert await batcher.submit([1, 2]) == [10, 20]
    assert fn.calls == [([1, 2], False)]


async def test_one_lane_coalesces_same_iteration_requests(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=1)
    results = await asyncio.gather(*(batcher.submit([i]) for i in range(8)))
    assert results == [[i * 10] for i in range(8)]
    assert fn.calls == [(list(range(8)), False)]


async def test_two_lanes_split_the_queue_evenly(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=2)
    results = await asyncio.gather(*(batcher.submit([i]) for i in range(8)))
    assert results == [[i * 10] for i in range(8)]
    assert sorted(fn.calls) == [([0, 1, 2, 3], True), ([4, 5, 6, 7], True)]
    assert batcher.stats.parallel_batches == 2


async def test_second_lane_starts_while_the_first_runs(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    fn.release.clear()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=2)
    first = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(fn.started.acquire, True, 5)
    second = asyncio.ensure_future(batcher.submit([2]))
    # The second request must not wait for the first batch: it gets the free lane.
    assert await asyncio.to_thread(fn.started.acquire, True, 5)
    fn.release.set()
    assert await first == [10]
    assert await second == [20]
    assert fn.calls == [([1], False), ([2], True)]


async def test_all_lanes_busy_queues_into_the_next_batch(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    fn.release.clear()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=1)
    first = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(fn.started.acquire, True, 5)
    rest = [asyncio.ensure_future(batcher.submit([i])) for i in (2, 3, 4)]
    await asyncio.sleep(0.01)
    assert len(fn.calls) == 1
    fn.release.set()
    await asyncio.gather(first, *rest)
    assert fn.calls == [([1], False), ([2, 3, 4], False)]


async def test_max_batch_caps_each_lane(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    fn = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=2, max_batch=3)
    results = await asyncio.gather(*(batcher.submit([i]) for i in range(10)))
    assert results == [[i * 10] for i in range(10)]
    assert all(len(items) <= 3 for items, _ in fn.calls)
    assert sorted(i for items, _ in fn.calls for i in items) == list(range(10))


async def test_cancelled_queued_request_is_skipped(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    fn.release.clear()
    batcher: MicroBatcher[int, int] = MicroBatcher(fn, executor=pool, lanes=1)
    first = asyncio.ensure_future(batcher.submit([1]))
    await asyncio.to_thread(fn.started.acquire, True, 5)
    doomed = asyncio.ensure_future(batcher.submit([2]))
    kept = asyncio.ensure_future(batcher.submit([3]))
    await asyncio.sleep(0)
    doomed.cancel()
    fn.release.set()
    assert await first == [10]
    assert await kept == [30]
    assert fn.calls == [([1], False), ([3], False)]


async def test_linger_keeps_returning_clients_together(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    fn = Recorder()
    # A long max wait makes the linger observable without timing races.
    batcher: MicroBatcher[int, int] = MicroBatcher(
        fn, executor=pool, lanes=1, max_wait_ms=500, linger_window_s=5.0
    )
    await asyncio.gather(batcher.submit([1]), batcher.submit([2]))
    assert fn.calls == [([1, 2], False)]
    # Right after a two-request batch, a lone request waits for its companion...
    first = asyncio.ensure_future(batcher.submit([3]))
    await asyncio.sleep(0.02)
    assert len(fn.calls) == 1
    second = asyncio.ensure_future(batcher.submit([4]))
    # ...and goes out as soon as as many requests as last time are queued.
    assert await asyncio.wait_for(asyncio.gather(first, second), 0.4) == [[30], [40]]
    assert fn.calls[1] == ([3, 4], False)


async def test_linger_is_bounded_by_max_wait(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    fn = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(
        fn, executor=pool, lanes=1, max_wait_ms=30, linger_window_s=5.0
    )
    await asyncio.gather(batcher.submit([1]), batcher.submit([2]))
    # The companion never comes: the request still goes out after the wait.
    assert await asyncio.wait_for(batcher.submit([3]), 2.0) == [30]
    assert fn.calls[-1] == ([3], False)
