"""``--http HOST:PORT``: where the UI listens. Loopback only: the pages show everything the
memory holds, and the session token is the only thing between them and anyone who can
reach the port."""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.endpoints import parse_loopback

_WHY = "the memory browser shows everything the memory holds"
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
    return Address(*parse_loopback(text, free_port=True, why=_WHY))
