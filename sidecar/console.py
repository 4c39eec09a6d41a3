"""The debug console: ``libravdb console`` (a REPL) and ``libravdb call`` (one request).

Both talk to a running daemon through the Python client (``libravdb_client``); the
endpoint defaults to the daemon's own (flags > ``LIBRAVDB_RPC_ENDPOINT`` > config file >
``unix:$HOME/.clawdb/run/libravdb.sock``).

Console input, one request per line::

    status                              no params
    search_text {"collection": "c", "text": "hi", "k": 3}
    search_text collection=c text="hello world" k=3 filter.kind=note ids=["a", "b"]
    .help [METHOD]   .methods   .timeout [SECONDS|none]   .reconnect   .raw PATH   .quit

``key=value`` values are read as JSON when they parse (``k=3``, ``flag=true``,
``ids=["a", "b"]``, ``text="two words"``) and as strings otherwise (``text='two
words'``: single quotes group words, as in a shell); dotted keys build nested objects.
Words are split at blanks outside quotes and brackets. ``.raw PATH`` prints one field of
the last result as plain text (``.raw systemPromptAddition``: the rendered memory with
its line breaks). When the daemon restarts, the console reconnects by itself: a read
method is asked again, a write is not repeated (it may have happened).

``libravdb call METHOD [PARAMS...]``: PARAMS is one JSON value, ``-`` (JSON read from
stdin), or any number of ``key=value`` arguments; ``--raw PATH`` prints that field of the
result as plain text instead of the JSON.
Results are printed as indented JSON on stdout; errors as ``error CODE: MESSAGE`` on
stderr; ``$/progress`` notifications on stderr. With stdin not a terminal the console
reads commands line by line and prints nothing but results and errors.

Exit status (both commands): 0 success; 1 the daemon answered with an error (for a piped
console: at least one command failed); 2 no answer (cannot connect, connection lost,
timeout, malformed reply) or unusable input to ``call``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from libravdb_client import (
    Client,
    LibravdbError,
    ProgressParams,
    RpcError,
    RpcTimeout,
)

from sidecar.console_input import (
    READ_ONLY_METHODS,
    CallCommand,
    DotCommand,
    InputError,
    catalog,
    field_at,
    format_json,
    format_progress,
    format_rpc_error,
    json_printer,
    method_help,
    param_fields,
    parse_assignments,
    parse_line,
    parse_params,
)
from sidecar.endpoints import connect_failure, resolve_auth_token, resolve_endpoint
from sidecar.exit_status import EXIT_NO_ANSWER, EXIT_OK, EXIT_RPC_ERROR

if TYPE_CHECKING:
    from prompt_toolkit.completion import CompleteEvent, Completion
    from prompt_toolkit.document import Document

PROMPT: Final = "libravdb> "
HISTORY_FILE: Final = "console_history"

DOT_COMMANDS: Final[dict[str, str]] = {
    ".help": ".help [METHOD]          this help, or a method's params",
    ".methods": ".methods                the daemon's methods",
    ".timeout": ".timeout [SECONDS|none] show or set the per-call timeout",
    ".reconnect": ".reconnect              open a new connection",
    ".raw": ".raw PATH               print a field of the last result raw (e.g. "
    "systemPromptAddition)",
    ".quit": ".quit                   leave (also .exit or Ctrl-D)",
    ".exit": "",
}


class ConnectionLost(Exception):
    """A piped console lost its connection: stop with exit status 2."""


@dataclass(eq=False)
class Console:
    """Executes console lines against one client; the prompt_toolkit loop lives outside.
    Connects when made."""

    endpoint: str
    _: KW_ONLY
    timeout: float | None
    out: TextIO
    err: TextIO
    interactive: bool
    methods: list[str] = field(default_factory=list, init=False)
    server: str = field(default="", init=False)
    failures: int = field(default=0, init=False)
    last_result: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.print_json = json_printer(self.out, color=self.interactive)
        self.client = self._open()

    def _open(self) -> Client:
        """Connect and learn the method list (raises ConnectError/LibravdbError)."""
        client = Client(
            self.endpoint,
            timeout=self.timeout,
            on_notification=self._notification,
            auth_token=resolve_auth_token(),
        )
        try:
            client.open()
            try:
                info = client.initialize()
                self.methods = sorted(info.methods)
                self.server = f"{info.server_info.name} {info.server_info.version}"
            except RpcError:  # a daemon without `initialize`: fall back to what we know
                self.methods = sorted(catalog())
                self.server = "unknown daemon"
        except BaseException:
            client.close()
            raise
        return client

    def close(self) -> None:
        self.client.close()

    def banner(self) -> str:
        return (
            f"Connected to {self.server} at {self.endpoint} ({len(self.methods)} methods).\n"
            "Type a method name and params (Tab completes), .help for help, .quit to leave."
        )

    def say(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def _notification(self, method: str, params: Any) -> None:
        self.say(f"notification {method}: {json.dumps(params, ensure_ascii=False)}")

    def _progress(self, progress: ProgressParams) -> None:
        self.say(format_progress(progress))

    def execute(self, line: str) -> bool:
        """Run one line; False when the console should stop."""
        try:
            command = parse_line(line)
        except InputError as exc:
            self.failures += 1
            self.say(f"input error: {exc}")
            return True
        if command is None:
            return True
        if isinstance(command, DotCommand):
            return self._dot(command)
        self._call(command)
        return True

    def _call(self, command: CallCommand, *, retried: bool = False) -> None:
        try:
            result = self.client.call(
                command.method, command.params, timeout=self.timeout, on_progress=self._progress
            )
        except RpcError as exc:
            self.failures += 1
            self.say(format_rpc_error(exc))
        except LibravdbError as exc:  # no answer: timeout, connection lost, bad reply
            kind = "timeout" if isinstance(exc, RpcTimeout) else "connection error"
            if not self.interactive:
                self.failures += 1
                self.say(f"{kind}: {exc}")
                raise ConnectionLost(str(exc)) from exc
            if isinstance(exc, RpcTimeout) or retried or not self._reconnect_quietly():
                self.failures += 1
                hint = (
                    "" if isinstance(exc, RpcTimeout) else "\n(.reconnect opens a new connection)"
                )
                self.say(f"{kind}: {exc}{hint}")
                return
            # The daemon restarted: a read is simply asked again; a write may or may not
            # have happened before the connection dropped, so it is not repeated blindly.
            if command.method in READ_ONLY_METHODS:
                self.say(f"reconnected to {self.server} at {self.endpoint}; asking again")
                self._call(command, retried=True)
            else:
                self.failures += 1
                self.say(
                    f"connection lost ({exc}); reconnected to {self.server} at "
                    f"{self.endpoint}. {command.method} was not repeated: check and run it again"
                )
        else:
            self.last_result = result
            self.print_json(format_json(result))

    def _reconnect_quietly(self, attempts: int = 20, pause_s: float = 0.25) -> bool:
        """Reopen the connection after the daemon went away (it may be restarting)."""
        for _ in range(attempts):
            try:
                client = self._open()
            except LibravdbError:
                time.sleep(pause_s)
                continue
            self.client.close()
            self.client = client
            return True
        return False

    def _raw(self, path: str) -> None:
        if self.last_result is None:
            self.failures += 1
            self.say("no result yet: run a method first")
            return
        try:
            value = field_at(self.last_result, path)
        except InputError as exc:
            self.failures += 1
            self.say(f"input error: {exc}")
            return
        print(value if isinstance(value, str) else format_json(value), file=self.out, flush=True)

    def _dot(self, command: DotCommand) -> bool:
        name, arg = command.name, command.arg
        if name in (".quit", ".exit"):
            return False
        if name == ".help":
            self.say(method_help(arg) if arg else self.help_text())
        elif name == ".methods":
            self.say("\n".join(self.methods))
        elif name == ".timeout":
            self._set_timeout(arg)
        elif name == ".reconnect":
            self._reconnect()
        elif name == ".raw":
            self._raw(arg)
        else:
            self.failures += 1
            self.say(f"unknown command {name}; .help lists the commands")
        return True

    def help_text(self) -> str:
        lines = [
            'Input: METHOD [JSON params | key=value ...]   e.g.  status   |   m {"k": 3}'
            '   |   m k=3 text="two words" a.b=true',
            "",
            *(usage for usage in DOT_COMMANDS.values() if usage),
            "",
            "Methods: " + (", ".join(self.methods) or "(none)"),
        ]
        return "\n".join(lines)

    def _set_timeout(self, arg: str) -> None:
        if arg:
            try:
                value = None if arg.lower() in ("none", "off", "0") else float(arg)
                if value is not None and value <= 0:
                    raise ValueError(arg)
            except ValueError:
                self.failures += 1
                self.say(f"invalid timeout {arg!r}: seconds > 0, or none")
                return
            self.timeout = value
        shown = "none" if self.timeout is None else f"{self.timeout:g} s"
        self.say(f"timeout: {shown}")

    def _reconnect(self) -> None:
        old = self.client
        try:
            self.client = self._open()
        except LibravdbError as exc:
            self.failures += 1
            self.say(f"cannot reconnect: {exc}")
            return
        old.close()
        self.say(f"reconnected to {self.server} at {self.endpoint}")


# -- the interactive loop (prompt_toolkit) ------------------------------------------------


def history_path() -> Path:
    home = os.environ.get("HOME")
    base = Path(home) / ".clawdb" if home else Path(".clawdb").absolute()
    return base / HISTORY_FILE


def _make_completer(console: Console) -> Any:
    from prompt_toolkit.completion import Completer, Completion

    class ConsoleCompleter(Completer):
        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterable[Completion]:
            text = document.text_before_cursor.lstrip()
            if " " not in text:
                for name in [*console.methods, *(n for n, u in DOT_COMMANDS.items() if u)]:
                    if name.startswith(text):
                        yield Completion(name, start_position=-len(text))
                return
            head = text.split(" ", 1)[0]
            word = document.get_word_before_cursor(WORD=True)
            if head == ".help":
                names: Iterable[str] = console.methods
            elif "=" in word or word[:1] in ("{", "[", '"'):
                return
            else:
                names = [f"{name}=" for name, _ in param_fields(head)]
            for name in names:
                if name.startswith(word):
                    yield Completion(name, start_position=-len(word))

    return ConsoleCompleter()


def _interactive(console: Console) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory

    history: History
    try:
        path = history_path()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        history = FileHistory(str(path))
    except OSError:
        history = InMemoryHistory()
    session: PromptSession[str] = PromptSession(
        history=history, completer=_make_completer(console), complete_while_typing=True
    )
    console.say(console.banner())
    while True:
        try:
            line = session.prompt(PROMPT)
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        try:
            if not console.execute(line):
                break
        except KeyboardInterrupt:
            console.say("interrupted (a late reply will be ignored)")
    return EXIT_OK


def _piped(console: Console, lines: Iterable[str]) -> int:
    try:
        for line in lines:
            if not console.execute(line):
                break
    except ConnectionLost:
        return EXIT_NO_ANSWER
    return EXIT_RPC_ERROR if console.failures else EXIT_OK


# -- entry points (called by sidecar.cli) -------------------------------------------------


def run_console(
    endpoint: str | None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``libravdb console``: interactive on a terminal, line by line otherwise."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    target = resolve_endpoint(endpoint)
    interactive = stdin.isatty() and out.isatty()
    try:
        console = Console(target, timeout=30.0, out=out, err=err, interactive=interactive)
    except (LibravdbError, ValueError) as exc:
        return connect_failure(exc, err)
    try:
        return _interactive(console) if interactive else _piped(console, stdin)
    finally:
        console.close()


def call_params(args: list[str], stdin: TextIO) -> Any:
    """``libravdb call`` params: none; one JSON value; ``-`` (JSON from stdin); or any
    number of ``key=value`` words (each one argument, as the shell split them)."""
    if args == ["-"]:
        return parse_params(stdin.read())
    if len(args) == 1:
        return parse_params(args[0])
    if not args:
        return None
    return parse_assignments(args)


def run_call(
    endpoint: str | None,
    method: str,
    params_args: list[str],
    timeout: float,
    *,
    raw: str | None = None,
) -> int:
    """``libravdb call METHOD [PARAMS...]``: print the result as JSON (or, with ``raw``,
    the field at that dotted path as plain text); see the module doc."""
    try:
        params = call_params(params_args, sys.stdin)
    except InputError as exc:
        print(f"libravdb call: {exc}", file=sys.stderr)
        return EXIT_NO_ANSWER
    target = resolve_endpoint(endpoint)

    def progress(update: ProgressParams) -> None:
        print(format_progress(update), file=sys.stderr, flush=True)

    try:
        with Client(
            target, timeout=timeout if timeout > 0 else None, auth_token=resolve_auth_token()
        ) as client:
            result = client.call(method, params, on_progress=progress)
    except RpcError as exc:
        print(format_rpc_error(exc), file=sys.stderr)
        return EXIT_RPC_ERROR
    except (LibravdbError, ValueError) as exc:
        return connect_failure(exc, sys.stderr)
    if raw is not None:
        try:
            value = field_at(result, raw)
        except InputError as exc:
            print(f"libravdb call: {exc}", file=sys.stderr)
            return EXIT_NO_ANSWER
        print(value if isinstance(value, str) else format_json(value), flush=True)
        return EXIT_OK
    print(format_json(result), flush=True)
    return EXIT_OK


def run_authored_list(endpoint: str | None, *, as_json: bool = False) -> int:
    """``libravdb authored list``: the loaded authored documents, one line each."""
    target = resolve_endpoint(endpoint)
    try:
        with Client(target, timeout=30.0, auth_token=resolve_auth_token()) as client:
            result = client.call("authored.list", {})
    except RpcError as exc:
        print(format_rpc_error(exc), file=sys.stderr)
        return EXIT_RPC_ERROR
    except (LibravdbError, ValueError) as exc:
        return connect_failure(exc, sys.stderr)
    docs = result.get("documents", [])
    if as_json:
        print(format_json(docs), flush=True)
        return EXIT_OK
    if not docs:
        print("no authored documents are loaded", flush=True)
        return EXIT_OK
    print(format_authored_table(docs), flush=True)
    return EXIT_OK


def format_authored_table(docs: list[dict[str, Any]]) -> str:
    """One row per document: tiers, core flag, and where it came from."""
    rows = [("hard", "soft", "variant", "core", "source", "document")]
    for d in docs:
        if d.get("watched"):
            source = f"{d.get('kind') or 'generic'}:{d.get('root', '')}"
        elif d.get("root"):
            source = f"host:{d['root']}"
        else:
            source = "authored.ingest"
        rows.append(
            (
                str(d.get("hard", 0)),
                str(d.get("soft", 0)),
                str(d.get("variant", 0)),
                "yes" if d.get("core") else "no",
                source,
                str(d.get("sourceDoc", "")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r[:5])) + "  " + r[5] for r in rows
    )
