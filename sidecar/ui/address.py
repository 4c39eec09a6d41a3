"""``--http HOST:PORT``: where the UI listens. Loopback only: the pages show everything the
memory holds, and the session token is the only thing between them and anyone who can
reach the port."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

DEFAULT = "127.0.0.1:0"  # port 0: a free port, chosen when the socket is bound


@dataclass(frozen=True, slots=True)
class Address:
    host: str  # as the user wrote it: 127.0.0.1, ::1, localhost
    port: int

    @property
    def bind_host(self) -> str:
        # "localhost" may resolve to several addresses; the UI binds the IPv4 one.
        return "127.0.0.1" if self.host == "localhost" else self.host

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def names(self, port: int) -> frozenset[str]:
        """The ``Host`` names the UI answers to once bound on ``port``."""
        names = {self.url_host, "localhost"}
        if self.bind_host == "127.0.0.1":
            names.add("127.0.0.1")
        return frozenset(f"{n}" for n in names)


def parse_address(text: str) -> Address:
    """``127.0.0.1:8765``, ``[::1]:8765``, ``localhost:8765`` (port 0: any free one);
    anything that is not loopback raises ValueError naming the problem."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"--http wants HOST:PORT (for example 127.0.0.1:8765), not {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--http port must be a number, not {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--http port must be 0..65535 (0: any free port), not {port}")
    host = host.lower()
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(
                f"--http serves loopback only (127.0.0.1, ::1 or localhost), not {host!r}: "
                "the memory browser shows everything the memory holds"
            )
    return Address(host, port)
