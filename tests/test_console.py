"""`libravdb call` and `libravdb console`, run as real processes against a real daemon."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client.testing import DaemonProcess

from sidecar.console_input import CallCommand, DotCommand, InputError, parse_line, parse_params

pytestmark = pytest.mark.sqlite_only("the console's interface over RPCs tested on both backends")


def libravdb_argv() -> list[str]:
    script = Path(sys.executable).parent / "libravdb"
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from sidecar.cli import tool_main; sys.exit(tool_main())",
    ]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def env(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    return {**clean, "HOME": str(home), "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[DaemonProcess]:
    """Serves the default endpoint for this HOME: unix:$HOME/.clawdb/run/libravdb.sock."""
    base = tmp_path_factory.mktemp("daemon")
    listen = f"unix:{home / '.clawdb' / 'run' / 'libravdb.sock'}"
    with DaemonProcess.start(listen, data_dir=base / "data", home=home) as running:
        yield running


def run(
    args: list[str], env: dict[str, str], stdin: str = "", timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*libravdb_argv(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def json_documents(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while (pos := _skip_ws(text, pos)) < len(text):
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)
    return docs


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


# -- libravdb call ------------------------------------------------------------------------


def test_call_health_prints_json(daemon: DaemonProcess, env: dict[str, str]) -> None:
    done = run(["call", "health", "--endpoint", daemon.endpoint], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert done.stdout.startswith('{\n  "ok": true')  # indented


def test_call_uses_the_default_endpoint_and_params(
    daemon: DaemonProcess, env: dict[str, str]
) -> None:
    params = '{"clientInfo": {"name": "test"}}'
    done = run(["call", "initialize", params], env)  # no --endpoint: $HOME default
    assert done.returncode == 0, done.stderr
    assert "health" in json.loads(done.stdout)["methods"]
    via_env = run(
        ["call", "status"],
        {**env, "HOME": "/nonexistent", "LIBRAVDB_RPC_ENDPOINT": daemon.endpoint},
    )
    assert via_env.returncode == 0, via_env.stderr
    assert json.loads(via_env.stdout)["endpoint"] == daemon.endpoint


def test_call_rpc_errors_exit_1(daemon: DaemonProcess, env: dict[str, str]) -> None:
    unknown = run(["call", "no_such_method"], env)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error -32601: unknown method: no_such_method")
    assert unknown.stdout == ""
    bad = run(["call", "health", '"x"'], env)
    assert bad.returncode == 1 and bad.stderr.startswith("error -32602: ")


def test_call_without_daemon_exits_2(tmp_path: Path, env: dict[str, str]) -> None:
    done = run(["call", "health", "--endpoint", f"unix:{tmp_path / 'none.sock'}"], env)
    assert done.returncode == 2
    assert "cannot connect" in done.stderr and "Is the daemon running?" in done.stderr
    refused = run(["call", "health", "--endpoint", "tcp:127.0.0.1:1"], env)
    assert refused.returncode == 2 and "cannot connect" in refused.stderr


def test_call_bad_input_exits_2(daemon: DaemonProcess, env: dict[str, str]) -> None:
    done = run(["call", "health", "{oops"], env)
    assert done.returncode == 2 and "not valid JSON" in done.stderr
    bad_endpoint = run(["call", "health", "--endpoint", "http://x"], env)
    assert bad_endpoint.returncode == 2 and "unsupported RPC endpoint" in bad_endpoint.stderr


# -- libravdb console (piped) -------------------------------------------------------------


def test_piped_console_session(daemon: DaemonProcess, env: dict[str, str]) -> None:
    session = "\n".join(
        [
            "health",
            "# a comment, then a blank line",
            "",
            'initialize {"clientInfo": {"name": "console-test"}}',
            "initialize clientInfo.name=kv protocolVersion='\"2.0\"'",
            ".timeout 10",
            "status",
            ".quit",
            "health",  # never reached
        ]
    )
    done = run(["console", "--endpoint", daemon.endpoint], env, stdin=session + "\n")
    assert done.returncode == 0, done.stderr
    docs = json_documents(done.stdout)
    assert [sorted(d)[:2] for d in docs] == [
        ["message", "models"],
        ["capabilities", "methods"],
        ["capabilities", "methods"],
        ["abstractiveReady", "background"],
    ]
    assert docs[0]["ok"] is True
    assert "timeout: 10 s" in done.stderr
    assert "Connected" not in done.stdout + done.stderr  # no banner when piped


def test_piped_console_reports_failures(daemon: DaemonProcess, env: dict[str, str]) -> None:
    session = 'nope\nhealth "x"\nhealth {bad\n.bogus\nhealth\n'
    done = run(["console"], env, stdin=session)  # default endpoint
    assert done.returncode == 1
    documents = json_documents(done.stdout)
    assert len(documents) == 1
    assert documents[0]["ok"] is True and documents[0]["message"] == "ok"
    lines = done.stderr.splitlines()
    assert lines[0] == "error -32601: unknown method: nope"
    assert lines[1].startswith("error -32602: ")
    assert lines[2].startswith("input error: ")
    assert lines[3].startswith("unknown command .bogus")


def test_piped_console_help(daemon: DaemonProcess, env: dict[str, str]) -> None:
    done = run(["console"], env, stdin=".help\n.help initialize\n.methods\n")
    assert done.returncode == 0, done.stderr
    methods_line = next(ln for ln in done.stderr.splitlines() if ln.startswith("Methods: "))
    listed = methods_line.removeprefix("Methods: ").split(", ")
    assert {"health", "initialize", "shutdown", "status"} <= set(listed)
    assert listed == sorted(listed)
    assert "clientInfo: ClientInfo | None" in done.stderr
    assert "\nstatus\n" in done.stderr


def test_console_without_daemon_exits_2(tmp_path: Path, env: dict[str, str]) -> None:
    done = run(["console", "--endpoint", f"unix:{tmp_path / 'none.sock'}"], env, stdin="health\n")
    assert done.returncode == 2 and "cannot connect" in done.stderr


def test_console_connection_lost_exits_2(tmp_path: Path, env: dict[str, str], home: Path) -> None:
    with DaemonProcess.start("tcp", data_dir=tmp_path / "data", home=home) as own:
        done = run(["console", "--endpoint", own.endpoint], env, stdin="shutdown\nhealth\nstatus\n")
        assert done.returncode == 2
        assert json_documents(done.stdout) == [{"ok": True}]
        assert "connection error" in done.stderr


# -- libravdb console (interactive, on a pseudo-terminal) ---------------------------------


class Pty:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            os.execve(argv[0], argv, env)
        self.output = b""

    def expect(self, needle: bytes, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.output:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{needle!r} not in {self.output[-2000:]!r}")
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                try:
                    self.output += os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    raise AssertionError(f"{needle!r} not in {self.output[-2000:]!r}") from None

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.05)
                if ready:
                    self.output += os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        raise AssertionError("console did not exit")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty test written for Linux")
def test_interactive_console(daemon: DaemonProcess, env: dict[str, str], home: Path) -> None:
    argv = libravdb_argv()
    if len(argv) != 1:
        pytest.skip("the libravdb console script is not installed")
    term = {**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    console = Pty([argv[0], "console"], term)
    console.expect(b"Connected to libravdbd")
    console.expect(b"libravdb>")
    console.send(b"hea")
    console.expect(b" health ")  # the completion menu, from initialize's method list
    console.send(b"\t")  # complete to `health`
    console.expect(b"lth")
    console.send(b"\r")
    console.expect(b'"ok": true')
    console.send(b"nope\r")
    console.expect(b"error -32601")
    console.send(b".quit\r")
    assert console.wait() == 0
    history = (home / ".clawdb" / "console_history").read_text()
    assert "+health" in history and "+nope" in history


# -- input parsing ------------------------------------------------------------------------


def test_parse_line() -> None:
    assert parse_line("  ") is None and parse_line("# x") is None
    assert parse_line("status") == CallCommand("status", None)
    assert parse_line('m {"a": [1, 2]}') == CallCommand("m", {"a": [1, 2]})
    assert parse_line('m "x"') == CallCommand("m", "x")
    assert parse_line(".help status") == DotCommand(".help", "status")
    assert parse_line('m k=3 t="two words" f=true a.b=x a.c=null s=abc') == CallCommand(
        "m", {"k": 3, "t": "two words", "f": True, "a": {"b": "x", "c": None}, "s": "abc"}
    )
    assert parse_params("ids=[1,2]") == {"ids": [1, 2]}
    for bad in ("{oops", "k=1 loose", "a=1 a.b=2", "=1", "t='open"):
        with pytest.raises(InputError):
            parse_params(bad)


# -- what a first user hit ----------------------------------------------------------------


def test_parse_keeps_json_values_whole() -> None:
    """`key=[...]` with quoted strings inside used to lose its quotes (and its JSON)."""
    assert parse_line('m ids=["a", "b"] t="two words" n={"x": [1, 2]}') == CallCommand(
        "m", {"ids": ["a", "b"], "t": "two words", "n": {"x": [1, 2]}}
    )
    assert parse_params("s='two words' q='\"2.0\"'") == {"s": "two words", "q": "2.0"}


def test_call_takes_several_key_value_arguments(daemon: DaemonProcess, env: dict[str, str]) -> None:
    messages = '[{"role": "user", "content": "I keep bees on the roof."}]'
    done = run(["call", "ingest", "sessionId=cli-kv", "userId=cli", f"messages={messages}"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ingested"] == 1


def test_call_reads_params_from_stdin(daemon: DaemonProcess, env: dict[str, str]) -> None:
    params = {"sessionId": "cli-stdin", "messages": [{"role": "user", "content": "Hello bees."}]}
    done = run(["call", "ingest", "-"], env, stdin=json.dumps(params))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ingested"] == 1


def test_call_raw_prints_a_field_as_text(daemon: DaemonProcess, env: dict[str, str]) -> None:
    run(
        [
            "call",
            "ingest",
            "sessionId=raw",
            "userId=raw",
            'messages=[{"role": "user", "content": "My beehive is on the roof terrace."}]',
        ],
        env,
    )
    done = run(
        [
            "call",
            "assemble",
            "sessionId=other",
            "userId=raw",
            "prompt=Where is my beehive?",
            "tokenBudget=4000",
            "--raw",
            "systemPromptAddition",
        ],
        env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("<recalled_memories>\n")  # real line breaks, no JSON quoting
    assert "beehive is on the roof terrace" in done.stdout
    missing = run(["call", "health", "--raw", "nope"], env)
    assert missing.returncode == 2 and "no 'nope'" in missing.stderr


def test_piped_console_raw(daemon: DaemonProcess, env: dict[str, str]) -> None:
    session = "status\n.raw background.autoCompaction\n.raw models.embedder.profile\n"
    done = run(["console", "--endpoint", daemon.endpoint], env, stdin=session)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("all-minilm-l6-v2")


def test_status_fields_the_docs_promise(daemon: DaemonProcess, env: dict[str, str]) -> None:
    # the embedder's compute is reported once it has loaded: first in the file (or alone),
    # this test would otherwise race the daemon's start
    deadline = time.monotonic() + 120
    while True:
        status = json.loads(run(["call", "status"], env).stdout)
        if status["models"]["embedder"]["state"] != "loading" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["models"]["summarizer"]["seq2seq"]["state"] == "disabled"
    assert status["models"]["embedder"]["compute"]["matmul"] in ("int8", "float32")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty test written for Linux")
def test_interactive_console_reconnects_after_a_restart(
    tmp_path: Path, env: dict[str, str], home: Path
) -> None:
    argv = libravdb_argv()
    if len(argv) != 1:
        pytest.skip("the libravdb console script is not installed")
    sock = tmp_path / "r.sock"
    term = {**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    first = DaemonProcess.start(f"unix:{sock}", data_dir=tmp_path / "data", home=home)
    console = Pty([argv[0], "console", "--endpoint", f"unix:{sock}"], term)
    try:
        console.expect(b"libravdb>")
        first.stop()
        with DaemonProcess.start(f"unix:{sock}", data_dir=tmp_path / "data", home=home):
            console.send(b"health\r")
            console.expect(b"asking again")
            console.expect(b'"ok": true')
            console.send(b".quit\r")
            assert console.wait() == 0
    finally:
        first.stop()
