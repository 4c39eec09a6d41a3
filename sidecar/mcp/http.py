"""``--http HOST:PORT``: the MCP server over streamable HTTP, on a loopback address only.

The memory holds a person's conversations and the endpoint has no authentication, so it
is never offered to the network: a host that is not loopback is refused before anything
is opened. Requests whose ``Host`` or ``Origin`` header names anything but a loopback
address are refused too (DNS rebinding: a web page must not reach it through a browser).
The session table is bounded (``http_sessions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings

from sidecar.config import McpSettings
from sidecar.endpoints import parse_loopback, uvicorn_server
from sidecar.mcp.http_sessions import BoundedSessionManager
from sidecar.mcp.server import MemoryServer

MCP_PATH = "/mcp"


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
    """``127.0.0.1:8765``, ``[::1]:8765`` or ``localhost:8765``; anything else, a host
    that is not loopback included, raises ValueError naming the problem."""
    return HttpAddress(
        *parse_loopback(text, free_port=False, why="the MCP endpoint has no authentication")
    )


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
    await uvicorn_server(config).serve()
