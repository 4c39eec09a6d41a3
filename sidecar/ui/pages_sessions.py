"""Sessions: the namespace's sessions (``sessions.list``), and one session as the timeline
of its turns with its summary DAG beside it. A summary opens to its children (``expand``
one level down): the summaries it condensed, or the turns it covers."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from protocol.assemble import MemoryRecord
from protocol.sessions import ExpandedTurn
from sidecar.ui.context import PageError, UiContext, href
from sidecar.ui.html import Child, Html, el, join, table
from sidecar.ui.layout import as_of, page, pager
from sidecar.ui.records import detail_href, session_href, time_el

SESSIONS_PAGE = 50
TURNS_PAGE = 100
# Summaries read for the DAG; a session compacted further than this shows its newest.
MAX_SUMMARIES = 500


async def sessions(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    cursor = request.query_params.get("cursor", "")
    o = request.query_params.get("o", "0")
    offset = int(o) if o.isdigit() else 0
    result, at = await ctx.kept(
        request,
        ("sessions.list", ns, cursor),
        lambda c: c.sessions_list(namespace=ns, limit=SESSIONS_PAGE, cursor=cursor or None),
    )
    rows = [
        el(
            "tr",
            el("th", el("a", s.session_id, href=session_href(ctx, ns, s.session_id)), scope="row"),
            el("td", f"{s.turn_count:,}", class_="num"),
            el("td", f"{s.summary_count:,}", class_="num"),
            el("td", time_el(s.first_ts)),
            el("td", time_el(s.last_ts)),
        )
        for s in result.sessions
    ]
    sessions = table(
        ("session", "turns", "summaries", "first turn", "last turn"),
        rows,
        numeric=("turns", "summaries"),
        class_="sessions",
    )
    nav = pager(ctx, ns, "/sessions", result, shown=len(result.sessions), offset=offset)
    body = join(
        el("p", "Most recently active first.", class_="muted"),
        as_of(request, at),
        nav,
        el("div", sessions, class_="scroll") if rows else None,
    )
    return page(ctx, request, ns=ns, active="sessions", title="Sessions", body=body)


def expand_href(ctx: UiContext, ns: str, session_id: str, summary_id: str) -> str:
    return href(
        f"/sessions/{quote(session_id, safe='')}/expand/{quote(summary_id, safe='')}", ns, ctx
    )


def summary_node(
    ctx: UiContext, ns: str, session_id: str, summary_id: str, text: str, label: str
) -> Html:
    """A summary that opens to its children: fetched when opened (ui.js), or on a page of
    their own through the link inside (without JavaScript)."""
    url = expand_href(ctx, ns, session_id, summary_id)
    return el(
        "details",
        el("summary", el("span", label, class_="badge"), " ", text),
        el("div", el("a", "Show what it summarizes", href=url), class_="kids"),
        class_="sum",
        data_expand=url,
        data_summary=summary_id,
    )


def _dag(ctx: UiContext, ns: str, session_id: str, summaries: list[MemoryRecord]) -> Html:
    if not summaries:
        return el("p", "Not compacted: no summaries yet.", class_="muted")
    covered = {
        child
        for s in summaries
        for child in (s.metadata.get("source_ids") or [])
        if isinstance(child, str)
    }
    roots = [s for s in summaries if s.id not in covered]

    def start(s: MemoryRecord) -> int:
        first = s.metadata.get("source_ts_min")
        return first if isinstance(first, int) else (s.ts or 0)

    roots.sort(key=start)
    depth = max((int(s.metadata.get("level", 1) or 1) for s in summaries), default=1)
    return join(
        el(
            "p",
            f"{len(summaries)} summaries, depth {depth}; the top level, oldest first:",
            class_="muted",
        ),
        el(
            "ul",
            [
                el(
                    "li",
                    summary_node(
                        ctx, ns, session_id, s.id, s.text, f"L{s.metadata.get('level', 1)}"
                    ),
                )
                for s in roots
            ],
            class_="dag",
        ),
    )


def _turn(ctx: UiContext, ns: str, record: MemoryRecord) -> Html:
    turn_id = str(record.metadata.get("source_turn_id") or record.id.split(":", 1)[-1])
    return el(
        "li",
        el(
            "p",
            el("span", record.role or "?", class_=f"role {record.role}"),
            " ",
            time_el(record.ts),
            class_="muted",
        ),
        el("p", record.text, class_="text"),
        el("a", "details", href=detail_href(ctx, ns, record.collection, record.id), class_="small"),
        id=f"t-{turn_id}",
        class_="turn",
    )


async def session_page(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    session_id = request.path_params["sid"]
    cursor = request.query_params.get("cursor", "")
    o = request.query_params.get("o", "0")
    offset = int(o) if o.isdigit() else 0
    turns, at = await ctx.kept(
        request,
        ("memory.list", ns, "history", session_id, None, None, cursor),
        lambda c: c.memory_list(
            namespace=ns,
            session_id=session_id,
            scope="history",
            limit=TURNS_PAGE,
            cursor=cursor or None,
        ),
    )
    summaries, _ = await ctx.kept(
        request,
        ("memory.list", ns, "summary", session_id, None, None, ""),
        lambda c: c.memory_list(
            namespace=ns, session_id=session_id, scope="summary", limit=MAX_SUMMARIES
        ),
    )
    if turns.total == 0 and summaries.total == 0:
        raise PageError(404, f"no session {session_id} in namespace {ns}")
    nav = pager(ctx, ns, request.url.path, turns, shown=len(turns.records), offset=offset)
    timeline = el(
        "section",
        el("h2", "Turns"),
        el(
            "p",
            f"{turns.total:,} turns; newest page first, each page in the order said.",
            class_="muted",
        ),
        nav,
        el("ol", [_turn(ctx, ns, r) for r in reversed(turns.records)], class_="timeline"),
        class_="col",
        aria_label="Turns",
    )
    dag = el(
        "section",
        el("h2", "Summary DAG"),
        _dag(ctx, ns, session_id, summaries.records),
        class_="col",
        aria_label="Summary DAG",
    )
    why = el("a", "Ask Why in this session", href=href("/why", ns, ctx, session=session_id))
    body = join(el("p", why), as_of(request, at), el("div", timeline, dag, class_="split"))
    return page(ctx, request, ns=ns, active="sessions", title=f"Session {session_id}", body=body)


def _children(ctx: UiContext, ns: str, session_id: str, kids: list[ExpandedTurn]) -> Html:
    items: list[Child] = []
    for kid in kids:
        if kid.role == "summary":
            items.append(el("li", summary_node(ctx, ns, session_id, kid.id, kid.text, "summary")))
        else:
            items.append(
                el(
                    "li",
                    el("span", kid.role, class_=f"role {kid.role}"),
                    " ",
                    el("a", kid.text, href=f"{session_href(ctx, ns, session_id)}#t-{kid.id}"),
                    " ",
                    time_el(kid.ts),
                    class_="kid-turn",
                )
            )
    return el("ul", items, class_="kids-list")


async def expand_page(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    session_id = request.path_params["sid"]
    summary_id = request.path_params["summary"]
    # expand acts for the session's owner whoever asks: reading the summary through the
    # namespace first keeps another namespace's sessions out of this UI.
    await ctx.link.call(
        lambda c: c.memory_get(f"session_summary:{session_id}", summary_id, namespace=ns)
    )
    result = await ctx.link.call(lambda c: c.expand(session_id, summary_id, max_depth=1))
    fragment = _children(ctx, ns, session_id, result.turns)
    if request.headers.get("x-fragment"):
        return HTMLResponse(fragment)
    body = join(
        el("p", el("a", f"Back to session {session_id}", href=session_href(ctx, ns, session_id))),
        fragment,
    )
    return page(ctx, request, ns=ns, active="sessions", title=f"Summary {summary_id}", body=body)
