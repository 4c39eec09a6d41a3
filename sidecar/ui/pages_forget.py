"""Forgetting a selection in two steps: a dry run lists exactly what goes (each memory
with the number of stored copies that hold it), and only its confirm form deletes, the
same records."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from protocol.sessions import ForgetResult
from sidecar.ui.context import PageError, UiContext, href
from sidecar.ui.formats import parse_ref, ref
from sidecar.ui.forms import field, read_post
from sidecar.ui.html import Child, Html, el, join
from sidecar.ui.layout import csrf_field, ns_field, page
from sidecar.ui.records import session_href

# One forget deletes at most this many records (the daemon's bound, MAX_FORGET_ITEMS).
MAX_SELECTION = 1000


def _selection(form: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The records a form names: ``only`` (a row's own Forget button) or every ``r``."""
    values = [field(form, "only")] if field(form, "only") else form.get("r", [])
    if not values:
        raise PageError(400, "select at least one memory to forget")
    if len(values) > MAX_SELECTION:
        raise PageError(400, f"select at most {MAX_SELECTION} memories at once")
    try:
        return list(dict.fromkeys(parse_ref(v) for v in values))
    except ValueError as exc:
        raise PageError(400, str(exc)) from None


def _items(ctx: UiContext, ns: str, result: ForgetResult) -> Html:
    rows = [
        el(
            "li",
            el("p", item.text, class_="text"),
            el(
                "p",
                "session ",
                el("a", item.session_id, href=session_href(ctx, ns, item.session_id))
                if item.session_id
                else "none",
                f" · {item.copies} stored cop{'y' if item.copies == 1 else 'ies'} · ",
                el("code", f"{item.collection} {item.id}"),
                class_="muted",
            ),
        )
        for item in result.items
    ]
    return el("ol", rows, class_="memories forget-list")


def _missing(result: ForgetResult) -> Child:
    if not result.missing:
        return None
    return el(
        "section",
        el("h2", "Not found"),
        el("p", "These are not in this namespace (already forgotten, or never there):"),
        el("ul", [el("li", el("code", f"{m.collection} {m.id}")) for m in result.missing]),
    )


async def preview(request: Request) -> Response:
    ctx, form, ns = await read_post(request)
    selection = _selection(form)
    result = await ctx.link.call(lambda c: c.forget(namespace=ns, records=selection, dry_run=True))
    memories = len(result.items)
    confirm: Child = None
    if memories:
        confirm = el(
            "form",
            [el("input", type="hidden", name="r", value=ref(c, i)) for c, i in selection],
            csrf_field(ctx),
            ns_field(ctx, ns),
            el(
                "button",
                f"Forget {memories} memor{'y' if memories == 1 else 'ies'}",
                type="submit",
                class_="danger",
                id="confirm-forget",
            ),
            " ",
            el("a", "Cancel", href=href("/", ns, ctx)),
            method="post",
            action="/forget",
        )
    body = join(
        el(
            "p",
            f"Dry run: nothing has changed yet. Forgetting this selection deletes {memories} "
            f"memor{'y' if memories == 1 else 'ies'} ({result.deleted} stored records: each "
            "memory with every copy of it, its corrections included). Summaries that covered "
            "them are rebuilt from what remains, so nothing comes back through a summary.",
            class_="flash",
            role="status",
        ),
        _items(ctx, ns, result),
        _missing(result),
        confirm,
    )
    return page(ctx, request, ns=ns, active="memories", title="Forget: what goes", body=body)


async def confirm(request: Request) -> Response:
    ctx, form, ns = await read_post(request)
    selection = _selection(form)
    try:
        result = await ctx.link.call(lambda c: c.forget(namespace=ns, records=selection))
    finally:
        ctx.cache.clear()  # the lists and counts kept still hold what went
    n = len(result.items)
    body = join(
        el(
            "p",
            f"Forgotten: {n} memor{'y' if n == 1 else 'ies'} ({result.deleted} stored records). "
            f"Summaries rebuilt: {result.summaries_rebuilt}; removed: {result.summaries_removed}.",
            class_="flash",
            role="status",
            id="forgotten",
        ),
        _items(ctx, ns, result),
        _missing(result),
        el("p", el("a", "Back to the memories", href=href("/", ns, ctx))),
    )
    return page(ctx, request, ns=ns, active="memories", title="Forgotten", body=body)
