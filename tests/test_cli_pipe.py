"""A reader that goes away (`libravdb stats | head -4`) ends the command quietly: no
BrokenPipeError traceback, the status a shell gives a process SIGPIPE killed (141).

Real processes and real pipes. Whether `head` closes its end before or after the command
has written everything is up to the scheduler, so the tests take the two cases that do
not depend on it: the read end closed before the command starts (every write fails), and
`head -1` on an output far larger than a pipe holds (the writer must still be writing
when `head` exits)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from sidecar.cli import EXIT_BROKEN_PIPE
from tests.test_console import libravdb_argv

pytestmark = pytest.mark.sqlite_only("the command line's output, the same on both backends")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def env(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    return {**clean, "HOME": str(home), "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("pipe")
    with DaemonProcess.start("tcp", data_dir=base / "data", home=home) as running:
        with Client(running.endpoint, timeout=60) as c:
            msgs = [
                {"id": f"m{i}", "role": "user", "content": f"I keep bees number {i} in Porto."}
                for i in range(6)
            ]
            c.ingest("p1", msgs, user_id="nia")
        yield running


def _into_closed_pipe(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``libravdb ARGS`` with stdout a pipe whose read end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*libravdb_argv(), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["stats", "--json"],
        ["memory", "list", "--user", "nia", "--scope", "history"],
        ["memory", "list", "--user", "nia", "--scope", "history", "--json"],
        ["memory", "get", "--user", "nia", "turns:nia", "p1:m1"],
        ["call", "status"],
        ["call", "status", "--raw", "version"],
        ["authored", "list"],
        ["version"],
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_the_command_quietly(
    args: list[str], daemon: DaemonProcess, env: dict[str, str]
) -> None:
    endpoint = [] if args == ["version"] else ["--endpoint", daemon.endpoint]
    done = _into_closed_pipe([*args, *endpoint], env)
    assert done.stderr == ""
    assert done.returncode == EXIT_BROKEN_PIPE


def test_export_into_a_closed_pipe_ends_quietly_and_releases_the_store(
    tmp_path: Path, env: dict[str, str]
) -> None:
    data = tmp_path / "data"
    with (
        DaemonProcess.start("tcp", data_dir=data, home=tmp_path) as running,
        Client(running.endpoint, timeout=60) as c,
    ):
        c.call("insert_text", {"collection": "c", "id": "a", "text": "one record"})
    done = _into_closed_pipe(["export", "--data-dir", str(data)], env)
    assert done.stderr == "" and done.returncode == EXIT_BROKEN_PIPE
    again = subprocess.run(
        [*libravdb_argv(), "export", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert any(json.loads(line).get("id") == "a" for line in again.stdout.splitlines())


def test_head_one_on_a_long_output(daemon: DaemonProcess, env: dict[str, str]) -> None:
    """`libravdb call embed ... | head -1`: about 600 KiB of JSON, ten times what a pipe
    holds, so the command is still writing when head has its line and exits."""
    params = json.dumps({"texts": [f"text number {i}" for i in range(64)]})
    writer = subprocess.Popen(
        [*libravdb_argv(), "call", "embed", params, "--endpoint", daemon.endpoint],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert writer.stdout is not None and writer.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True, timeout=120)
    writer.stdout.close()  # head is gone: the writer's pipe has no reader left
    err = writer.stderr.read().decode()
    writer.stderr.close()
    assert writer.wait(120) == EXIT_BROKEN_PIPE, err
    assert err == ""
    assert head.stdout == b"{\n"
