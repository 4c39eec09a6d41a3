"""Daemon lifecycle: start services, bind, announce, serve, drain, close."""

from __future__ import annotations

import asyncio
import signal

import structlog

from sidecar import __version__
from sidecar.api import build_registry
from sidecar.app import App
from sidecar.config import Settings
from sidecar.errors import StartupError
from sidecar.logging_setup import write_stdout_line
from sidecar.server.auth import AuthConfigError, load_token
from sidecar.server.connections import ConnectionManager
from sidecar.server.dispatch import Dispatcher
from sidecar.server.listeners import (
    Endpoint,
    EndpointError,
    Listener,
    open_listener,
    parse_endpoint,
    refuse_live_socket,
    serve_stdio,
)
from sidecar.services import install_services

log = structlog.get_logger(__name__)


class DaemonError(Exception):
    """A startup failure: printed as one line on stderr, exit code 1."""


def _endpoint(settings: Settings, *, remote: bool) -> Endpoint | None:
    """Where to listen (None: stdio), checked before the store opens."""
    if settings.server.transport == "stdio":
        return None
    try:
        endpoint = parse_endpoint(settings.resolved_endpoint, allow_remote=remote)
        if endpoint.kind == "unix":
            refuse_live_socket(endpoint.path)
    except EndpointError as exc:
        raise DaemonError(str(exc)) from exc
    return endpoint


async def run_daemon(settings: Settings) -> int:
    app = App(settings)
    token = None
    if settings.server.auth_token_file.strip():
        try:
            token = load_token(settings.server.auth_token_file)
        except AuthConfigError as exc:
            raise DaemonError(str(exc)) from exc
    manager = ConnectionManager(app, Dispatcher(app, build_registry()), auth_token=token)
    max_frame = settings.server.max_frame_bytes
    endpoint = _endpoint(settings, remote=token is not None)

    try:
        install_services(app)
        await app.start()
    except StartupError as exc:
        await app.close()
        raise DaemonError(str(exc)) from exc
    except Exception as exc:  # a bug or an unforeseen failure: still one line, exit 1
        log.exception("startup_failed")
        await app.close()  # waits for a model load in flight: exiting inside one aborts
        raise DaemonError(f"startup failed: {type(exc).__name__}: {exc}") from exc

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, app.request_shutdown, signal.Signals(sig).name)

    listener: Listener | None = None
    stdio_task: asyncio.Task[None] | None = None
    try:
        if endpoint is not None:
            try:
                listener = await open_listener(endpoint, manager, max_frame)
            except (EndpointError, OSError) as exc:
                raise DaemonError(f"cannot listen on {settings.resolved_endpoint}: {exc}") from exc
            app.endpoint = listener.announce
            app.transports = [endpoint.kind]
            if not write_stdout_line(listener.announce):
                log.warning("endpoint_line_unwritable", endpoint=listener.announce)
        else:
            app.endpoint = "stdio"
            app.transports = ["stdio"]
            stdio_task = asyncio.create_task(serve_stdio(manager, max_frame))
            stdio_task.add_done_callback(lambda _t: app.request_shutdown("stdin closed"))
        log.info(
            "daemon_ready",
            endpoint=app.endpoint,
            version=__version__,
            pid=app.pid,
            data_dir=str(settings.data_path),
            store=settings.store_display,
            startup_ms=round(app.uptime_s() * 1000, 1),
        )
        await app.shutdown_requested.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if listener is not None:
            listener.server.close()  # stop accepting before draining
        await manager.drain(settings.server.shutdown_grace_s)
        if stdio_task is not None and not stdio_task.done():
            stdio_task.cancel()
        await app.close()
        if listener is not None:
            await listener.close()
        log.info("daemon_stopped", uptime_s=round(app.uptime_s(), 3))
    if app.failure:  # a component failed after start (App.fail): one line, exit 1
        raise DaemonError(app.failure)
    return 0
