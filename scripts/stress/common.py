"""What every stress part shares: the daemon process, a raw client, reports, RSS."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import DaemonProcess, RawConnection, start_daemon

# Small thresholds so that a few hundred records already live in HNSW graphs and index
# files are saved between kills: the checks then exercise the persisted indexes.
STRESS_CONFIG = """
[store]
exact_threshold = 32
checkpoint_idle_s = 0.3
"""


@dataclass
class Report:
    """One part's outcome: figures for the table and the failures that break the promise."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, what: str) -> None:
        if len(self.failures) < 50:
            self.failures.append(what)


def write_config(tmp: Path, text: str = STRESS_CONFIG) -> Path:
    path = tmp / "stress.toml"
    path.write_text(text)
    return path


def launch(tmp: Path, data_dir: Path, config: Path | None = None) -> DaemonProcess:
    args: tuple[str, ...] = ("--data-dir", str(data_dir))
    if config is not None:
        args += ("--config", str(config))
    return start_daemon(tmp, "--tcp", "127.0.0.1:0", extra_args=args)


@contextmanager
def daemon(tmp: Path, data_dir: Path, config: Path | None = None) -> Iterator[DaemonProcess]:
    d = launch(tmp, data_dir, config)
    try:
        yield d
    finally:
        d.stop()


@contextmanager
def connected(
    tmp: Path, data_dir: Path, config: Path | None = None
) -> Iterator[tuple[DaemonProcess, Client]]:
    """A started daemon and one client on it; both closed on exit (a daemon the caller
    killed stays dead)."""
    with daemon(tmp, data_dir, config) as d:
        c = Client(d.endpoint)
        try:
            yield d, c
        finally:
            c.close()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Client(RawConnection):
    """:class:`tests.support.RawConnection` with the longer timeout stress work needs (a
    compaction or a fault recovery can take many seconds)."""

    def __init__(self, endpoint: str, timeout: float = 60.0) -> None:
        super().__init__(endpoint, timeout)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def now_ms() -> float:
    return time.perf_counter() * 1000


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))
