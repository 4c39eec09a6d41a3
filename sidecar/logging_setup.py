"""Structured JSON logs on stderr. stdout belongs to the protocol or the endpoint line.

The daemon must never stop because nobody reads its logs. A host that spawns it with
stderr on a pipe and then dies, or `libravdbd serve 2>&1 | tee run.log` whose `tee` is
killed, turns every write to stderr into EPIPE; a reader that is alive but stopped reading
makes the write block once the pipe is full. Either used to stall request handling and
even the SIGTERM handler (which logs). So log lines never touch stderr from the caller's
thread: they go to a bounded queue that one writer thread drains. A full queue drops lines
(counted); a failed write stops the writer for good (later lines are dropped and counted);
shutdown waits for the queue at most a second.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
from typing import Any, TextIO

import structlog

_SHARED: list[structlog.types.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.processors.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
QUEUE_LINES = 10_000
FLUSH_TIMEOUT_S = 1.0
# Strings no log line may carry (a store URL's password): replaced by *** in every line,
# whoever logs it (a driver's message quoting its connection string included).
_secrets: tuple[str, ...] = ()


def redact_in_logs(*secrets: str) -> None:
    """Never write these strings to the log (longest first). Strings under four characters
    are ignored: replacing every "ab" would garble the log, and URLs are masked where they
    are logged anyway (``config.mask_url``); this is the net under that."""
    global _secrets
    found = {*_secrets, *(s for s in secrets if len(s) >= 4)}
    _secrets = tuple(sorted(found, key=len, reverse=True))


class LogSink:
    """A bounded, non-blocking line writer to one file descriptor."""

    def __init__(self, fd: int, capacity: int = QUEUE_LINES) -> None:
        self.fd = fd
        self.dropped = 0
        self.broken = ""  # why writing stopped, "" while it works
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="libravdb-log-writer", daemon=True)
        self._thread.start()

    def write_line(self, line: str) -> None:
        if self.broken:
            self.dropped += 1
            return
        for secret in _secrets:
            line = line.replace(secret, "***")
        try:
            self._queue.put_nowait(line.encode("utf-8", "replace") + b"\n")
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            try:
                while data:
                    data = data[os.write(self.fd, data) :]
            except OSError as exc:  # EPIPE (reader gone), EBADF, EIO: stop writing
                self.broken = f"{type(exc).__name__}: {exc}"
                self.dropped += 1 + self._drain()

    def _drain(self) -> int:
        n = 0
        with contextlib.suppress(queue.Empty):
            while True:
                if self._queue.get_nowait() is None:
                    return n
                n += 1
        return n

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait (bounded) until the queued lines are written; False if they were not."""
        if self.broken or not self._thread.is_alive():
            return False
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        return not self._thread.is_alive()


class _SinkLogger:
    """What structlog's renderer hands the finished JSON line to."""

    def __init__(self, sink: LogSink) -> None:
        self._sink = sink

    def msg(self, message: str) -> None:
        self._sink.write_line(message)

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


class _SinkHandler(logging.Handler):
    """Standard-library records (asyncio, libraries) through the same sink."""

    def __init__(self, sink: LogSink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._sink.write_line(self.format(record))
        except Exception:  # a formatting bug must not reach the caller either
            self._sink.dropped += 1


_sink: LogSink | None = None


def sink() -> LogSink | None:
    """The daemon's log sink, once configured."""
    return _sink


def renders_text(fmt: str, stream: TextIO) -> bool:
    """``auto`` means text for a person at a terminal, JSON for a program reading a pipe."""
    if fmt == "auto":
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False
    return fmt == "text"


def configure_logging(
    level: str = "info", stream: TextIO | None = None, fmt: str = "json"
) -> LogSink:
    """Logs at ``level`` and above to ``stream`` (stderr), as JSON lines or, with ``fmt``
    "text" (or "auto" at a terminal), as aligned human lines with the same fields."""
    global _sink
    numeric = getattr(logging, level.upper(), logging.INFO)
    target = stream if stream is not None else sys.stderr
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(colors=False)
        if renders_text(fmt, target)
        else structlog.processors.JSONRenderer()
    )
    if _sink is not None:
        _sink.flush()
    _sink = new = LogSink(target.fileno())
    # Standard-library loggers go through the same renderer, so stderr carries one format
    # at every level.
    handler = _SinkHandler(new)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*_SHARED, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    logging.basicConfig(level=numeric, handlers=[handler], force=True)
    logging.raiseExceptions = False  # never print "--- Logging error ---" to a dead stderr

    def factory(*_args: Any) -> _SinkLogger:
        return _SinkLogger(new)

    structlog.configure(
        processors=[
            *_SHARED,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    return new


def write_stdout_line(line: str) -> bool:
    """The endpoint line on stdout; False (and stdout sent to /dev/null, so the exit-time
    flush cannot fail either) when nobody can read it."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return True
    except (OSError, ValueError):
        silence_stdout()
        return False


def silence_stdout() -> None:
    """Point fd 1 at /dev/null: a dead reader of stdout must not fail the exit."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    with contextlib.suppress(Exception):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def finish_output(log_sink: LogSink) -> None:
    """At exit: write the queued logs (bounded wait), then make sure the interpreter's own
    final flush of stdout and stderr cannot fail on a reader that is gone."""
    log_sink.flush()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        silence_stdout()
    if log_sink.broken:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
