"""Memories: the daemon's own search, or the newest records of a scope, with filters by
scope, session, time range and namespace; a selection can be forgotten (forget.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from libravdb_client import AsyncClient, RpcError
from starlette.requests import Request
from starlette.responses import Response

from protocol.assemble import MemoryRecord, SearchFilters, SearchHitOut
from sidecar.ui.context import PageError, UiContext, href
from sidecar.ui.formats import day_bounds
from sidecar.ui.html import Child, Html, el, join
from sidecar.ui.layout import as_of, csrf_field, ns_field, page, pager
from sidecar.ui.records import memory_item

PAGE_SIZE = 50
# A search shows this many hits, and "more" doubles it up to the daemon's bound.
SEARCH_K = 20
MAX_SEARCH_K = 200
SCOPES = (
    ("", "default (list: durable, search: all)"),
    ("durable", "durable facts"),
    ("history", "history (both speakers)"),
    ("summary", "summaries"),
    ("elevated", "guidance"),
    ("dream", "dream entries"),
)
_SCOPE_NAMES = {name for name, _ in SCOPES}


@dataclass(frozen=True, slots=True)
class Filters:
    q: str
    scope: str
    session: str
    since: str
    until: str
    cursor: str
    offset: int
    k: int

    @classmethod
    def of(cls, request: Request) -> Filters:
        p = request.query_params
        scope = p.get("scope", "")
        if scope not in _SCOPE_NAMES:
            raise PageError(400, f"unknown scope {scope!r}")
        try:
            offset = max(0, int(p.get("o", "0") or 0))
            k = min(MAX_SEARCH_K, max(1, int(p.get("k", SEARCH_K) or SEARCH_K)))
        except ValueError:
            raise PageError(400, "o and k must be numbers") from None
        return cls(
            q=p.get("q", "").strip(),
            scope=scope,
            session=p.get("session", "").strip(),
            since=p.get("since", "").strip(),
            until=p.get("until", "").strip(),
            cursor=p.get("cursor", ""),
            offset=offset,
            k=k,
        )

    def bounds(self) -> tuple[int | None, int | None]:
        try:
            since = day_bounds(self.since, end=False)
            until = day_bounds(self.until, end=True)
        except ValueError as exc:
            raise PageError(400, str(exc)) from None
        if since is not None and until is not None and since > until:
            raise PageError(400, "the time range ends before it starts")
        return since, until

    def params(self) -> dict[str, object]:
        """The filters as link parameters (without paging)."""
        return {
            "q": self.q,
            "scope": self.scope,
            "session": self.session,
            "since": self.since,
            "until": self.until,
        }


def _filter_form(ctx: UiContext, ns: str, f: Filters) -> Html:
    def labelled(label: str, control: Html, for_: str) -> Html:
        return el("p", el("label", label, for_=for_), control)

    return el(
        "form",
        el(
            "p",
            el("label", "Search", for_="q"),
            el(
                "input",
                type="search",
                id="q",
                name="q",
                value=f.q,
                placeholder="what the memory should find (press / to come here)",
                autocomplete="off",
            ),
            el("button", "Search", type="submit"),
            class_="search",
        ),
        el(
            "fieldset",
            el("legend", "Filters"),
            labelled(
                "Scope",
                el(
                    "select",
                    [el("option", label, value=v, selected=v == f.scope) for v, label in SCOPES],
                    id="scope",
                    name="scope",
                ),
                "scope",
            ),
            labelled(
                "Session",
                el("input", id="session", name="session", value=f.session, size=16),
                "session",
            ),
            labelled(
                "From", el("input", type="date", id="since", name="since", value=f.since), "since"
            ),
            labelled(
                "To", el("input", type="date", id="until", name="until", value=f.until), "until"
            ),
            el(
                "p", el("button", "Apply", type="submit"), el("a", "Clear", href=href("/", ns, ctx))
            ),
            class_="filters",
        ),
        ns_field(ctx, ns) if ns != ctx.default_namespace else None,
        method="get",
        action="/",
        role="search",
    )


async def _list(
    ctx: UiContext, request: Request, ns: str, f: Filters
) -> tuple[list[MemoryRecord], Html]:
    since, until = f.bounds()
    scope = f.scope or "durable"
    key = ("memory.list", ns, scope, f.session, since, until, f.cursor)
    result, at = await ctx.kept(
        request,
        key,
        lambda c: c.memory_list(
            namespace=ns,
            session_id=f.session or None,
            scope=scope,  # type: ignore[arg-type]  # checked against SCOPES above
            since=since,
            until=until,
            limit=PAGE_SIZE,
            cursor=f.cursor or None,
        ),
    )
    nav = pager(ctx, ns, "/", result, shown=len(result.records), offset=f.offset, params=f.params())
    return result.records, join(nav, as_of(request, at))


def _search_scopes(f: Filters) -> list[str] | None:
    if not f.scope:
        return None
    if f.scope == "history" and f.session:
        return ["session"]  # the session's own turns
    return [f.scope]


async def _search(
    ctx: UiContext, ns: str, f: Filters
) -> tuple[list[tuple[MemoryRecord, float]], Html]:
    since, until = f.bounds()
    filters = SearchFilters(since=since, until=until) if since or until else None
    result = await ctx.link.call(
        lambda c: c.search(
            f.q,
            namespace=ns,
            session_id=f.session or None,
            scopes=_search_scopes(f),
            k=f.k,
            filters=filters,
        )
    )
    hits = [h for h in result.hits if not f.session or h.session_id == f.session]
    # A hit names its record; the record holds the metadata (why it was kept). Fetched side
    # by side over the UI's connections.
    records = await asyncio.gather(*(_record_of(ctx, ns, h) for h in hits))
    more: Child = None
    if len(result.hits) >= f.k and f.k < MAX_SEARCH_K:
        more = el(
            "a",
            "More results",
            href=href("/", ns, ctx, **f.params(), k=min(MAX_SEARCH_K, f.k * 2)),
            rel="next",
        )
    nav = el(
        "nav",
        el("span", f"{len(hits)} best match(es), best first"),
        more,
        class_="pager",
        aria_label="Results",
    )
    return [(r, h.score) for r, h in zip(records, hits, strict=True)], nav


async def _record_of(ctx: UiContext, ns: str, hit: SearchHitOut) -> MemoryRecord:
    async def get(c: AsyncClient) -> MemoryRecord:
        return (await c.memory_get(hit.collection, hit.id, namespace=ns)).record

    try:
        return await ctx.link.call(get)
    except RpcError:
        # Shared memory (global, authored) is served without a namespace's metadata rules;
        # the hit itself still says what it is.
        return MemoryRecord(
            collection=hit.collection,
            id=hit.id,
            text=hit.text,
            kind=hit.kind,
            role=hit.role,
            session_id=hit.session_id,
            ts=hit.ts,
            metadata={},
        )


def _results(
    ctx: UiContext, ns: str, rows: list[tuple[MemoryRecord, float | None]], nav: Html
) -> Html:
    if not rows:
        return join(nav, el("p", "No memories match.", class_="muted"))
    return el(
        "form",
        nav,
        el(
            "p",
            el(
                "label",
                el("input", type="checkbox", id="select-all", hidden=True),
                " select all",
                class_="select-all",
                hidden=True,
            ),
            el("button", "Forget selected…", type="submit", class_="danger", id="forget-selected"),
            class_="bulk",
        ),
        el("ol", [memory_item(ctx, ns, r, score=s) for r, s in rows], class_="memories"),
        nav,
        csrf_field(ctx),
        ns_field(ctx, ns),
        method="post",
        action="/forget/preview",
        aria_label="Memories",
    )


async def memories(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    f = Filters.of(request)
    rows: list[tuple[MemoryRecord, float | None]]
    if f.q:
        found, nav = await _search(ctx, ns, f)
        rows = [(r, s) for r, s in found]
    else:
        records, nav = await _list(ctx, request, ns, f)
        rows = [(r, None) for r in records]
    body = join(_filter_form(ctx, ns, f), _results(ctx, ns, rows, nav))
    return page(ctx, request, ns=ns, active="memories", title="Memories", body=body)
