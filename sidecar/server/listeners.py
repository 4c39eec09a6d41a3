"""Endpoints: Unix socket (0600 in a 0700 directory), loopback TCP, and stdio."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import stat
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import structlog

from sidecar.server.connections import ConnectionManager
from sidecar.server.framing import FrameReader, stream_limit

log = structlog.get_logger(__name__)


class EndpointError(Exception):
    """The endpoint is malformed, unsafe, or already served by a live daemon."""


@dataclass(frozen=True)
class Endpoint:
    kind: str  # "unix" or "tcp"
    path: str = ""
    host: str = ""
    port: int = 0


def parse_endpoint(text: str, *, allow_remote: bool = False) -> Endpoint:
    """``unix:/path`` or ``tcp:host:port``; a non-loopback host only with ``allow_remote``
    (an auth token is configured)."""
    raw = text.strip()
    if raw.startswith("unix:"):
        path = raw[len("unix:") :].strip()
        if not path:
            raise EndpointError("unix endpoint requires a socket path")
        return Endpoint("unix", path=str(Path(path).expanduser().absolute()))
    if raw.startswith("tcp:"):
        hostport = raw[len("tcp:") :].strip()
        host, sep, port_text = hostport.rpartition(":")
        if not sep or not host:
            raise EndpointError(f"tcp endpoint must be tcp:host:port, got {raw!r}")
        host = host.strip("[]")
        try:
            port = int(port_text)
        except ValueError as exc:
            raise EndpointError(f"tcp endpoint port must be a number, got {port_text!r}") from exc
        if not 0 <= port <= 65535:
            raise EndpointError(f"tcp endpoint port {port} is out of range")
        if not _is_loopback(host) and not allow_remote:
            raise EndpointError(
                f"tcp endpoint host {host!r} is not a loopback address; without an auth "
                "token (server.auth_token_file) the daemon only listens on 127.0.0.1, ::1 "
                "or localhost"
            )
        return Endpoint("tcp", host=host, port=port)
    raise EndpointError(
        f"unsupported RPC endpoint {raw!r}; expected tcp:host:port or unix:/path/to/socket"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _peer_pid(probe: socket.socket) -> int | None:
    """The pid of the process listening on a connected Unix socket (Linux), else None."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        creds = probe.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    pid: int = struct.unpack("3i", creds)[0]
    return pid or None


def refuse_live_socket(path: str) -> None:
    """Refuse to start when a daemon already answers on ``path``. Checked before the store
    opens: that daemon also holds the data directory, and "in use by process N" would name
    a process the user may never have started (``libravdb mcp`` or the OpenClaw plugin
    start the shared daemon)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return
    else:
        pid = _peer_pid(probe)
    finally:
        probe.close()
    who = f"another daemon (process {pid})" if pid else "another daemon"
    raise EndpointError(
        f"{who} is already serving on unix:{path}, and every client (libravdb, libravdb "
        "mcp, the OpenClaw plugin) can use it; to run this one instead, stop it first "
        "(libravdb call shutdown), or choose another --socket path"
    )


def prepare_socket_path(path: str) -> None:
    """Create the private parent directory and clear a stale socket; refuse a live one."""
    target = Path(path)
    parent = target.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
    else:
        mode = stat.S_IMODE(parent.stat().st_mode)
        if mode & 0o077:
            # An existing directory is the user's choice (it may be $HOME or the working
            # directory): never change it. The socket file itself is still 0600.
            log.warning("socket_directory_not_private", directory=str(parent), mode=f"{mode:04o}")
    if os.path.lexists(path):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode):
            raise EndpointError(f"{path} exists and is not a socket; refusing to replace it")
        refuse_live_socket(path)
        log.info("stale_socket_removed", path=path)
        os.unlink(path)


class Listener:
    """A bound socket endpoint. ``announce`` is the line printed on stdout."""

    def __init__(self, server: asyncio.Server, announce: str, socket_path: str | None) -> None:
        self.server = server
        self.announce = announce
        self.socket_path = socket_path

    async def close(self) -> None:
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), timeout=1.0)
        if self.socket_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)


async def open_listener(endpoint: Endpoint, manager: ConnectionManager, max_frame: int) -> Listener:
    limit = stream_limit(max_frame)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        def on_close() -> None:
            writer.close()

        await manager.serve(FrameReader(reader, max_frame), write, on_close)

    if endpoint.kind == "unix":
        prepare_socket_path(endpoint.path)
        old_umask = os.umask(0o177)  # the socket file is born 0600
        try:
            server = await asyncio.start_unix_server(on_client, path=endpoint.path, limit=limit)
        finally:
            os.umask(old_umask)
        os.chmod(endpoint.path, 0o600)
        return Listener(server, f"unix:{endpoint.path}", endpoint.path)

    server = await asyncio.start_server(
        on_client, host=endpoint.host, port=endpoint.port, limit=limit
    )
    sockname = server.sockets[0].getsockname()
    host = sockname[0]
    shown = f"[{host}]" if ":" in host else host
    return Listener(server, f"tcp:{shown}:{sockname[1]}", None)


async def serve_stdio(manager: ConnectionManager, max_frame: int) -> None:
    """Serve one connection on stdin/stdout until stdin closes."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=stream_limit(max_frame))
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, sys.stdout
        )
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)

        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

    except (ValueError, OSError):
        # stdout is a regular file (not a pipe): write synchronously.
        async def write(data: bytes) -> None:
            out.write(data)
            out.flush()

    await manager.serve(FrameReader(reader, max_frame), write, lambda: None, trusted=True)
