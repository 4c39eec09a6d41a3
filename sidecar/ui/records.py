"""One stored record as the Memories pages show it: its text and the facts about it (when it
was said, its session, its scope, why it was kept), with links to its page."""

from __future__ import annotations

from urllib.parse import quote

from protocol.assemble import MemoryRecord
from sidecar.ui.context import UiContext, href
from sidecar.ui.formats import iso, kept_because, ref, scope_of, when
from sidecar.ui.html import Child, Html, el

# Records a namespace's forget refuses (summaries: forget their turns; shared or authored
# memory: not the namespace's to forget).
_UNFORGETTABLE = ("summary", "global", "authored")
# memory.update corrects durable facts and turns of the namespace's history.
CORRECTABLE_PREFIXES = ("user:", "turns:")


def forgettable(collection: str) -> bool:
    return scope_of(collection) not in _UNFORGETTABLE


def correctable(record: MemoryRecord) -> bool:
    return (
        record.collection.startswith(CORRECTABLE_PREFIXES)
        and "~v" not in record.id
        and not record.metadata.get("superseded_by")
    )


def detail_href(ctx: UiContext, ns: str, collection: str, record_id: str) -> str:
    return href("/memory", ns, ctx, c=collection, id=record_id)


def session_href(ctx: UiContext, ns: str, session_id: str) -> str:
    return href(f"/sessions/{quote(session_id, safe='')}", ns, ctx)


def time_el(ts: int | None) -> Html:
    return el("time", when(ts), datetime=iso(ts) or None)


def facts(ctx: UiContext, ns: str, record: MemoryRecord, score: float | None = None) -> Html:
    """The facts line under a memory's text."""
    meta = record.metadata
    # A correction's time is when it was made (memory.update sets it), not when it was said.
    corrected = meta.get("provenance_class") == "user_update"
    items: list[Child] = [
        el("dt", "corrected" if corrected else "said"),
        el("dd", time_el(record.ts)),
        el("dt", "session"),
        el(
            "dd",
            el("a", record.session_id, href=session_href(ctx, ns, record.session_id))
            if record.session_id
            else "none",
        ),
        el("dt", "scope"),
        el("dd", scope_of(record.collection), " ", el("code", record.collection)),
        el("dt", "kept"),
        el("dd", kept_because(record.collection, meta), class_="why"),
    ]
    if record.role:
        items[0:0] = [el("dt", "speaker"), el("dd", record.role)]
    if score is not None:
        items += [el("dt", "score"), el("dd", f"{score:.3f}")]
    return el("dl", items, class_="facts")


def memory_item(
    ctx: UiContext, ns: str, record: MemoryRecord, *, score: float | None = None
) -> Html:
    """One memory in a list: a selection box (for forgetting), its text and facts, and
    its actions."""
    value = ref(record.collection, record.id)
    select: Child = None
    forget: Child = None
    if forgettable(record.collection):
        select = el(
            "input",
            type="checkbox",
            name="r",
            value=value,
            class_="pick",
            aria_label="select for forgetting",
        )
        forget = el(
            "button", "Forget…", type="submit", name="only", value=value, class_="link danger"
        )
    badges: list[Child] = []
    if record.metadata.get("superseded_by"):
        badges.append(el("span", "superseded", class_="badge"))
    action = "Correct" if correctable(record) else "Details"
    return el(
        "li",
        select,
        el(
            "div",
            el("p", badges, record.text, class_="text"),
            facts(ctx, ns, record, score),
            el(
                "p",
                el("a", action, href=detail_href(ctx, ns, record.collection, record.id)),
                forget,
                class_="actions",
            ),
            class_="body",
        ),
        class_="mem",
    )
