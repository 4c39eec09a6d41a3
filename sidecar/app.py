"""The application: settings, services (store, engines), lifecycle and bookkeeping.

Services are registered by type so handlers can ask for what they need
(``ctx.app.service(Store)``) without the server knowing every component.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Protocol, TypeVar, runtime_checkable

import structlog

from protocol.core import ComponentState
from sidecar.config import Settings
from sidecar.errors import RpcError
from sidecar.stats import MethodStats

log = structlog.get_logger(__name__)
T = TypeVar("T")


@runtime_checkable
class Component(Protocol):
    """A service with a lifecycle that contributes to health and status."""

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def states(self) -> dict[str, ComponentState]: ...

    async def counts(self) -> dict[str, int]: ...


@runtime_checkable
class Probed(Protocol):
    """A component whose state depends on something outside the daemon (a database
    server): asked before ``health`` and ``status`` report it."""

    async def probe(self) -> None: ...


class ServiceUnavailable(RpcError):
    pass


class App:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pid = os.getpid()
        self.started_monotonic = time.monotonic()
        self.endpoint = ""
        self.transports: list[str] = []
        self.stats = MethodStats()
        self.open_connections = 0
        self.inflight_requests = 0  # executing now, all connections (the dispatcher counts)
        self._services: dict[type, object] = {}
        self._components: list[Component] = []
        self._closing = False
        self._shutdown_requested: asyncio.Event | None = None
        # why the daemon must exit 1 (a component failed after start: ``fail``)
        self.failure = ""

    # -- services -----------------------------------------------------------------
    def provide(self, kind: type[T], instance: T) -> None:
        self._services[kind] = instance
        if isinstance(instance, Component):
            self._components.append(instance)

    def service(self, kind: type[T]) -> T:
        instance = self._services.get(kind)
        if instance is None:
            raise ServiceUnavailable(f"{kind.__name__} is not available in this daemon")
        assert isinstance(instance, kind)
        return instance

    def maybe_service(self, kind: type[T]) -> T | None:
        instance = self._services.get(kind)
        return instance if isinstance(instance, kind) else None

    # -- lifecycle ----------------------------------------------------------------
    @property
    def shutdown_requested(self) -> asyncio.Event:
        if self._shutdown_requested is None:
            self._shutdown_requested = asyncio.Event()
        return self._shutdown_requested

    def request_shutdown(self, reason: str) -> None:
        if not self.shutdown_requested.is_set():
            log.info("shutdown_requested", reason=reason)
            self.shutdown_requested.set()

    def fail(self, message: str) -> None:
        """A component can no longer serve (a store whose page check, run beside the
        start, found its database damaged): shut down, then exit 1 printing ``message``,
        the line a start-up failure prints (event-loop thread)."""
        if not self.failure:
            self.failure = message
        self.request_shutdown("component failed")

    async def start(self) -> None:
        for component in self._components:
            await component.start()
            log.info("component_started", component=component.name)

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        for component in reversed(self._components):
            try:
                await component.close()
                log.info("component_closed", component=component.name)
            except Exception:
                log.exception("component_close_failed", component=component.name)

    @property
    def closing(self) -> bool:
        """True from the moment shutdown is requested: new work is refused while draining."""
        requested = self._shutdown_requested
        return self._closing or (requested is not None and requested.is_set())

    # -- reporting ----------------------------------------------------------------
    def uptime_s(self) -> float:
        return time.monotonic() - self.started_monotonic

    def component_states(self) -> dict[str, ComponentState]:
        states: dict[str, ComponentState] = {}
        for component in self._components:
            states.update(component.states())
        return states

    async def probe(self) -> None:
        """Refresh the states that depend on the world outside (each probe is bounded)."""
        for component in self._components:
            if isinstance(component, Probed):
                await component.probe()

    async def record_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for component in self._components:
            counts.update(await component.counts())
        return counts
