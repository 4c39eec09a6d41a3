"""Starting the shared daemon when ``libravdb mcp`` finds nothing at its endpoint.

The daemon it starts serves that endpoint (the default Unix socket, where every client
looks), detached in a session of its own: ``libravdb call``, the OpenClaw plugin and other
MCP servers share it, and it keeps serving after the MCP host closes, as a daemon the
plugin starts does. A daemon over the MCP server's stdio would hold the data directory's
lock where no other client could reach it: ``libravdbd serve`` and the plugin would then
fail with "in use by process N", a process the user never started.

Only the start of the MCP server starts a daemon; a lost connection never does (the user
stopped it, or will find it in the log). Two MCP servers starting at once take turns on a
lock file, so the second finds the first one's daemon answering instead of racing it for
the data directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import structlog

from sidecar.config import default_home

log = structlog.get_logger("libravdb.mcp")

LOG_NAME = "libravdbd.log"
START_LOCK_NAME = "mcp-start.lock"
# The log is appended to (a daemon that lost a start race may write to it too); past this
# size it is moved to libravdbd.log.1 before the next start, so it cannot grow without end.
ROTATE_BYTES = 10 * 1024 * 1024
_REASON_TAIL_BYTES = 16 * 1024


class DaemonUnavailable(Exception):
    """No daemon answers and none could be started; the message says what was tried."""


def daemon_log_path() -> Path:
    return default_home() / "logs" / LOG_NAME


@contextlib.asynccontextmanager
async def start_turn() -> AsyncIterator[None]:
    """Held while this server looks for a daemon and starts one: an exclusive ``flock`` on
    ``~/.clawdb/run/mcp-start.lock`` (released with the process, also on ``kill -9``)."""
    path = default_home() / "run" / START_LOCK_NAME
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise DaemonUnavailable(f"cannot start a daemon: {path}: {exc.strerror}") from exc
    try:
        await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX, abandon_on_cancel=True)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _serve_argv(endpoint: str, data_dir: str | None) -> list[str]:
    kind, _, where = endpoint.partition(":")
    if kind not in ("unix", "tcp") or not where:
        raise DaemonUnavailable(f"cannot start a daemon for the endpoint {endpoint!r}")
    argv = [sys.executable, "-m", "sidecar", "serve", "--socket" if kind == "unix" else "--tcp"]
    argv.append(where)
    if data_dir is not None:
        argv += ["--data-dir", str(Path(data_dir).expanduser().absolute())]
    return argv


def _open_log(path: Path) -> tuple[int, int]:
    """The log's descriptor (append) and its size before this start."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if path.stat().st_size > ROTATE_BYTES:
            path.replace(path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    return fd, os.fstat(fd).st_size


def _reason(path: Path, since: int) -> str:
    """The started daemon's own last word: its one ``libravdbd: ...`` line, else the last
    line it wrote (this start's part of the log only)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(since, path.stat().st_size - _REASON_TAIL_BYTES))
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    mine = [ln for ln in lines if ln.startswith("libravdbd:")]
    return (mine or lines or [""])[-1]


def _detached(argv: list[str], log_fd: int) -> subprocess.Popen[bytes]:
    # Not asyncio's subprocess transport, which kills its child when it is closed: this
    # daemon outlives the MCP server. A session of its own: a signal to the host's process
    # group does not reach it.
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log_fd,
        start_new_session=True,
    )


async def start_shared_daemon(
    endpoint: str, data_dir: str | None, ready_timeout: float
) -> subprocess.Popen[bytes]:
    """Start ``libravdbd serve`` on ``endpoint``, detached, and return once it announced
    that it listens (its endpoint line). Raises :class:`DaemonUnavailable` quoting its own
    reason when it exits first (a data directory in use, a bad setting, ...)."""
    argv = _serve_argv(endpoint, data_dir)
    log_path = daemon_log_path()
    try:
        log_fd, offset = _open_log(log_path)
    except OSError as exc:
        raise DaemonUnavailable(f"cannot start a daemon: {log_path}: {exc.strerror}") from exc
    try:
        proc = await anyio.to_thread.run_sync(_detached, argv, log_fd)
    except OSError as exc:
        raise DaemonUnavailable(f"cannot start a daemon ({' '.join(argv)}): {exc}") from exc
    finally:
        os.close(log_fd)  # the child holds its own descriptor
    log.info("mcp_daemon_started", pid=proc.pid, endpoint=endpoint, log=str(log_path))
    assert proc.stdout is not None
    with anyio.move_on_after(ready_timeout):
        line = await anyio.to_thread.run_sync(proc.stdout.readline, abandon_on_cancel=True)
        proc.stdout.close()  # the endpoint line is all it ever writes there
        if line.strip():
            return proc
        code = await anyio.to_thread.run_sync(proc.wait)
        raise DaemonUnavailable(
            f"the daemon it started exited with code {code}: "
            f"{_reason(log_path, offset) or 'no reason given'} (its log: {log_path})"
        )
    raise DaemonUnavailable(
        f"the daemon it started (process {proc.pid}) did not listen within "
        f"{ready_timeout:g} s; it may still be starting (its log: {log_path})"
    )
