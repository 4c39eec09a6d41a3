"""The page around every view: navigation, the namespace switch, the main landmark; and
the small pieces several pages share (a pager, a record's facts, the CSRF field)."""

from __future__ import annotations

import time
from typing import Protocol
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse

from sidecar import __version__
from sidecar.ui.context import UiContext, href
from sidecar.ui.html import Child, Html, el, join, raw

PAGES = (
    ("memories", "/", "Memories"),
    ("sessions", "/sessions", "Sessions"),
    ("why", "/why", "Why"),
    ("overview", "/overview", "Overview"),
)


def csrf_field(ctx: UiContext) -> Html:
    return el("input", type="hidden", name="csrf", value=ctx.guard.csrf)


def ns_field(ctx: UiContext, ns: str) -> Html:
    return el("input", type="hidden", name="ns", value=ns)


def _ns_switch(ctx: UiContext, ns: str, request: Request) -> Html:
    if len(ctx.namespaces) == 1:
        return el("p", "namespace ", el("strong", ns), class_="ns")
    if ctx.any_namespace:
        chooser = el(
            "input",
            id="ns",
            name="ns",
            value=ns,
            size=14,
            autocomplete="off",
            spellcheck="false",
        )
    else:
        chooser = el(
            "select",
            [el("option", n, value=n, selected=n == ns) for n in ctx.namespaces],
            id="ns",
            name="ns",
            data_autosubmit=True,
        )
    return el(
        "form",
        el("label", "namespace ", for_="ns"),
        chooser,
        el("button", "Show", type="submit"),
        class_="ns",
        method="get",
        action=request.url.path,
    )


def page(
    ctx: UiContext,
    request: Request,
    *,
    ns: str,
    active: str,
    title: str,
    body: Child,
    status: int = 200,
) -> HTMLResponse:
    nav = el(
        "nav",
        el(
            "ul",
            [
                el(
                    "li",
                    el(
                        "a",
                        label,
                        href=href(path, ns, ctx),
                        aria_current="page" if key == active else None,
                    ),
                )
                for key, path, label in PAGES
            ],
        ),
        aria_label="Pages",
    )
    document = join(
        raw("<!doctype html>"),
        el(
            "html",
            el(
                "head",
                el("meta", charset="utf-8"),
                el("meta", name="viewport", content="width=device-width, initial-scale=1"),
                el("title", f"{title} · libravdb"),
                el("link", rel="stylesheet", href="/static/ui.css"),
                el("script", src="/static/ui.js", defer=True),
            ),
            el(
                "body",
                el("a", "Skip to content", href="#main", class_="skip"),
                el(
                    "header",
                    el("a", "libravdb", href=href("/", ns, ctx), class_="brand"),
                    nav,
                    _ns_switch(ctx, ns, request),
                ),
                el("main", el("h1", title), body, id="main", tabindex="-1"),
                el(
                    "footer",
                    f"libravdb {__version__} · daemon at {ctx.link.endpoint}",
                ),
            ),
            lang="en",
        ),
    )
    return HTMLResponse(document, status_code=status)


class Page(Protocol):
    """A page of a listing as the daemon answers it (``memory.list``, ``sessions.list``)."""

    @property
    def total(self) -> int: ...

    @property
    def next_cursor(self) -> str: ...


def pager(
    ctx: UiContext,
    ns: str,
    path: str,
    page: Page,
    *,
    shown: int,
    offset: int,
    params: dict[str, object] | None = None,
) -> Html:
    """The "41-60 of 1,234" line of ``page`` (``shown`` entries of it) and a link to the
    next page (keyset paging moves forward; the first page is one link away). ``params``:
    the listing's query parameters, kept by both links."""
    total, next_cursor, params = page.total, page.next_cursor, params or {}
    if total == 0:
        return el("p", "Nothing here.", class_="pager")
    parts: list[Child] = [el("span", f"{offset + 1:,}\u2013{offset + shown:,} of {total:,}")]
    if offset > 0:
        parts.append(el("a", "First page", href=href(path, ns, ctx, **params)))
    if next_cursor:
        parts.append(
            el(
                "a",
                "Next page",
                href=href(path, ns, ctx, **params, cursor=next_cursor, o=offset + shown),
                rel="next",
            )
        )
    return el("nav", parts, class_="pager", aria_label="Pages of results")


def as_of(request: Request, at: float) -> Html:
    """When the daemon gave the counts a page shows, and a link that asks again."""
    stamp = time.strftime("%H:%M:%S UTC", time.gmtime(at))
    query = {k: v for k, v in request.query_params.items() if k != "fresh"}
    refresh = f"{request.url.path}?{urlencode({**query, 'fresh': '1'})}"
    return el("p", f"as of {stamp} · ", el("a", "Refresh", href=refresh), class_="asof muted")


def error_body(message: str, status: int) -> Html:
    hint = {
        503: "The UI keeps serving; reload once the daemon runs.",
        404: "It may have been forgotten, or it belongs to another namespace.",
    }.get(status, "")
    return join(el("p", message, class_="error", role="alert"), el("p", hint) if hint else None)
