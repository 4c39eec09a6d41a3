"""One memory: everything about it, its earlier versions, and the form that corrects it
(``memory.update``: the old text is kept as a superseded version)."""

from __future__ import annotations

import asyncio

from libravdb_client import AsyncClient, NotFound
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from protocol.assemble import MemoryRecord
from sidecar.ui.context import PageError, UiContext
from sidecar.ui.formats import gate_signals, ref, when
from sidecar.ui.forms import field, read_post
from sidecar.ui.html import Child, Html, el, join
from sidecar.ui.layout import csrf_field, ns_field, page
from sidecar.ui.records import correctable, detail_href, facts, forgettable, time_el

# Versions shown at most (a fact corrected more often than this lists its newest ones).
MAX_VERSIONS = 20


async def _get(ctx: UiContext, ns: str, collection: str, record_id: str) -> MemoryRecord | None:
    async def get(c: AsyncClient) -> MemoryRecord:
        return (await c.memory_get(collection, record_id, namespace=ns)).record

    try:
        return await ctx.link.call(get)
    except NotFound:
        return None


def _durable_of(record: MemoryRecord, ns: str) -> tuple[str, str] | None:
    """The durable fact a record is or has: itself (``user:<ns>``), or for a turn of the
    history its copy in ``user:<ns>`` under the same id (which a correction writes)."""
    if record.collection == f"user:{ns}":
        return record.collection, record.id.split("~v", 1)[0]
    if record.collection == f"turns:{ns}":
        return f"user:{ns}", record.id
    return None


async def versions(ctx: UiContext, ns: str, record: MemoryRecord) -> list[MemoryRecord]:
    """The durable fact's current text and its earlier versions (``<id>~v<n>``), newest
    first."""
    durable = _durable_of(record, ns)
    if durable is None:
        return []
    collection, base = durable
    current = record if (record.collection, record.id) == durable else await _get(ctx, ns, *durable)
    if current is None:
        return []
    revision = current.metadata.get("revision")
    newest = int(revision) - 1 if isinstance(revision, int) else 0
    numbers = range(newest, max(0, newest - MAX_VERSIONS), -1)
    found = await asyncio.gather(*(_get(ctx, ns, collection, f"{base}~v{n}") for n in numbers))
    return [current, *(v for v in found if v is not None)]


def _versions_block(
    ctx: UiContext, ns: str, record: MemoryRecord, rows: list[MemoryRecord]
) -> Html:
    if len(rows) <= 1:
        return el("p", "No earlier versions: it was never corrected.", class_="muted")
    items = []
    for i, v in enumerate(rows):
        label = "current" if i == 0 else f"version {v.id.rsplit('~v', 1)[-1]}"
        replaced = v.metadata.get("superseded_at")
        items.append(
            el(
                "li",
                el("p", v.text, class_="text"),
                el(
                    "p",
                    el("strong", label),
                    " · written ",
                    time_el(v.ts),
                    f" · replaced {when(int(replaced))}" if isinstance(replaced, int) else None,
                    " · ",
                    el("a", "open", href=detail_href(ctx, ns, v.collection, v.id))
                    if (v.collection, v.id) != (record.collection, record.id)
                    else el("em", "this record"),
                    class_="muted",
                ),
            )
        )
    return el("ol", items, class_="versions")


def _correct_form(ctx: UiContext, ns: str, record: MemoryRecord, current_text: str) -> Html:
    return el(
        "form",
        el("label", "Corrected text", for_="text"),
        el("textarea", current_text, id="text", name="text", rows="3", required=True),
        el(
            "p",
            "The text it has now is kept as an earlier version; the raw history keeps what was "
            "said, marked as corrected.",
            class_="muted",
        ),
        el("input", type="hidden", name="c", value=record.collection),
        el("input", type="hidden", name="id", value=record.id),
        csrf_field(ctx),
        ns_field(ctx, ns),
        el("button", "Save correction", type="submit"),
        method="post",
        action="/memory/update",
        class_="correct",
    )


def _forget_form(ctx: UiContext, ns: str, record: MemoryRecord) -> Html:
    return el(
        "form",
        el("input", type="hidden", name="r", value=ref(record.collection, record.id)),
        csrf_field(ctx),
        ns_field(ctx, ns),
        el("button", "Forget… (shows what goes first)", type="submit", class_="danger"),
        method="post",
        action="/forget/preview",
    )


def _gate_table(record: MemoryRecord) -> Child:
    signals = gate_signals(record.metadata)
    if not signals:
        return None
    return el(
        "details",
        el("summary", "The gate's signals"),
        el(
            "table",
            el(
                "tbody",
                [el("tr", el("th", k, scope="row"), el("td", f"{v:.3f}")) for k, v in signals],
            ),
            class_="compact",
        ),
    )


async def memory_page(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    collection = request.query_params.get("c", "")
    record_id = request.query_params.get("id", "")
    if not collection or not record_id:
        raise PageError(400, "name a record: ?c=COLLECTION&id=ID")
    record = await _get(ctx, ns, collection, record_id)
    if record is None:
        raise PageError(404, f"no record {record_id} in {collection} of namespace {ns}")
    history = await versions(ctx, ns, record)
    flash: Child = None
    if request.query_params.get("done") == "corrected":
        flash = el(
            "p",
            "Corrected. The earlier text is listed under Versions.",
            class_="flash",
            role="status",
        )
    actions: list[Child] = []
    if correctable(record):
        current = history[0].text if history else record.text
        actions.append(
            el("section", el("h2", "Correct it"), _correct_form(ctx, ns, record, current))
        )
    if forgettable(record.collection):
        actions.append(el("section", el("h2", "Forget it"), _forget_form(ctx, ns, record)))
    body = join(
        flash,
        el("blockquote", record.text, class_="text big"),
        facts(ctx, ns, record),
        _gate_table(record),
        el("section", el("h2", "Versions"), _versions_block(ctx, ns, record, history)),
        actions,
    )
    return page(ctx, request, ns=ns, active="memories", title="Memory", body=body)


async def update(request: Request) -> Response:
    ctx, form, ns = await read_post(request)
    collection, record_id, text = field(form, "c"), field(form, "id"), field(form, "text")
    try:
        result = await ctx.link.call(
            lambda c: c.memory_update(collection, record_id, text, namespace=ns)
        )
    finally:
        ctx.cache.clear()  # the lists and counts kept show the text it had
    target = detail_href(ctx, ns, result.record.collection, result.record.id)
    sep = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{sep}done=corrected", status_code=303)
