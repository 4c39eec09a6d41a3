"""Run a real daemon on a socket, for tests, benchmarks and scripts.

::

    with DaemonProcess.start("unix", data_dir=tmp / "data") as daemon:
        with Client(daemon.endpoint) as client:
            ...

The daemon's stderr (JSON logs) goes to a temporary file unless ``stderr`` says
otherwise; ``daemon.stderr_text()`` returns it and start-up failures quote its tail.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from libravdb_client._spawn import StderrTarget, default_command

__all__ = ["DaemonProcess", "DaemonStartError"]


class DaemonStartError(RuntimeError):
    """The daemon exited or stayed silent instead of printing its endpoint line."""


class DaemonProcess:
    """A ``libravdbd serve --socket|--tcp`` child and the endpoint it announced."""

    def __init__(
        self, process: subprocess.Popen[bytes], endpoint: str, log: IO[bytes] | None
    ) -> None:
        self.process = process
        self.endpoint = endpoint
        self._log = log

    @classmethod
    def start(
        cls,
        listen: str = "unix",
        *,
        data_dir: str | os.PathLike[str],
        home: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        stderr: StderrTarget = None,
        command: Sequence[str] | None = None,
        ready_timeout: float = 20.0,
    ) -> DaemonProcess:
        """Start the daemon and wait for its endpoint line.

        ``listen`` is ``"unix"`` (a socket in ``data_dir``'s parent), ``"tcp"``
        (127.0.0.1, any free port), ``"unix:/path"`` or ``"tcp:HOST:PORT"``. ``home``
        sets ``$HOME`` for the child; ``env`` is laid over the current environment, from
        which ``LIBRAVDB_*`` variables are dropped so a developer's settings do not leak in.
        """
        data = Path(data_dir)
        if listen == "unix":
            listen = f"unix:{data.parent / 'libravdb.sock'}"
        elif listen == "tcp":
            listen = "tcp:127.0.0.1:0"
        kind, _, where = listen.partition(":")
        if kind not in ("unix", "tcp") or not where:
            raise ValueError(
                f"listen must be unix, tcp, unix:PATH or tcp:HOST:PORT, not {listen!r}"
            )
        flag = "--socket" if kind == "unix" else "--tcp"
        argv = [
            *(command or default_command()),
            "serve",
            flag,
            where,
            "--data-dir",
            str(data),
            *args,
        ]
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
        child_env = {**inherited, **(env or {})}
        if home is not None:
            child_env["HOME"] = os.fspath(home)

        log: IO[bytes] | None = None
        owned: IO[bytes] | None = None
        target: Any = stderr
        if stderr is None:
            log = owned = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
            target = log
        elif isinstance(stderr, str | os.PathLike):
            owned = open(stderr, "ab")  # noqa: SIM115 - handed to the DaemonProcess
            target = owned
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=target, env=child_env
        )
        if owned is not None and owned is not log:
            owned.close()  # the child holds its own descriptor
        daemon = cls(process, "", log)
        try:
            daemon.endpoint = daemon._read_endpoint(ready_timeout)
        except BaseException:
            daemon.stop(timeout=2.0)
            raise
        return daemon

    def _read_endpoint(self, timeout: float) -> str:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        line = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in line:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    raise DaemonStartError(
                        f"no endpoint line within {timeout:g} s\n{self.stderr_tail()}"
                    )
                chunk = os.read(fd, 4096)
                if not chunk:
                    code = self.process.wait(5.0)
                    raise DaemonStartError(
                        f"daemon exited with code {code} before announcing its endpoint\n"
                        f"{self.stderr_tail()}"
                    )
                line += chunk
        return line.split(b"\n", 1)[0].decode().strip()

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_text(self) -> str:
        """Everything the daemon wrote to stderr (only when it went to the default file)."""
        if self._log is None or self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stderr_tail(self, lines: int = 20) -> str:
        return "\n".join(self.stderr_text().splitlines()[-lines:])

    def stop(self, timeout: float = 10.0, sig: int = signal.SIGTERM) -> int:
        """Signal the daemon (SIGTERM: graceful), wait, kill after ``timeout``; the exit code."""
        process = self.process
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def close(self) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
