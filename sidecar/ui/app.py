"""The Starlette app: the routes of the four pages, their forms, the static files, and
how a failure becomes a page (the daemon's refusal, a daemon that stopped)."""

from __future__ import annotations

from importlib import resources

import structlog
from libravdb_client import LibravdbError, RpcError, RpcTimeout
from libravdb_client.errors import NotFound, WrongNamespace
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sidecar.ui import (
    pages_forget,
    pages_memories,
    pages_overview,
    pages_record,
    pages_sessions,
    pages_why,
)
from sidecar.ui.context import PageError, UiContext
from sidecar.ui.daemon import DaemonDown
from sidecar.ui.layout import error_body, page
from sidecar.ui.security import Asgi, GuardMiddleware

log = structlog.get_logger("libravdb.ui")

_STATIC_TYPES = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


def _static_files() -> dict[str, bytes]:
    root = resources.files("sidecar.ui").joinpath("static")
    return {name: root.joinpath(name).read_bytes() for name in _STATIC_TYPES}


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, PageError):
        return exc.status, exc.message
    if isinstance(exc, DaemonDown):
        return 503, str(exc)
    if isinstance(exc, NotFound):
        return 404, exc.message
    if isinstance(exc, WrongNamespace):
        return 403, exc.message
    if isinstance(exc, RpcTimeout):
        return 504, f"the daemon did not answer in time ({exc})"
    if isinstance(exc, RpcError):
        # The daemon's refusal (a bad date, a blank correction, ...), in its own words.
        return (400 if exc.code in (-32009, -32602) else 502), exc.message
    return 502, f"the daemon connection failed: {exc}"


async def _failed(request: Request, exc: Exception) -> Response:
    ctx: UiContext = request.app.state.ui
    status, message = _status_of(exc)
    # The code and the class only: a refusal's message can quote what the user typed.
    log.info(
        "ui_page_failed",
        path=request.url.path,
        status=status,
        error=type(exc).__name__,
        code=getattr(exc, "code", None),
    )
    try:
        ns = ctx.namespace(request)
    except PageError:
        ns = ctx.default_namespace
    return page(
        ctx,
        request,
        ns=ns,
        active="",
        title="Cannot show this",
        body=error_body(message, status),
        status=status,
    )


def build_app(ctx: UiContext) -> Asgi:
    static = _static_files()

    async def static_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in static:
            return Response(status_code=404)
        return Response(static[name], media_type=_STATIC_TYPES[name])

    async def no_icon(_request: Request) -> Response:
        return Response(status_code=204)

    routes = [
        Route("/", pages_memories.memories),
        Route("/memory", pages_record.memory_page),
        Route("/memory/update", pages_record.update, methods=["POST"]),
        Route("/forget/preview", pages_forget.preview, methods=["POST"]),
        Route("/forget", pages_forget.confirm, methods=["POST"]),
        Route("/sessions", pages_sessions.sessions),
        Route("/sessions/{sid}", pages_sessions.session_page),
        Route("/sessions/{sid}/expand/{summary}", pages_sessions.expand_page),
        Route("/why", pages_why.why_page),
        Route("/why", pages_why.why_run, methods=["POST"]),
        Route("/overview", pages_overview.overview),
        Route("/static/{name}", static_file),
        Route("/favicon.ico", no_icon),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={PageError: _failed, DaemonDown: _failed, LibravdbError: _failed},
    )
    app.state.ui = ctx
    return GuardMiddleware(app, ctx.guard)
