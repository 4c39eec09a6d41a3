"""What every page handler reaches: the daemon, the session's guard, the namespaces this
UI may show, and the request's own namespace."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlencode

from libravdb_client import AsyncClient
from starlette.requests import Request

from sidecar.ui.cache import ReadCache
from sidecar.ui.daemon import DaemonLink
from sidecar.ui.security import Guard

T = TypeVar("T")


class PageError(Exception):
    """A page that cannot be shown: its status and what to tell the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class UiContext:
    link: DaemonLink
    guard: Guard
    # The namespaces this UI serves, the first being the default; empty when it was
    # started with --all-namespaces (then any namespace may be named).
    namespaces: tuple[str, ...]
    default_namespace: str
    cache: ReadCache

    async def kept(
        self, request: Request, key: Hashable, op: Callable[[AsyncClient], Awaitable[T]]
    ) -> tuple[T, float]:
        """A whole-namespace read through the cache (``cache.py``): the answer and when the
        daemon gave it. ``?fresh=1`` (a page's Refresh link) reads it anew."""
        fresh = request.query_params.get("fresh") == "1"
        return await self.cache.get(key, lambda: self.link.call(op), fresh=fresh)

    @property
    def any_namespace(self) -> bool:
        return not self.namespaces

    def namespace(self, request: Request, form: dict[str, list[str]] | None = None) -> str:
        """The namespace a request names (``ns``), checked against what this UI serves."""
        named = (form or {}).get("ns", [""])[0] or request.query_params.get("ns", "")
        ns = named.strip() or self.default_namespace
        if self.namespaces and ns not in self.namespaces:
            raise PageError(
                403,
                f"this UI serves the namespace(s) {', '.join(self.namespaces)}; start "
                "`libravdb ui --namespace NS` (or --all-namespaces) to browse another",
            )
        return ns


def href(path: str, ns: str, ctx: UiContext, **params: object) -> str:
    """``path?query`` with the empty parameters left out and ``ns`` only when it is not
    the default (the links of the default namespace stay short)."""
    query: dict[str, str] = {}
    if ns != ctx.default_namespace:
        query["ns"] = ns
    for key, value in params.items():
        if value is None or value == "" or value is False:
            continue
        query[key] = str(value)
    return f"{path}?{urlencode(query)}" if query else path
