"""Who may use the UI, and how a web page in the same browser is kept out.

The memory holds a person's conversations, and loopback is not private from the web
pages a browser on the same machine runs. So, before any page is built:

* **Host** must name this server (``127.0.0.1:PORT``, ``localhost:PORT`` or
  ``[::1]:PORT``), else 421: a DNS name rebound to 127.0.0.1 reaches the socket but not
  the pages.
* **Origin**, when the browser sends one, must be this server's own origin (the port
  included: another local server on 127.0.0.1 is another origin), and a POST must carry
  it; ``Sec-Fetch-Site`` ``cross-site`` or ``same-site`` is refused too. Either is 403.
* **The session token**: the URL ``libravdb ui`` prints (``/login?token=...``) sets it
  as an HttpOnly, SameSite=Strict cookie and redirects to a URL without it; every other
  request must carry that cookie, else 401. The token is compared in constant time and
  never logged (the access log has the path, never the query string).
* **Writes** are POSTs whose form carries the CSRF token, which only a page this server
  rendered contains (:func:`check_csrf`).

Every response says not to be framed, cached, sniffed or referred to from another origin, and allows
scripts and styles from this origin only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import structlog

log = structlog.get_logger("libravdb.ui")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

LOGIN_PATH = "/login"
HEADERS: list[tuple[bytes, bytes]] = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with
    # its form POSTs, and the origin check needs the real one.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_REFUSED_FETCH_SITES = (b"cross-site", b"same-site")


@dataclass(frozen=True, slots=True)
class Guard:
    """The session's secrets and the names this server answers to."""

    port: int
    hosts: frozenset[str]  # "127.0.0.1", "localhost", "[::1]"
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def cookie(self) -> str:
        # Cookies ignore ports: two UIs on one machine must not overwrite each other's.
        return f"libravdb_ui_{self.port}"

    @property
    def csrf(self) -> str:
        return hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()

    def host_ok(self, host: str) -> bool:
        return host.lower() in {f"{h}:{self.port}" for h in self.hosts}

    def origin_ok(self, origin: str) -> bool:
        return origin.lower() in {f"http://{h}:{self.port}" for h in self.hosts}

    def token_ok(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self.token.encode())


def check_csrf(guard: Guard, form: dict[str, list[str]]) -> bool:
    sent = (form.get("csrf") or [""])[0]
    return hmac.compare_digest(sent.encode(), guard.csrf.encode())


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def _cookie(scope: Scope, name: str) -> str:
    raw = (_header(scope, b"cookie") or b"").decode("latin-1")
    for part in raw.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return ""


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = (f"<!doctype html><meta charset=utf-8><title>libravdb</title><p>{text}</p>").encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


NOT_SIGNED_IN = (
    "This page needs the session token: open the address <code>libravdb ui</code> printed "
    "(it ends in <code>/login?token=...</code>)."
)


class GuardMiddleware:
    """The checks above, the security headers and the access log, around the app."""

    def __init__(self, app: Asgi, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [0]

        async def send_logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        try:
            await self._checked(scope, receive, send_logged)
        finally:
            # The path only: a query string can hold a search or a token.
            log.info(
                "ui_request",
                method=scope.get("method", ""),
                path=scope.get("path", ""),
                status=status[0],
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
            )

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self._refusal(scope)
        if refusal is not None:
            code, text = refusal
            await _plain(send, code, text, [])
            return
        if scope.get("path") == LOGIN_PATH:
            await self._login(scope, send)
            return
        if not self.guard.token_ok(_cookie(scope, self.guard.cookie)):
            await _plain(send, 401, NOT_SIGNED_IN, [])
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        guard = self.guard
        host = (_header(scope, b"host") or b"").decode("latin-1")
        if not guard.host_ok(host):
            return 421, "This server answers only to its own loopback address."
        method = scope.get("method", "")
        if method not in ("GET", "HEAD", "POST"):
            return 405, "Method not allowed."
        if _header(scope, b"sec-fetch-site") in _REFUSED_FETCH_SITES:
            return 403, "Requests from other sites are refused."
        origin = _header(scope, b"origin")
        if origin is not None and not guard.origin_ok(origin.decode("latin-1")):
            return 403, "Requests from other origins are refused."
        if method == "POST" and origin is None:
            return 403, "A write must come from a page of this server."
        return None

    async def _login(self, scope: Scope, send: Send) -> None:
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        if not self.guard.token_ok((query.get("token") or [""])[0]):
            await _plain(send, 401, NOT_SIGNED_IN, [])
            return
        cookie = f"{self.guard.cookie}={self.guard.token}; HttpOnly; SameSite=Strict; Path=/"
        # A redirect, so the token leaves the address bar at once.
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", b"/"),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})
