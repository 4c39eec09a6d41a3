"""``--http HOST:PORT``: the MCP server over streamable HTTP, on a loopback address only.

The memory holds a person's conversations and the endpoint has no authentication, so it
is never offered to the network: a host that is not loopback is refused before anything
is opened. Requests whose ``Host`` or ``Origin`` header names anything but a loopback
address are refused too (DNS rebinding: a web page must not reach it through a browser).
The session table is bounded (``http_sessions``).
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings

from sidecar.config import McpSettings
from sidecar.mcp.http_sessions import BoundedSessionManager
from sidecar.mcp.server import MemoryServer

MCP_PATH = "/mcp"
_LOOPBACK_NAMES = ("localhost",)


class NotLoopback(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class HttpAddress:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"


@dataclass(frozen=True, slots=True)
class HttpOptions:
    address: HttpAddress
    max_sessions: int
    idle_timeout_s: float

    @classmethod
    def from_settings(cls, address: HttpAddress, mcp: McpSettings) -> HttpOptions:
        return cls(address, mcp.http_max_sessions, mcp.http_session_idle_s)


def parse_http_address(text: str) -> HttpAddress:
    """``127.0.0.1:8765``, ``[::1]:8765`` or ``localhost:8765``; anything that is not a
    loopback address raises :class:`NotLoopback` (a ValueError naming the problem)."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"--http wants HOST:PORT (for example 127.0.0.1:8765), not {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--http port must be a number, not {port_text!r}") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"--http port must be 1..65535, not {port}")
    if host.lower() not in _LOOPBACK_NAMES:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise NotLoopback(
                f"--http serves loopback only (127.0.0.1, ::1 or localhost), not {host!r}: "
                "the MCP endpoint has no authentication"
            )
    return HttpAddress(host.lower(), port)


def _security(address: HttpAddress) -> TransportSecuritySettings:
    hosts = {"127.0.0.1", "localhost", "[::1]", address.url.split("//")[1].rsplit(":", 1)[0]}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{h}:*" for h in hosts),
        allowed_origins=sorted(f"http://{h}:*" for h in hosts),
    )


def http_app(server: MemoryServer, options: HttpOptions) -> Any:
    """The Starlette app: the MCP endpoint, served by a bounded session manager (what
    ``MCPServer.streamable_http_app`` builds, with the SDK's unbounded-by-default table
    replaced)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    manager = BoundedSessionManager(
        # The SDK exposes no other way to hand its low-level server to a session manager.
        server._lowlevel_server,
        security=_security(options.address),
        max_sessions=options.max_sessions,
        idle_timeout_s=options.idle_timeout_s,
    )
    return Starlette(
        routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))],
        lifespan=lambda _app: manager.run(),
    )


async def serve_http(server: MemoryServer, options: HttpOptions, log_level: str) -> None:
    import uvicorn

    class Uvicorn(uvicorn.Server):
        # uvicorn re-raises SIGTERM/SIGINT once it has shut down, which would kill the
        # process before the daemon connection is closed (and a daemon it started is
        # stopped): the shutdown is finished here instead, and the exit status is 0.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

    address = options.address
    config = uvicorn.Config(
        http_app(server, options),
        host=address.host,
        port=address.port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        # uvicorn's own logging config installs plain-text handlers ("INFO:     Started
        # server process") on its loggers; without it they reach the root logger, whose
        # handler writes the same JSON lines as the rest of the server (logging_setup).
        log_config=None,
    )
    await Uvicorn(config).serve()
