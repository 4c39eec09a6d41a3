"""Why: the context ``assemble`` builds for a prompt under a budget, each item with the
parts of its score, and what was left out and why (``explain``). The page to open when an
agent said something odd: it shows what the agent was given."""

from __future__ import annotations

import secrets

from libravdb_client import AsyncClient
from starlette.requests import Request
from starlette.responses import Response

from protocol.assemble import AssembleParams, AssembleResult
from protocol.sessions_list import SessionsListResult
from sidecar.ui import charts
from sidecar.ui.context import PageError, UiContext
from sidecar.ui.formats import score_parts
from sidecar.ui.forms import field, read_post
from sidecar.ui.html import Child, Html, el, join, labelled, table
from sidecar.ui.layout import csrf_field, ns_field, page
from sidecar.ui.records import detail_href, session_href, time_el

DEFAULT_BUDGET = 4000
DEFAULT_FRACTION = 0.25
RECENT_SESSIONS = 20
BUDGET_PARTS = ("hard", "tail", "soft", "elevated", "retrieval", "recovery")


def _form(ctx: UiContext, ns: str, values: dict[str, str], sessions: list[str]) -> Html:
    return el(
        "form",
        labelled(
            "Prompt",
            "prompt",
            tag="textarea",
            content=values.get("prompt", ""),
            rows="3",
            required=True,
            placeholder="what the user said to the agent",
        ),
        el(
            "fieldset",
            el("legend", "Assemble as"),
            labelled(
                "Session",
                "session",
                el("datalist", [el("option", value=s) for s in sessions], id="recent-sessions"),
                value=values.get("session", ""),
                list="recent-sessions",
                placeholder="none: retrieval only",
                size=18,
            ),
            labelled(
                "Token budget",
                "budget",
                type="number",
                min="1",
                step="1",
                value=values.get("budget", str(DEFAULT_BUDGET)),
            ),
            labelled(
                "Memory share",
                "fraction",
                type="number",
                min="0.01",
                max="1",
                step="0.01",
                value=values.get("fraction", str(DEFAULT_FRACTION)),
            ),
            class_="filters",
        ),
        csrf_field(ctx),
        ns_field(ctx, ns),
        el("p", el("button", "Assemble", type="submit")),
        method="post",
        action="/why",
        class_="why",
    )


def _parts(reason: str) -> Html:
    section, parts = score_parts(reason)
    if not parts:  # a rule, the tail: placed by precedence, not by a score
        return el("span", reason, class_="parts")
    return el(
        "span",
        el("span", section, class_="section") if section else None,
        [el("span", el("b", k), f" {v}", class_="part") for k, v in parts],
        class_="parts",
        title=reason,
    )


def _selected(ctx: UiContext, ns: str, result: AssembleResult) -> Html:
    if not result.selected:
        return el("p", "Nothing was selected.", class_="muted")
    rows = []
    for i, item in enumerate(result.selected, 1):
        text = item.text if isinstance(item.text, str) else ""
        rows.append(
            el(
                "tr",
                el("td", i, class_="num"),
                el("td", item.kind),
                el(
                    "td",
                    el("a", text or item.id, href=detail_href(ctx, ns, item.collection, item.id)),
                    el("br"),
                    el(
                        "small",
                        time_el(item.ts),
                        " · ",
                        el("a", item.session_id, href=session_href(ctx, ns, item.session_id))
                        if item.session_id
                        else "no session",
                    ),
                ),
                el("td", f"{item.score:.3f}", class_="num"),
                el("td", item.tokens, class_="num"),
                el("td", _parts(item.reason)),
            )
        )
    return _table(("#", "kind", "memory", "score", "tokens", "score parts"), rows, "selected")


def _considered(ctx: UiContext, ns: str, result: AssembleResult) -> Html:
    if not result.considered:
        return el("p", "No retrieval candidate was left out.", class_="muted")
    rows = [
        el(
            "tr",
            el("td", el("a", c.text or c.id, href=detail_href(ctx, ns, c.collection, c.id))),
            el("td", c.why, class_="why"),
            el("td", f"{c.score:.3f}", class_="num"),
            el("td", c.tokens, class_="num"),
            el("td", _parts(c.reason)),
        )
        for c in result.considered
    ]
    return _table(
        ("memory", "why it was left out", "score", "tokens", "score parts"), rows, "considered"
    )


