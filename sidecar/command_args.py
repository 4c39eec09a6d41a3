"""Command-line arguments that several commands declare, declared once so that their
names, defaults and help read the same in every ``--help``."""

from __future__ import annotations

import argparse

ENDPOINT_HELP = "the daemon: unix:/path or tcp:host:port (default: the daemon's)"
LOG_LEVELS = ("debug", "info", "warning", "error")


def add_endpoint(parser: argparse.ArgumentParser, *, note: str = "") -> None:
    """``--endpoint``: which daemon to talk to; ``note`` adds what this command does when
    it does not answer."""
    parser.add_argument("--endpoint", help=f"{ENDPOINT_HELP}{'; ' + note if note else ''}")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` of a command that logs JSON lines on stderr (the MCP and UI servers)."""
    parser.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=list(LOG_LEVELS),
        help="stderr log level (default info; JSON lines)",
    )
