"""What a console line means and how results are shown: commands (``method params`` or a
``.dot`` command), params as JSON or ``key=value`` pairs, fields of a result, and the
help each method's params give."""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TextIO

import msgspec
from libravdb_client import ProgressParams, RpcError

from protocol.catalog import all_methods
from sidecar.config import set_dotted


class InputError(ValueError):
    """A console line or ``call`` params that cannot be turned into a request."""


@dataclass(frozen=True)
class CallCommand:
    method: str
    params: Any = None


@dataclass(frozen=True)
class DotCommand:
    name: str
    arg: str = ""


Command = CallCommand | DotCommand


# -- parsing ------------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """A ``key=value`` value: JSON when it parses (``3``, ``true``, ``["a"]``, ``"a b"``),
    else the text itself; single quotes are shell-style quoting around either (``'a b'``,
    ``'"2.0"'``)."""
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_assignments(words: Iterable[str]) -> dict[str, Any]:
    """``["a=1", "b.c=x"]`` -> ``{"a": 1, "b": {"c": "x"}}``."""
    params: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise InputError(f"expected key=value or a JSON value, got {word!r}")
        part = set_dotted(params, key, parse_value(value))
        if part is not None:
            raise InputError(f"{key!r}: {part!r} is already set to a value")
    return params


def parse_params(text: str) -> Any:
    """Params text: empty (none), a JSON value, or ``key=value`` words."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        if "=" not in text or text[0] in "{[":
            raise InputError(f"params are not valid JSON: {exc}") from None
    return parse_assignments(split_words(text))


def split_words(text: str) -> list[str]:
    """Split ``key=value`` words at blanks outside quotes and brackets, so that JSON
    values keep their quotes: ``ids=["a", "b"] text="hello world"`` is two words,
    ``ids=["a", "b"]`` and ``text="hello world"`` (shell splitting would strip the quotes
    inside the list and break its JSON)."""
    words: list[str] = []
    buf: list[str] = []
    depth = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            buf.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch.isspace() and depth == 0:
            if buf:
                words.append("".join(buf))
                buf = []
            continue
        buf.append(ch)
    if quote:
        raise InputError(f"unterminated {quote} quote in params")
    if buf:
        words.append("".join(buf))
    return words


def parse_line(line: str) -> Command | None:
    """One console line; None for blank lines and ``#`` comments."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    head, _, rest = line.partition(" ")
    if head.startswith("."):
        return DotCommand(head, rest.strip())
    return CallCommand(head, parse_params(rest))


def field_at(value: Any, path: str) -> Any:
    """The part of a result at a dotted path (``a.b``, ``hits.0.text``); ``""`` = all."""
    for part in (p for p in path.split(".") if p):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise InputError(f"the result has no {part!r} at {path!r}")
    return value


# Methods that change nothing: asked again by themselves after a reconnect.
READ_ONLY_METHODS: Final = frozenset(
    {
        "health",
        "status",
        "initialize",
        "search",
        "search_text",
        "search_text_collections",
        "list_collection",
        "list_by_meta",
        "expand",
        "expand_summary",
        "embed",
        "summarize",
        "authored.list",
        "lifecycle.journal",
        "list_lifecycle_journal",
        "query_raw_session",
        "export_memory",
        "gating_scalar",
    }
)


# -- output -------------------------------------------------------------------------------


def format_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def format_progress(progress: ProgressParams) -> str:
    done = f"{progress.done}/{progress.total}" if progress.total is not None else str(progress.done)
    suffix = f" {progress.message}" if progress.message else ""
    return f"progress [{progress.token}]: {done}{suffix}"


def format_rpc_error(exc: RpcError) -> str:
    text = f"error {exc.code}: {exc.message}"
    if exc.data is not None:
        text += "\n" + format_json(exc.data)
    return text


def json_printer(out: TextIO, color: bool) -> Callable[[str], None]:
    """Print JSON; colored through pygments if asked, ``out`` is a terminal and it is installed."""

    def plain(text: str) -> None:
        print(text, file=out, flush=True)

    if not color or not out.isatty() or os.environ.get("NO_COLOR"):
        return plain
    try:
        pygments: Any = importlib.import_module("pygments")
        lexers: Any = importlib.import_module("pygments.lexers")
        from prompt_toolkit import print_formatted_text
        from prompt_toolkit.formatted_text import PygmentsTokens
    except ImportError:
        return plain
    lexer = lexers.JsonLexer()

    def colored(text: str) -> None:
        # pygments ends the token stream with the newline itself.
        print_formatted_text(PygmentsTokens(list(pygments.lex(text, lexer))), file=out, end="")

    return colored


# -- method metadata (from the protocol package) ------------------------------------------


def catalog() -> dict[str, Any]:
    try:
        return dict(all_methods())
    except Exception:  # a broken protocol module must not take the console down
        return {}


def param_fields(method: str) -> list[tuple[str, str]]:
    """``(wire name, type)`` of a method's params, when the protocol package defines it."""
    schema = catalog().get(method)
    kind = getattr(schema, "params", None)
    if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return []
    return [(field.encode_name, type_name(field.type)) for field in msgspec.structs.fields(kind)]


def type_name(kind: Any) -> str:
    name = kind.__name__ if isinstance(kind, type) else str(kind)
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", name)  # protocol.core.X -> X


def method_help(method: str) -> str:
    schema = catalog().get(method)
    if schema is None:
        return f"{method}: no description in this console's protocol package"
    lines = [f"{method}: {getattr(schema, 'summary', '')}"]
    fields = param_fields(method)
    lines += [f"  {name}: {kind}" for name, kind in fields] or ["  (no params)"]
    return "\n".join(lines)


# -- the console --------------------------------------------------------------------------