def _table(heads: tuple[str, ...], rows: list[Html], cls: str) -> Html:
    return el("div", table(heads, rows, class_=cls), class_="scroll")


def _budget(result: AssembleResult) -> Html:
    b = result.budget
    parts = [(name, int(getattr(b, name))) for name in BUDGET_PARTS]
    legend = el(
        "ul",
        [
            el("li", el("span", class_=f"swatch part{i}"), f"{name} {n:,}")
            for i, (name, n) in enumerate(parts)
        ],
        el("li", f"used {b.used:,} of {b.total:,}"),
        class_="legend",
    )
    return join(
        charts.stacked(parts, b.total, title=f"memory budget: {b.used} of {b.total} tokens used"),
        legend,
    )


def _results(ctx: UiContext, ns: str, result: AssembleResult) -> Html:
    degraded: Child = None
    if result.degraded:
        degraded = el("ul", [el("li", d) for d in result.degraded], class_="error", role="alert")
    total_ms = (result.timings or {}).get("totalMs")
    return join(
        el(
            "section",
            el("h2", "Budget"),
            degraded,
            _budget(result),
            el(
                "p",
                f"{result.estimated_tokens:,} tokens in all"
                + (f"; assembled in {total_ms:.1f} ms" if total_ms else ""),
                class_="muted",
            ),
            id="budget-section",
        ),
        el(
            "section",
            el("h2", "Selected, in order of precedence"),
            _selected(ctx, ns, result),
            id="selected",
        ),
        el("section", el("h2", "Left out, and why"), _considered(ctx, ns, result), id="considered"),
        el(
            "section",
            el("h2", "What the agent is given"),
            el(
                "pre",
                result.system_prompt_addition or "(nothing: no memory is relevant)",
                class_="prompt",
            ),
            id="addition",
        ),
    )


def _recent_sessions(ctx: UiContext, ns: str) -> list[str]:
    """Suggestions for the session field: the Sessions page's first page when the UI keeps
    it. Not asked of the daemon for this page: the field takes any session id, so the
    form costs no listing (``sessions.list`` is an index read since the listing by time,
    tens of milliseconds on a 100k store, but a form needs none)."""
    kept = ctx.cache.peek(("sessions.list", ns, ""))
    if not isinstance(kept, SessionsListResult):
        return []
    return [s.session_id for s in kept.sessions[:RECENT_SESSIONS]]


async def why_page(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    sessions = _recent_sessions(ctx, ns)
    body = join(
        el(
            "p",
            "Type what the user said (and the session it was said in) to see the memory the "
            "agent gets for it: every item with the parts of its score, and what was left out.",
            class_="muted",
        ),
        _form(ctx, ns, {"session": request.query_params.get("session", "")}, sessions),
    )
    return page(ctx, request, ns=ns, active="why", title="Why", body=body)


def _numbers(form: dict[str, list[str]]) -> tuple[float, float]:
    try:
        budget = float(field(form, "budget") or DEFAULT_BUDGET)
        fraction = float(field(form, "fraction") or DEFAULT_FRACTION)
    except ValueError:
        raise PageError(400, "the budget and the memory share must be numbers") from None
    if budget <= 0 or not 0 < fraction <= 1:
        raise PageError(400, "the budget must be above 0 and the memory share in (0, 1]")
    return budget, fraction


async def why_run(request: Request) -> Response:
    ctx, form, ns = await read_post(request)
    prompt = field(form, "prompt").strip()
    if not prompt:
        raise PageError(400, "type a prompt")
    budget, fraction = _numbers(form)
    session = field(form, "session").strip()
    params = AssembleParams(
        # Without a session only retrieval runs: a fresh id has no tail and owns nothing.
        session_id=session or f"ui-why-{secrets.token_hex(4)}",
        token_budget=budget,
        namespace=ns,
        prompt=prompt,
        memory_budget_fraction=fraction,
        explain=True,
        item_text=True,
    )

    async def assemble(c: AsyncClient) -> AssembleResult:
        return await c.call_typed("assemble", params, AssembleResult)

    result = await ctx.link.call(assemble)
    values = {
        "prompt": prompt,
        "session": session,
        "budget": f"{budget:g}",
        "fraction": f"{fraction:g}",
    }
    body = join(_form(ctx, ns, values, _recent_sessions(ctx, ns)), _results(ctx, ns, result))
    return page(ctx, request, ns=ns, active="why", title="Why", body=body)
