"""``libravdb ui``: the memory browser, a local web app against the running daemon.

stdout's first line is the URL to open, the session token included; logs are JSON lines
on stderr. Exit status 0 when stopped (Ctrl-C, SIGTERM); 2 when the arguments are unusable
(a non-loopback ``--http``, a port in use) or no daemon answers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sidecar.command_args import add_endpoint, add_log_level
from sidecar.exit_status import EXIT_UNUSABLE

COMMANDS = ("ui",)


def add_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "ui",
        help="browse, search, correct and forget memories in a web browser (loopback only)",
        description="Serve the memory browser on loopback and print its URL (with the "
        "session token) as the first line on stdout. It is a client of the running daemon.",
    )
    add_endpoint(cmd)
    cmd.add_argument(
        "--http",
        metavar="HOST:PORT",
        default="127.0.0.1:0",
        help="where to listen (loopback only; default 127.0.0.1 on a free port)",
    )
    cmd.add_argument("--open", action="store_true", help="open the URL in a web browser")
    which = cmd.add_mutually_exclusive_group()
    which.add_argument(
        "--namespace",
        "--user",
        dest="namespace",
        action="append",
        metavar="NS",
        help="a namespace to browse (repeat for more; the first is shown first; default: default)",
    )
    which.add_argument(
        "--all-namespaces",
        action="store_true",
        help="browse any namespace of the daemon (the UI then asks which)",
    )
    add_log_level(cmd)


def run(args: argparse.Namespace) -> int:
    from sidecar.endpoints import resolve_auth_token, resolve_endpoint
    from sidecar.store.names import validate_name_part
    from sidecar.ui.address import parse_address
    from sidecar.ui.server import ServeOptions, serve

    try:
        address = parse_address(args.http)
        namespaces = tuple(
            dict.fromkeys(
                validate_name_part(ns, "--namespace") for ns in args.namespace or ["default"]
            )
        )
    except ValueError as exc:
        print(f"libravdb ui: {exc}", file=sys.stderr, flush=True)
        return EXIT_UNUSABLE
    options = ServeOptions(
        address=address,
        endpoint=resolve_endpoint(args.endpoint),
        auth_token=resolve_auth_token(),
        namespaces=() if args.all_namespaces else namespaces,
        default_namespace=namespaces[0] if not args.all_namespaces else "default",
        open_browser=args.open,
        log_level=args.log_level,
    )
    return serve(options)
