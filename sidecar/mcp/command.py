"""``libravdb mcp``: the memory as a Model Context Protocol server (a client of the daemon).

stdout belongs to the MCP protocol (stdio transport); logs and messages go to stderr.
Exit status 0 when the host closes the connection, 1 for bad options or when no daemon
answers and none can be started.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from sidecar.command_args import add_endpoint, add_log_level
from sidecar.exit_status import EXIT_FAILED, EXIT_OK

COMMANDS = ("mcp",)


def add_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "mcp",
        help="serve the memory to an MCP host (Claude Desktop, an IDE, ...) over stdio",
        description="Serve the memory as a Model Context Protocol server. Connects to the "
        "running daemon; when nothing answers at the default endpoint, starts the daemon "
        "there (detached, shared with every other client).",
    )
    add_endpoint(cmd, note="nothing is started when it does not answer")
    spawn = cmd.add_mutually_exclusive_group()
    spawn.add_argument(
        "--spawn",
        action="store_true",
        help="start a private daemon over stdio for --data-dir (its own directory: the "
        "daemon holds it while the server runs) instead of using the shared one",
    )
    spawn.add_argument(
        "--no-spawn",
        action="store_true",
        help="never start a daemon: fail when none answers",
    )
    cmd.add_argument("--data-dir", metavar="DIR", help="data directory of a daemon it starts")
    cmd.add_argument(
        "--namespace",
        default="default",
        metavar="NS",
        help="the memory namespace every tool works in (default: default)",
    )
    cmd.add_argument(
        "--session",
        metavar="SID",
        help="default session id of remember/recall (default: mcp-<start time, UTC>)",
    )
    cmd.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (loopback only)",
    )
    cmd.add_argument(
        "--http-max-sessions",
        type=int,
        metavar="N",
        help="--http: live sessions at most; past it the least recently used idle one is "
        "closed (default 32, mcp.http_max_sessions)",
    )
    cmd.add_argument(
        "--http-idle-timeout",
        type=float,
        metavar="S",
        help="--http: close a session idle this many seconds (default 300, "
        "mcp.http_session_idle_s)",
    )
    add_log_level(cmd)


def run(args: argparse.Namespace) -> int:
    from sidecar.config import ConfigError
    from sidecar.mcp.http import HttpOptions, parse_http_address
    from sidecar.mcp.tools import MemoryScope
    from sidecar.store.names import validate_name_part

    if args.spawn and not args.data_dir:
        # A private daemon holds its data directory's lock while the server runs: on the
        # shared (default) directory it would lock every other client out.
        return _fail(
            "--spawn needs --data-dir DIR (a data directory of its own: the default one is "
            "shared by every client); without --spawn the shared daemon is used or started"
        )
    try:
        http = None
        if args.http:
            http = HttpOptions.from_settings(
                parse_http_address(args.http),
                _settings(args.http_max_sessions, args.http_idle_timeout).mcp,
            )
        scope = MemoryScope(
            namespace=validate_name_part(args.namespace, "--namespace"),
            session_id=validate_name_part(args.session or _default_session(), "--session"),
        )
    except (ValueError, ConfigError) as exc:
        return _fail(str(exc))
    target = _target(args)
    return _serve(target, scope, http, args.log_level)


def _settings(max_sessions: int | None, idle_s: float | None) -> Any:
    """The settings (flags > environment > config file > defaults) for the MCP keys."""
    from sidecar.config import load_settings

    return load_settings({"mcp.http_max_sessions": max_sessions, "mcp.http_session_idle_s": idle_s})


def _default_session() -> str:
    return "mcp-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _target(args: argparse.Namespace) -> Any:
    from sidecar.endpoints import resolve_auth_token, resolve_endpoint
    from sidecar.mcp.bridge import DaemonTarget

    if args.spawn:
        mode = "always"
    elif args.no_spawn or args.endpoint:
        # A named endpoint is a daemon the user means: starting another one elsewhere
        # would serve a different memory without a word.
        mode = "never"
    else:
        mode = "auto"
    return DaemonTarget(
        endpoint=resolve_endpoint(args.endpoint),
        spawn=mode,
        data_dir=os.path.expanduser(args.data_dir) if args.data_dir else None,
        auth_token=resolve_auth_token(),
    )


def _serve(target: Any, scope: Any, http: Any, log_level: str) -> int:
    import anyio
    import structlog

    from sidecar.logging_setup import configure_logging, finish_output
    from sidecar.mcp.bridge import DaemonBridge
    from sidecar.mcp.launcher import DaemonUnavailable
    from sidecar.mcp.server import build_server

    sink = configure_logging(log_level)

    async def main() -> int:
        bridge = DaemonBridge(target)
        try:
            await bridge.open()
        except DaemonUnavailable as exc:
            await bridge.close()
            return _fail(str(exc))
        try:
            server = build_server(bridge, scope)
            structlog.get_logger("libravdb.mcp").info(
                "mcp_serving",
                daemon=bridge.describe,
                namespace=scope.namespace,
                session=scope.session_id,
                transport="stdio" if http is None else http.address.url,
            )
            if http is None:
                await server.run_stdio_async()
            else:
                from sidecar.mcp.http import serve_http

                await serve_http(server, http, log_level)
        finally:
            await bridge.close()
        return EXIT_OK

    try:
        return anyio.run(main)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        finish_output(sink)


def _fail(message: str) -> int:
    print(f"libravdb mcp: {message}", file=sys.stderr, flush=True)
    return EXIT_FAILED
