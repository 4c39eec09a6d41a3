"""A mistyped option is refused by the sub-command it was given to: that sub-command's
usage, and the option it was probably meant to be. Every sub-command of `libravdb` and
`libravdbd`, nested ones included, is tried with a mistype of each of its long options."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Iterator

import pytest

from sidecar.cli import daemon_main, daemon_parser, tool_main, tool_parser
from tests.test_console import libravdb_argv


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command that takes no further sub-command, with the words that reach it."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


def _required(parser: argparse.ArgumentParser) -> list[str]:
    """Words that satisfy the command's required arguments, so that only the mistype is
    left to refuse."""
    words: list[str] = []
    for action in parser._actions:
        value = str(next(iter(action.choices))) if action.choices else "x"
        if not action.option_strings and action.nargs not in ("*", "?"):
            words.append(value)
        elif action.option_strings and action.required:
            words += [action.option_strings[0], value]
    return words


def _mistype(option: str) -> str:
    """``--force`` -> ``--forxce``: no option, no abbreviation argparse would take."""
    return option[:-1] + "x" + option[-1]


def _cases() -> list[tuple[str, tuple[str, ...], list[str], str]]:
    cases = []
    for prog, parser in (("libravdb", tool_parser()), ("libravdbd", daemon_parser())):
        for path, leaf in _leaves(parser, ()):
            for action in leaf._actions:
                for option in action.option_strings:
                    if option.startswith("--") and option != "--help":
                        cases.append((prog, path, _required(leaf), option))
    return cases


CASES = _cases()


def test_every_command_is_covered() -> None:
    commands = {(prog, path) for prog, path, _, _ in CASES}
    for expected in [
        ("libravdb", ("restore",)),
        ("libravdb", ("stats",)),
        ("libravdb", ("memory", "list")),
        ("libravdb", ("service", "install")),
        ("libravdbd", ("serve",)),
    ]:
        assert expected in commands
    assert len(CASES) > 60


@pytest.mark.parametrize(
    ("prog", "path", "required", "option"),
    CASES,
    ids=[f"{p} {' '.join(path)} {o}" for p, path, _, o in CASES],
)
def test_a_mistyped_option_names_its_command_and_the_option(
    prog: str,
    path: tuple[str, ...],
    required: list[str],
    option: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main = tool_main if prog == "libravdb" else daemon_main
    wrong = _mistype(option)
    with pytest.raises(SystemExit) as exited:
        main([*path, *required, wrong])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    command = " ".join((prog, *path))
    assert err.startswith(f"usage: {command} "), err
    assert err.rstrip().endswith(
        f"{command}: error: unrecognized arguments: {wrong}; did you mean {option}?"
    ), err


@pytest.mark.parametrize(
    ("args", "usage", "last"),
    [
        (
            ["restore", "X", "--forse"],
            "usage: libravdb restore [-h]",
            "libravdb restore: error: unrecognized arguments: --forse; did you mean --force?",
        ),
        (
            ["stats", "--namespce", "d"],
            "usage: libravdb stats [-h]",
            "libravdb stats: error: unrecognized arguments: --namespce d; did you mean "
            "--namespace?",
        ),
        (
            # a required option mistyped: the refusal is the missing one, the hint the same
            ["memory", "get", "--usr", "ana", "turns:ana", "m1"],
            "usage: libravdb memory get [-h]",
            "libravdb memory get: error: the following arguments are required: "
            "--user/--namespace; did you mean --user?",
        ),
        (
            ["memory", "list", "--nope"],  # nothing close: no guess
            "usage: libravdb memory list [-h]",
            "libravdb memory list: error: unrecognized arguments: --nope",
        ),
    ],
)
def test_the_issue_examples_as_processes(args: list[str], usage: str, last: str) -> None:
    done = subprocess.run([*libravdb_argv(), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(usage), done.stderr
    assert done.stderr.splitlines()[-1] == last
