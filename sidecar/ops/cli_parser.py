"""The argument parser of ``libravdb`` and ``libravdbd``: a mistyped option is refused by
the (sub-)command it was given to, with that command's usage and its closest option.

Plain argparse hands the options a sub-command does not know back to the top-level
parser, which prints the top-level usage (``libravdb [-h] {console,call,...}``) and
suggests nothing: the user learns neither which command refused nor what it takes.
Sub-command parsers are made by ``add_parser`` with the parent's class, so every
sub-command, nested ones included (``memory list``), reports its own mistakes.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# How alike (difflib's ratio, dashes left out) a word and an option must be to be named:
# "forse"/"force" 0.8 and "usr"/"user" 0.86 are; "nope"/"scope" (0.67) is not.
CUTOFF = 0.75


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that refuses unknown arguments where they were given and
    names the option a mistyped one was probably meant to be."""

    # The words this parser was last given: a refusal for another reason (a required
    # option missing because it was mistyped) still points at the mistyped word.
    _given: tuple[str, ...] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        self._given = tuple(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        hint = did_you_mean(self._given, list(self._option_string_actions))
        super().error(f"{message}; {hint}" if hint else message)


def did_you_mean(words: Sequence[str], options: Sequence[str]) -> str:
    """ "did you mean --force?" for the first of ``words`` that looks like an option, is none
    of ``options`` (nor an abbreviation argparse accepts) and is close to one; else ""."""
    longs = [o for o in options if o.startswith("--")]
    for word in words:
        if word == "--":
            break  # what follows is positional by the user's own say
        if not word.startswith("-") or word == "-" or _is_number(word):
            continue
        name = word.partition("=")[0]
        if name in options or (name.startswith("--") and any(o.startswith(name) for o in longs)):
            continue
        pool = {o.lstrip("-"): o for o in (longs if name.startswith("--") else options)}
        close = difflib.get_close_matches(name.lstrip("-"), list(pool), n=1, cutoff=CUTOFF)
        if close:
            return f"did you mean {pool[close[0]]}?"
    return ""


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
