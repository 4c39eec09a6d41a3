"""Command lines: `libravdbd` (the daemon) and `libravdb` (console, one-shot calls, tools)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sidecar import SERVER_NAME, __version__
from sidecar.command_args import add_endpoint
from sidecar.config import ConfigError, load_settings
from sidecar.exit_status import EXIT_BROKEN_PIPE
from sidecar.ops.cli_parser import CliParser


def _serve_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the daemon (default)")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="speak JSON-RPC on stdin/stdout")
    where.add_argument("--socket", metavar="PATH", help="listen on a Unix socket at PATH")
    where.add_argument("--tcp", metavar="HOST:PORT", help="listen on loopback TCP (port 0 = any)")
    serve.add_argument("--data-dir", metavar="DIR", help="data directory (default ~/.clawdb/data)")
    serve.add_argument(
        "--store",
        metavar="URL",
        help="postgresql://... : a shared PostgreSQL + pgvector store (several daemons may "
        "serve one database); sqlite:DIR : the embedded store in DIR (the default, in "
        "--data-dir)",
    )
    serve.add_argument("--config", metavar="FILE", help="TOML settings file")
    serve.add_argument("--log-level", metavar="LEVEL", help="debug, info, warning, error")
    serve.add_argument(
        "--log-format",
        choices=["auto", "json", "text"],
        help="stderr log lines: json, text, or auto (text at a terminal; the default)",
    )
    serve.add_argument("--max-frame-bytes", type=int, metavar="N", help="request line size cap")


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {
        "data_dir": args.data_dir,
        "store.url": args.store,
        "config_file": args.config,
        "log_level": args.log_level,
        "log_format": args.log_format,
        "server.max_frame_bytes": args.max_frame_bytes,
    }
    if args.stdio:
        flags["server.transport"] = "stdio"
    elif args.socket:
        flags["server.transport"] = "socket"
        flags["server.endpoint"] = f"unix:{args.socket}"
    elif args.tcp:
        flags["server.transport"] = "socket"
        flags["server.endpoint"] = f"tcp:{args.tcp}"
    return flags


def _serve(args: argparse.Namespace) -> int:
    from sidecar.logging_setup import configure_logging, finish_output
    from sidecar.server.daemon import DaemonError, run_daemon

    try:
        settings = load_settings(_flags(args))
    except ConfigError as exc:
        print(f"{SERVER_NAME}: {exc}", file=sys.stderr)
        return 1
    sink = configure_logging(settings.log_level, fmt=settings.log_format)
    from sidecar.allocator import tune_allocator

    tune_allocator()
    try:
        return asyncio.run(run_daemon(settings))
    except DaemonError as exc:
        sink.flush()
        _print_stderr(f"{SERVER_NAME}: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        finish_output(sink)


# Everything the daemon and the tools create (store files, indexes, exports, sockets) is
# readable by its owner only: memories are personal data.
PRIVATE_UMASK = 0o077


def _print_stderr(line: str) -> None:
    """One line on stderr, unless nobody can read it."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _tool_commands(sub: Any) -> None:
    console = sub.add_parser("console", help="interactive JSON-RPC console")
    add_endpoint(console)
    call = sub.add_parser("call", help="one request; prints the result as JSON")
    call.add_argument("method")
    call.add_argument(
        "params",
        nargs="*",
        help="one JSON object, - (JSON from stdin), or key=value arguments",
    )
    call.add_argument("--raw", metavar="PATH", help="print this field of the result as text")
    add_endpoint(call)
    call.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    authored = sub.add_parser("authored", help="authored documents loaded in the daemon")
    authored.add_argument("action", choices=["list"], help="list: documents, tiers, sources")
    add_endpoint(authored)
    authored.add_argument("--json", action="store_true", help="print JSON instead of a table")
    for module in _command_modules():
        module.add_parser(sub)


# Commands that live in a module of their own. Each module has `COMMANDS` (the names it
# adds), `add_parser(sub)` and `run(args) -> int`; heavy imports wait for `run`.
_COMMAND_MODULES = (
    "sidecar.console_memory",
    "sidecar.mcp.command",
    "sidecar.ops.service",
    "sidecar.ops.doctor",
    "sidecar.ops.backup",
    "sidecar.ops.stats_report",
    "sidecar.ops.migrate",
    "sidecar.ui.command",
)


def _command_modules() -> list[Any]:
    import importlib

    return [importlib.import_module(name) for name in _COMMAND_MODULES]


