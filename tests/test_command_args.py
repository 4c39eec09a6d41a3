"""Arguments several commands share read the same in every command (sidecar/command_args.py)."""

from __future__ import annotations

import argparse

import pytest

from sidecar.cli import tool_parser
from sidecar.command_args import ENDPOINT_HELP, LOG_LEVELS, add_endpoint, add_log_level


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser, by its path ("memory list")."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = sub
                out.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return out


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_every_endpoint_option_reads_the_same() -> None:
    commands = _subparsers(tool_parser())
    with_endpoint: dict[str, argparse.Action] = {}
    for name, sub in commands.items():
        action = _option(sub, "--endpoint")
        if action is not None:
            with_endpoint[name] = action
    # the console, one call, the memory browser, the MCP server, doctor, stats, memory ...
    assert {"console", "call", "ui", "mcp", "doctor", "stats"} <= set(with_endpoint)
    for name, action in with_endpoint.items():
        assert action.help is not None
        if name.startswith("service"):  # the service's status asks the unit's daemon
            continue
        assert action.help.startswith(ENDPOINT_HELP), name


def test_log_level_is_lowercased_and_checked() -> None:
    parser = argparse.ArgumentParser()
    add_endpoint(parser, note="nothing is started")
    add_log_level(parser)
    args = parser.parse_args(["--log-level", "DEBUG", "--endpoint", "tcp:127.0.0.1:1"])
    assert args.log_level == "debug" and args.endpoint == "tcp:127.0.0.1:1"
    assert parser.parse_args([]).log_level == "info"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
    level = _option(parser, "--log-level")
    assert level is not None and tuple(level.choices or ()) == LOG_LEVELS
    help_text = parser.format_help()
    assert "nothing is started" in help_text
