"""Model lifecycle: lazy load, background preload, idle unload, reference counting.

A :class:`ModelSlot` owns one loaded model object (an ONNX session bundle). Users take a lease
with :meth:`ModelSlot.lease` (a context manager, usable from any thread); the model is loaded on
first use and is never unloaded while a lease is held. :meth:`ModelSlot.unload_if_idle` drops the
model once it has been unused for ``idle_unload_s`` seconds (0 disables idle unload); the hub
calls it periodically.

States: ``unloaded`` (never loaded, or unloaded after idling), ``loading``, ``ready``, ``failed``
(with the reason). A failed load is retried on demand, but not more often than every
``retry_after_s`` seconds, so a broken asset does not cost a reload attempt on every request.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any, Generic, TypeVar

from sidecar.allocator import release_free_memory

from .errors import EngineError, ModelLoadError

T = TypeVar("T")


class ModelState(StrEnum):
    UNLOADED = "unloaded"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


class ModelSlot(Generic[T]):
    def __init__(
        self,
        name: str,
        loader: Callable[[], T],
        *,
        idle_unload_s: float = 0.0,
        retry_after_s: float = 30.0,
        closer: Callable[[T], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._loader = loader
        self._closer = closer
        self.idle_unload_s = max(0.0, float(idle_unload_s))
        self.retry_after_s = max(0.0, float(retry_after_s))
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._model: T | None = None
        self._state = ModelState.UNLOADED
        self._reason = ""
        self._error: EngineError | None = None
        self._failed_at = 0.0
        self._refs = 0
        self._last_used = clock()
        self.load_count = 0
        self.unload_count = 0
        self.use_count = 0
        self.last_load_seconds = 0.0
        self._preload_thread: threading.Thread | None = None

    # -- state ---------------------------------------------------------------------------------
    @property
    def state(self) -> ModelState:
        return self._state

    @property
    def reason(self) -> str:
        return self._reason

    @property
    def in_use(self) -> int:
        return self._refs

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return {
                "state": self._state.value,
                "reason": self._reason,
                "inUse": self._refs,
                "loads": self.load_count,
                "unloads": self.unload_count,
                "uses": self.use_count,
                "loadSeconds": round(self.last_load_seconds, 4),
                "idleSeconds": round(max(0.0, self._clock() - self._last_used), 3),
                "idleUnloadSeconds": self.idle_unload_s,
            }

    # -- loading -------------------------------------------------------------------------------
    def _acquire(self) -> T:
        with self._cond:
            while True:
                if self._state is ModelState.READY and self._model is not None:
                    self._refs += 1
                    self.use_count += 1
                    self._last_used = self._clock()
                    return self._model
                if self._state is ModelState.LOADING:
                    self._cond.wait()
                    continue
                if (
                    self._state is ModelState.FAILED
                    and self._error is not None
                    and self._clock() - self._failed_at < self.retry_after_s
                ):
                    raise self._error
                self._state = ModelState.LOADING
                self._reason = ""
                break
        # Load outside the lock so status() stays responsive; other acquirers wait on _cond.
        started = self._clock()
        model: T | None = None
        error: EngineError | None = None
        try:
            model = self._loader()
        except EngineError as exc:
            error = exc
        except Exception as exc:  # a loader bug or an unexpected runtime error: never crash
            error = ModelLoadError(f"{self.name}: unexpected error while loading: {exc!r}")
        if model is not None:  # a load leaves ~100 MB of freed buffers in the heap
            release_free_memory()
        with self._cond:
            self.last_load_seconds = self._clock() - started
            if error is not None or model is None:
                self._error = error or ModelLoadError(f"{self.name}: loader returned nothing")
                self._state = ModelState.FAILED
                self._reason = str(self._error)
                self._failed_at = self._clock()
                self._cond.notify_all()
                raise self._error
            self._model = model
            self._error = None
            self._state = ModelState.READY
            self.load_count += 1
            self._refs += 1
            self.use_count += 1
            self._last_used = self._clock()
            self._cond.notify_all()
            return model

    def _release(self) -> None:
        with self._cond:
            self._refs = max(0, self._refs - 1)
            self._last_used = self._clock()
            self._cond.notify_all()

    @contextlib.contextmanager
    def lease(self) -> Iterator[T]:
        """Hold the loaded model for the duration of the block (loads it if needed)."""
        model = self._acquire()
        try:
            yield model
        finally:
            self._release()

    def ensure_loaded(self) -> None:
        """Load now (blocking) if not loaded; raises the load error."""
        with self.lease():
            pass

    def preload_in_background(self) -> threading.Thread:
        """Start loading in a daemon thread; errors end up in ``state``/``reason``."""

        def run() -> None:
            with contextlib.suppress(EngineError):
                self.ensure_loaded()

        thread = threading.Thread(target=run, name=f"preload-{self.name}", daemon=True)
        thread.start()
        self._preload_thread = thread
        return thread

    # -- unloading -----------------------------------------------------------------------------
    def unload_if_idle(self) -> bool:
        """Unload when ready, unused (no lease) and idle for at least ``idle_unload_s``."""
        if self.idle_unload_s <= 0:
            return False
        with self._cond:
            if self._state is not ModelState.READY or self._refs > 0:
                return False
            if self._clock() - self._last_used < self.idle_unload_s:
                return False
            return self._unload_locked("idle")

    def unload(self) -> bool:
        """Unload now unless in use. Returns whether a model was dropped."""
        with self._cond:
            if self._state is not ModelState.READY or self._refs > 0:
                return False
            return self._unload_locked("requested")

    def _unload_locked(self, why: str) -> bool:
        model = self._model
        self._model = None
        self._state = ModelState.UNLOADED
        self._reason = f"unloaded ({why}); reloads on next use"
        self.unload_count += 1
        if model is not None and self._closer is not None:
            with contextlib.suppress(Exception):
                self._closer(model)
        return True

    def close(self) -> None:
        """Drop the model at shutdown, waiting briefly for leases to end."""
        # A preload still inside onnxruntime when the interpreter exits aborts the process
        # ("terminate called without an active exception"), so let it finish first.
        preload = self._preload_thread
        if preload is not None and preload is not threading.current_thread():
            preload.join(timeout=60.0)
        deadline = self._clock() + 5.0
        with self._cond:
            while self._refs > 0 and self._clock() < deadline:
                self._cond.wait(timeout=0.05)
            if self._state is ModelState.READY:
                self._unload_locked("shutdown")
