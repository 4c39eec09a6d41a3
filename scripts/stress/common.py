"""What every stress part shares: the daemon process, a raw client, reports, RSS."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import DaemonProcess, start_daemon

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


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Client:
    """A blocking JSON-RPC client on one socket that tolerates replies it did not expect."""

    def __init__(self, endpoint: str, timeout: float = 60.0) -> None:
        host, _, port = endpoint.removeprefix("tcp:").rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.buf = b""
        self.next_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed by the daemon")
            self.buf += chunk
        out, self.buf = self.buf.split(b"\n", 1)
        return out

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode() + b"\n")
        while True:
            reply: dict[str, Any] = json.loads(self.line())
            if reply.get("id") == self.next_id:
                return reply

    def result(self, method: str, params: Any = None) -> Any:
        reply = self.call(method, params)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        self.sock.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def now_ms() -> float:
    return time.perf_counter() * 1000


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))