def _maintenance_commands(sub: Any) -> None:
    def common(cmd: Any) -> None:
        cmd.add_argument(
            "--data-dir", metavar="DIR", help="data directory (default ~/.clawdb/data)"
        )
        cmd.add_argument("--config", metavar="FILE", help="TOML settings file")
        cmd.add_argument("--store", metavar="URL", help="a postgresql:// store (see serve)")

    reembed = sub.add_parser(
        "reembed", help="re-embed every record with the current model (daemon stopped)"
    )
    common(reembed)
    export = sub.add_parser("export", help="write the store as NDJSON (daemon stopped)")
    common(export)
    export.add_argument("-o", "--output", metavar="FILE", help="output file (default stdout)")
    export.add_argument("--collection", action="append", help="only this collection (repeat)")
    export.add_argument(
        "--user",
        metavar="NS",
        help="everything of one user or namespace: memories, history, guidance, dream "
        "entries and the collections of its sessions",
    )
    export.add_argument("--namespace", metavar="NS", help="the same as --user")
    export.add_argument("--no-vectors", action="store_true", help="omit vectors (smaller)")
    imp = sub.add_parser("import", help="load an NDJSON export (daemon stopped)")
    common(imp)
    imp.add_argument("file", help="the NDJSON file written by export")


def _run_maintenance(args: argparse.Namespace) -> int:
    from sidecar import tools

    try:
        settings = load_settings(
            {"data_dir": args.data_dir, "config_file": args.config, "store.url": args.store}
        )
    except ConfigError as exc:
        print(f"libravdb: {exc}", file=sys.stderr)
        return 1
    from sidecar.logging_setup import configure_logging

    configure_logging("warning")
    try:
        if args.command == "reembed":
            summary = tools.run_reembed(settings)
        elif args.command == "export":
            request = tools.ExportRequest(
                output=Path(args.output) if args.output else None,
                collections=args.collection,
                namespace=args.user or args.namespace,
                include_vectors=not args.no_vectors,
            )
            summary = tools.run_export(settings, request, sys.stdout)
        else:
            summary = tools.run_import(settings, Path(args.file))
    except tools.ToolError as exc:
        print(f"libravdb {args.command}: {exc}", file=sys.stderr)
        return 1
    print(summary, file=sys.stderr)
    return 0


def _run_tool(args: argparse.Namespace) -> int:
    from sidecar import console

    if args.command in ("reembed", "export", "import"):
        return _run_maintenance(args)
    if args.command == "console":
        return console.run_console(args.endpoint)
    if args.command == "authored":
        return console.run_authored_list(args.endpoint, as_json=args.json)
    for module in _command_modules():
        if args.command in module.COMMANDS:
            return int(module.run(args))
    if args.command == "call":
        return console.run_call(args.endpoint, args.method, args.params, args.timeout, raw=args.raw)
    raise AssertionError(args.command)


def _quiet_when_stdout_closes(command: Callable[[], int]) -> int:
    """Run a command whose reader may go away early (``libravdb stats | head -4``).

    Python ignores SIGPIPE, so a write to a pipe nobody reads raises BrokenPipeError
    wherever it happens, and the interpreter's last flush at exit would raise again: the
    command ends quietly instead, with SIGPIPE's status. Both streams are pointed at
    /dev/null first so that nothing left in their buffers is written at exit. Errors on
    the daemon's socket never get here: the client reports them as its own errors."""
    try:
        code = command()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                os.dup2(devnull, stream.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _print_version(name: str) -> int:
    print(f"{name} {__version__}")
    return 0


TOOL_EXIT_STATUS = (
    "exit status: 0 ok; 1 the daemon refused, a check failed or something named was not "
    "found; 2 no answer from the daemon, or unusable arguments; 3 (service status) the "
    f"daemon is not running; {EXIT_BROKEN_PIPE} the reader of stdout went away (| head)"
)


def daemon_parser() -> CliParser:
    parser = CliParser(prog="libravdbd", description="libravdb memory daemon")
    sub = parser.add_subparsers(dest="command")
    _serve_parser(sub)
    sub.add_parser("version", help="print the version")
    _tool_commands(sub)
    _maintenance_commands(sub)
    return parser


def tool_parser() -> CliParser:
    parser = CliParser(
        prog="libravdb", description="libravdb tools and console", epilog=TOOL_EXIT_STATUS
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _tool_commands(sub)
    _maintenance_commands(sub)
    sub.add_parser("version", help="print the version")
    return parser


def daemon_main(argv: Sequence[str] | None = None) -> int:
    """`libravdbd [serve ...] | version` and `python -m sidecar`."""
    os.umask(PRIVATE_UMASK)
    parser = daemon_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["serve", *argv]
    args = parser.parse_args(argv)
    if args.command == "version":
        return _quiet_when_stdout_closes(lambda: _print_version(SERVER_NAME))
    if args.command == "serve":
        return _serve(args)
    return _quiet_when_stdout_closes(lambda: _run_tool(args))


def tool_main(argv: Sequence[str] | None = None) -> int:
    """`libravdb console | call METHOD JSON | version`."""
    os.umask(PRIVATE_UMASK)
    args = tool_parser().parse_args(argv)
    if args.command == "version":
        return _quiet_when_stdout_closes(lambda: _print_version("libravdb"))
    return _quiet_when_stdout_closes(lambda: _run_tool(args))


def main() -> None:
    sys.exit(daemon_main())
