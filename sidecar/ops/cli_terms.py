"""The command line's words for the daemon's: its refusals phrased in the flags the user
typed, and times given as ISO 8601 as well as epoch milliseconds.

The daemon speaks of wire fields (``namespace, userId or sessionId is required``,
``Expected `int` <= 500 - at `$.limit```) because its clients send wire fields; a shell
user sent ``--user`` and ``--limit``. Each command maps the fields it sends to the flags
they came from; the daemon's own messages stay as they are.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta

# msgspec's validation errors, as the dispatcher forwards them:
# "invalid params for memory.list: Expected `int` <= 500 - at `$.limit`"
_VALIDATION = re.compile(
    r"^(?:invalid params for [\w.]+: )?(?P<what>.+?) - at `\$\.(?P<path>[^`]*)`$"
)
_MISSING = re.compile(r"^(?:invalid params for [\w.]+: )?Object missing required field `(\w+)`")
_BOUND = re.compile(r"^Expected `(?:int|float)` (?P<op><=|>=|<|>) (?P<bound>\S+)$")
_LENGTH = re.compile(r"^Expected `(?P<type>str|array|object)` of length (?P<op><=|>=) (?P<n>\d+)$")
_TYPE = re.compile(r"^Expected `(?P<want>\w+)`, got `(?P<got>\w+)`$")
# "namespace, userId or sessionId is required", "collection and id are required"
_REQUIRED = re.compile(r"^(?P<names>[\w ,]+?) (?P<verb>is|are) required$")
_OPS = {"<=": "at most", ">=": "at least", "<": "less than", ">": "more than"}
_TYPES = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false"}
_UNITS = {"str": "characters", "array": "values", "object": "entries"}


def in_flag_terms(message: str, flags: Mapping[str, str]) -> str:
    """``message`` from the daemon with the wire fields in ``flags`` named as flags; a
    message that names none of them is returned unchanged."""
    if match := _MISSING.match(message):
        flag = flags.get(match.group(1))
        return f"{flag} is required" if flag else message
    if match := _VALIDATION.match(message):
        field = match.group("path").split(".")[0].split("[")[0]
        flag = flags.get(field)
        return f"{flag} {_requirement(match.group('what'))}" if flag else message
    if match := _REQUIRED.match(message):
        names = [n for n in re.split(r",\s*|\s+or\s+|\s+and\s+", match.group("names")) if n]
        if not all(n in flags for n in names):
            return message
        named = list(dict.fromkeys(flags[n] for n in names))  # namespace and userId: --user
        joiner = " and " if " and " in match.group("names") else " or "
        verb = "are" if joiner == " and " and len(named) > 1 else "is"
        return f"{joiner.join(named)} {verb} required"
    head, sep, rest = message.partition(" ")
    if sep and head in flags:  # "namespace is 300 bytes; ...", "query must not be blank"
        return f"{flags[head]} {rest}"
    return message


def _requirement(what: str) -> str:
    """msgspec's "Expected ..." as what the flag must be."""
    if match := _BOUND.match(what):
        return f"must be {_OPS[match.group('op')]} {match.group('bound')}"
    if match := _LENGTH.match(what):
        unit = _UNITS[match.group("type")]
        return f"must be {_OPS[match.group('op')]} {match.group('n')} {unit} long"
    if match := _TYPE.match(what):
        return f"must be {_TYPES.get(match.group('want'), match.group('want'))}"
    return f"is invalid: {what[:1].lower()}{what[1:]}"


def epoch_ms(text: str, *, end_of_day: bool = False) -> int:
    """A time given on the command line: epoch milliseconds (``1785542400000``) or ISO 8601
    (``2026-08-01``, ``2026-08-01T09:30``, ``2026-08-01T09:30:00+02:00``, ``...Z``; UTC
    when no offset is given). A date alone is its first millisecond, or with
    ``end_of_day`` its last (``--until 2026-08-31`` keeps all of the 31st)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            day = date.fromisoformat(text)
            moment = datetime.combine(day, time(), tzinfo=UTC)
            if end_of_day:
                return _ms(moment + timedelta(days=1)) - 1
            return _ms(moment)
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO 8601 date or time (2026-08-01, 2026-08-01T09:30Z) "
            "nor epoch milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _ms(moment)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def since_ms(text: str) -> int:
    """``--since``: a date alone starts at its first millisecond (UTC)."""
    return epoch_ms(text)


def until_ms(text: str) -> int:
    """``--until``: a date alone ends at its last millisecond (UTC)."""
    return epoch_ms(text, end_of_day=True)
