"""Binding the loopback socket, announcing the URL, serving until a signal.

The socket is bound before anything is printed, so the URL on stdout always names a port
that listens (port 0 becomes a free port), and the daemon is asked for its health first,
so a UI never starts against nothing.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import webbrowser
from dataclasses import dataclass

import structlog
from libravdb_client import LibravdbError

from sidecar.endpoints import uvicorn_server
from sidecar.exit_status import EXIT_OK, EXIT_UNUSABLE
from sidecar.logging_setup import (
    configure_logging,
    finish_output,
    redact_in_logs,
    write_stdout_line,
)
from sidecar.ui.address import Address
from sidecar.ui.app import build_app
from sidecar.ui.cache import ReadCache
from sidecar.ui.context import UiContext
from sidecar.ui.daemon import DaemonDown, DaemonLink
from sidecar.ui.security import LOGIN_PATH, Guard

log = structlog.get_logger("libravdb.ui")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    address: Address
    endpoint: str
    auth_token: str | None
    namespaces: tuple[str, ...]  # empty: any namespace
    default_namespace: str
    open_browser: bool
    log_level: str


def _fail(message: str) -> int:
    print(f"libravdb ui: {message}", file=sys.stderr, flush=True)
    return EXIT_UNUSABLE


def _bind(address: Address) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.bind_host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: uvicorn writes a response's head and body apart, and
    # with Nagle's algorithm the body then waits for the client's delayed ACK (40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((address.bind_host, address.port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def _serve(options: ServeOptions, sock: socket.socket) -> int:
    import uvicorn

    ready = asyncio.Event()
    port = int(sock.getsockname()[1])
    guard = Guard(port=port, hosts=options.address.names(port))
    redact_in_logs(guard.token)
    link = DaemonLink(options.endpoint, options.auth_token)
    try:
        await link.call(lambda c: c.health())
    except (DaemonDown, LibravdbError) as exc:
        await link.close()
        return _fail(f"no daemon answers at {options.endpoint} ({exc})")
    ctx = UiContext(
        link=link,
        guard=guard,
        namespaces=options.namespaces,
        default_namespace=options.default_namespace,
        cache=ReadCache(),
    )
    base = f"http://{options.address.url_host}:{port}"
    url = f"{base}{LOGIN_PATH}?token={guard.token}"
    config = uvicorn.Config(
        build_app(ctx),
        log_level=options.log_level,
        access_log=False,  # the guard logs each request without its query string
        lifespan="off",
        log_config=None,  # uvicorn's own lines go to the JSON handler (logging_setup)
    )
    server = uvicorn_server(config, ready)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        # The URL is announced once the server answers and handles SIGTERM/SIGINT (it
        # installs its handlers before it starts): a caller that stops the UI as soon as
        # it reads the URL still gets a clean exit.
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if ready.is_set():
            write_stdout_line(url)
            log.info(
                "ui_serving",
                address=f"{base}/",
                daemon=options.endpoint,
                namespaces=list(options.namespaces) or "any",
            )
            if options.open_browser:
                # In a thread: a console browser may take over the terminal until it exits.
                asyncio.get_running_loop().run_in_executor(None, webbrowser.open, url)
        await serving
    finally:
        await link.close()
    return EXIT_OK


def serve(options: ServeOptions) -> int:
    try:
        sock = _bind(options.address)
    except OSError as exc:
        where = f"{options.address.url_host}:{options.address.port}"
        return _fail(f"cannot listen on {where}: {exc.strerror or exc}")
    sink = configure_logging(options.log_level)
    try:
        return asyncio.run(_serve(options, sock))
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        sock.close()
        finish_output(sink)
