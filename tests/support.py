"""Start the real daemon as a process and talk to it with raw sockets."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def hashed_bag_of_words(texts: Sequence[str], dims: int) -> np.ndarray[Any, Any]:
    """A deterministic stand-in embedding for tests of the logic around the model: each
    word hashes to a direction, so texts that share words get similar unit vectors."""
    out = np.zeros((len(texts), dims), dtype=np.float32)
    for i, text in enumerate(texts):
        for tok in re.findall(r"[a-z0-9]+", text.lower()) or [text]:
            d = hashlib.sha256(tok.encode()).digest()
            out[i] += np.array([d[j] / 127.5 - 1 for j in range(dims)], dtype=np.float32)
        n = np.linalg.norm(out[i])
        out[i] /= n if n else 1
    return out


def hash_embedder(dims: int) -> Callable[[Sequence[str], str], Awaitable[np.ndarray[Any, Any]]]:
    """``hashed_bag_of_words`` as the async ``embed(texts, kind)`` a StoreService takes."""

    async def embed(texts: Sequence[str], kind: str) -> np.ndarray[Any, Any]:
        return hashed_bag_of_words(texts, dims)

    return embed


STARTUP_TIMEOUT_S = 30.0


def daemon_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@dataclass
class DaemonProcess:
    proc: subprocess.Popen[bytes]
    endpoint: str
    stderr_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def log_events(self) -> list[dict[str, Any]]:
        events = []
        for line in self.stderr_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                events.append(json.loads(line))
        return events

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_daemon(
    tmp: Path,
    *transport_args: str,
    env_extra: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    wait: bool = True,
) -> DaemonProcess:
    """Start `python -m sidecar serve` and wait for its endpoint line."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    stderr_path = tmp / f"daemon-{time.monotonic_ns()}.log"
    args = [sys.executable, "-m", "sidecar", "serve", *transport_args]
    data_dir = str(tmp / "data")
    if "--data-dir" in extra_args:
        data_dir = extra_args[list(extra_args).index("--data-dir") + 1]
    else:
        args += ["--data-dir", data_dir]
    if "--store" not in extra_args:
        args += current_store().args(data_dir)
    args += list(extra_args)
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if "--stdio" in transport_args else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=daemon_env(home, env_extra),
            cwd=REPO,
        )
    daemon = DaemonProcess(proc, "", stderr_path)
    if wait and "--stdio" not in transport_args:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line:
            proc.wait(5)
            raise RuntimeError(f"daemon exited without an endpoint: {daemon.stderr_text()}")
        daemon.endpoint = line
    return daemon


class RawConnection:
    """A line-oriented socket connection for protocol-level tests."""

    def __init__(self, endpoint: str, timeout: float = 10.0) -> None:
        if endpoint.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(endpoint[5:])
        else:
            host, _, port = endpoint[4:].rpartition(":")
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self._buf = b""
        self._next_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def read_line(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("connection closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def read(self) -> Any:
        return json.loads(self.read_line())

    def call(self, method: str, params: Any = None) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            reply = self.read()
            if reply.get("id") == self._next_id:
                return reply

    def result(self, method: str, params: Any = None) -> Any:
        """The result of a call; an error reply raises RuntimeError naming it."""
        reply = self.call(method, params)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def error(self, method: str, params: Any = None) -> dict[str, Any]:
        """The error object of a call that must fail."""
        reply = self.call(method, params)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def running_daemon(tmp: Path, *transport_args: str, **kwargs: Any) -> Iterator[DaemonProcess]:
    daemon = start_daemon(tmp, *transport_args, **kwargs)
    try:
        yield daemon
    finally:
        daemon.stop()


# ---- store backends --------------------------------------------------------------------


@dataclass
class StoreTarget:
    """Where the stores a test starts live: SQLite data directories (``sqlite``, the
    default) or fresh PostgreSQL databases of the test server (``postgres``), one per data
    directory the test uses (so a restart on the same directory finds the same store, and
    two directories are two stores, as on SQLite), created on first use.
    ``tests/conftest.py`` sets the current target from the ``backend`` parameter; the
    helpers here (``start_daemon``) and the harnesses (``make_harness``, ``make_rpc``) read
    it, so a test file needs no change to run on both backends."""

    backend: str = "sqlite"
    new_database: Callable[[], str] | None = None
    _urls: dict[str, str] = field(default_factory=dict)

    @property
    def postgres(self) -> bool:
        return self.backend == "postgres"

    @property
    def used(self) -> bool:
        """A PostgreSQL database was handed out (the test opened a store on it)."""
        return bool(self._urls)

    def url(self, data_dir: str | os.PathLike[str] = "") -> str:
        """The database standing for ``data_dir`` ("" for SQLite)."""
        if not self.postgres:
            return ""
        key = os.path.abspath(data_dir) if data_dir else ""
        if key not in self._urls:
            assert self.new_database is not None
            self._urls[key] = self.new_database()
        return self._urls[key]

    def flags(self, data_dir: str | os.PathLike[str] = "") -> dict[str, Any]:
        """Settings flags (``load_settings``) that select the store of ``data_dir``."""
        return {"store.url": self.url(data_dir)} if self.postgres else {}

    def args(self, data_dir: str | os.PathLike[str] = "") -> list[str]:
        """``libravdbd serve`` arguments that select the store of ``data_dir``."""
        return ["--store", self.url(data_dir)] if self.postgres else []


_current = [StoreTarget()]


def current_store() -> StoreTarget:
    """The store target of the running test (SQLite outside a parametrised test)."""
    return _current[-1]


@contextlib.contextmanager
def using_store(target: StoreTarget) -> Iterator[StoreTarget]:
    _current.append(target)
    try:
        yield target
    finally:
        _current.remove(target)


def open_test_store(data_dir: Path, **kwargs: Any) -> Any:
    """The store a daemon started on ``data_dir`` would open, opened directly (SQLite: the
    directory; PostgreSQL: the database standing for it), with ``Store.open``'s keyword
    arguments. Close it before a daemon opens the same SQLite directory."""
    from sidecar.store.backend import open_store

    return open_store(current_store().url(data_dir) or data_dir, **kwargs)


#: seconds a kill -9 child may take to open its store and reach its saves
SAVING_DEADLINE = 120.0


def kill_9_while_saving(script: str, *args: str, delay: float) -> None:
    """Run ``script`` (``python -c``, with ``args``) in a child process, wait for its
    "saving" line (what it prints before it saves again and again), let it run ``delay``
    seconds more and kill it with SIGKILL: a save cut short at some point of its write."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "PYTHONFAULTHANDLER": "1",  # a SIGABRT prints every thread's stack on stderr
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, env=env, cwd=REPO
    )
    assert proc.stdout is not None
    # a child that never gets to its saves is aborted, its stacks shown, well before the
    # test's own timeout (which would show only this process's wait)
    watchdog = threading.Timer(SAVING_DEADLINE, proc.send_signal, (signal.SIGABRT,))
    watchdog.start()
    try:
        while (line := proc.stdout.readline()) and line.strip() != b"saving":
            pass  # the store's log lines
    finally:
        watchdog.cancel()
    assert line.strip() == b"saving", f"the child never saved (exit {proc.wait()})"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
