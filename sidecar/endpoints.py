"""Where a tool finds the daemon (its endpoint and its auth token), and how it says it
could not reach it (:func:`connect_failure`, the shared exit statuses).

The console, ``libravdb call`` and the other CLI commands, the MCP server, the UI and
the ops reports all reach a running daemon the way the daemon itself would be reached
with this environment: flags > ``LIBRAVDB_RPC_ENDPOINT`` > config file >
``unix:$HOME/.clawdb/run/libravdb.sock``, and the token of ``server.auth_token_file``
(``LIBRAVDB_AUTH_TOKEN_FILE``) when one is configured.

The tools that listen themselves (the UI, the MCP server over HTTP) listen on a loopback
address only, read from ``--http HOST:PORT`` by :func:`parse_loopback`, and serve it
with :func:`uvicorn_server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from libravdb_client import ConnectError, default_endpoint

from sidecar.exit_status import EXIT_NO_ANSWER

if TYPE_CHECKING:
    import socket

    import uvicorn


def resolve_endpoint(endpoint: str | None) -> str:
    """The explicit endpoint, else the one the daemon would use with this environment."""
    if endpoint:
        return endpoint
    try:
        from sidecar.config import load_settings

        return load_settings().resolved_endpoint
    except Exception:  # an unreadable config file: fall back to env / default
        return default_endpoint()


def resolve_auth_token() -> str | None:
    """The daemon's auth token when one is configured (``server.auth_token_file`` /
    ``LIBRAVDB_AUTH_TOKEN_FILE``): a tool authenticates as the daemon expects."""
    try:
        from sidecar.config import load_settings

        path = load_settings().server.auth_token_file.strip()
    except Exception:
        return None
    if not path:
        return None
    from sidecar.server.auth import load_token

    return load_token(path)


def connect_failure(exc: Exception, err: TextIO) -> int:
    """Say why the daemon did not answer (with a hint when it is not running)."""
    hint = ""
    if isinstance(exc, ConnectError):
        hint = "\nIs the daemon running? Start it with `libravdbd serve` or pass --endpoint."
    print(f"libravdb: {exc}{hint}", file=err, flush=True)
    return EXIT_NO_ANSWER


def parse_loopback(text: str, *, free_port: bool, why: str) -> tuple[str, int]:
    """``--http``'s (host, port): ``127.0.0.1:8765``, ``[::1]:8765``, ``localhost:8765``,
    the host lower-cased; port 0 (any free one) only with ``free_port``. Anything else, a
    host that is not loopback included, raises ValueError naming the problem; ``why``
    says why the tool serves loopback only."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"--http wants HOST:PORT (for example 127.0.0.1:8765), not {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--http port must be a number, not {port_text!r}") from None
    if free_port and not 0 <= port <= 65535:
        raise ValueError(f"--http port must be 0..65535 (0: any free port), not {port}")
    if not free_port and not 1 <= port <= 65535:
        raise ValueError(f"--http port must be 1..65535, not {port}")
    host = host.lower()
    if host != "localhost" and not _is_loopback_ip(host):
        raise ValueError(
            f"--http serves loopback only (127.0.0.1, ::1 or localhost), not {host!r}: {why}"
        )
    return host, port


def _is_loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def uvicorn_server(config: Any, started: asyncio.Event | None = None) -> uvicorn.Server:
    """A uvicorn server for ``config`` that sets ``started`` once it answers. uvicorn
    re-raises SIGTERM/SIGINT once it has shut down, which would end the process before
    the tool closes its daemon connection (and stops a daemon it started): this one
    does not, so the tool finishes its own shutdown and exits 0."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and started is not None:
                started.set()

    return Server(config)
