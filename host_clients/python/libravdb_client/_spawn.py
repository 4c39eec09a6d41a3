"""How a child daemon is started over stdio and stopped again (shared by both clients)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Final

# Where the child's stderr (its JSON logs) goes: None inherits ours; an int is a file
# descriptor or subprocess.DEVNULL / subprocess.PIPE; a str or PathLike is a log file
# opened for appending; else an open binary file object.
StderrTarget = int | IO[Any] | str | os.PathLike[str] | None

# Seconds to wait for the child to exit after its stdin is closed, before SIGTERM;
# then as long again before SIGKILL.
DEFAULT_SHUTDOWN_TIMEOUT: Final = 5.0


def default_command() -> tuple[str, ...]:
    """``python -m sidecar`` with this interpreter."""
    return (sys.executable, "-m", "sidecar")


@dataclass(frozen=True)
class SpawnSpec:
    args: Sequence[str] = ()
    data_dir: str | os.PathLike[str] | None = None
    env: Mapping[str, str] | None = None
    stderr: StderrTarget = None
    command: Sequence[str] | None = None
    cwd: str | os.PathLike[str] | None = None
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    _owned: list[IO[Any]] = field(default_factory=list, compare=False, repr=False)

    def argv(self) -> list[str]:
        argv = [*(self.command or default_command()), "serve", "--stdio"]
        if self.data_dir is not None:
            argv += ["--data-dir", os.fspath(self.data_dir)]
        return [*argv, *self.args]

    def environment(self) -> dict[str, str] | None:
        """The child's environment: ours with ``env`` laid over it (None: ours unchanged)."""
        if self.env is None:
            return None
        return {**os.environ, **self.env}

    def open_stderr(self) -> int | IO[Any] | None:
        """The ``stderr=`` argument for the child; a log file named by path is opened here."""
        target = self.stderr
        if isinstance(target, str | os.PathLike):
            handle = open(target, "ab")  # noqa: SIM115 - closed by close_owned()
            self._owned.append(handle)
            return handle
        return target

    def close_owned(self) -> None:
        while self._owned:
            self._owned.pop().close()

    def describe(self) -> str:
        return "stdio:" + subprocess.list2cmdline(self.argv())
