"""Endpoint strings: ``unix:/path/to/socket`` and ``tcp:host:port``; the default endpoint."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["ENDPOINT_ENV", "Endpoint", "default_endpoint", "parse_endpoint"]

ENDPOINT_ENV = "LIBRAVDB_RPC_ENDPOINT"
WINDOWS_DEFAULT = "tcp:127.0.0.1:37421"


@dataclass(frozen=True, slots=True)
class Endpoint:
    kind: Literal["unix", "tcp"]
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp:{host}:{self.port}"


def parse_endpoint(text: str | Endpoint) -> Endpoint:
    """Parse ``unix:PATH`` or ``tcp:HOST:PORT`` (IPv6 hosts in brackets). Raises ValueError."""
    if isinstance(text, Endpoint):
        return text
    raw = text.strip()
    if raw.startswith("unix:"):
        path = raw[len("unix:") :].strip()
        if not path:
            raise ValueError("unix endpoint requires a socket path")
        return Endpoint("unix", path=str(Path(path).expanduser().absolute()))
    if raw.startswith("tcp:"):
        host, sep, port_text = raw[len("tcp:") :].strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host:
            raise ValueError(f"tcp endpoint must be tcp:host:port, got {raw!r}")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"tcp endpoint port must be a number, got {port_text!r}") from None
        if not 0 < port <= 65535:
            raise ValueError(f"tcp endpoint port {port} is out of range")
        return Endpoint("tcp", host=host, port=port)
    raise ValueError(
        f"unsupported RPC endpoint {raw!r}; expected tcp:host:port or unix:/path/to/socket"
    )


def default_endpoint(env: Mapping[str, str] | None = None) -> str:
    """``$LIBRAVDB_RPC_ENDPOINT``, else the daemon's default socket under ``$HOME/.clawdb``."""
    env = os.environ if env is None else env
    configured = env.get(ENDPOINT_ENV, "").strip()
    if configured:
        return configured
    if os.name == "nt":
        return WINDOWS_DEFAULT
    home = env.get("HOME", "")
    base = Path(home) / ".clawdb" if home else Path(".clawdb").absolute()
    return f"unix:{base / 'run' / 'libravdb.sock'}"
