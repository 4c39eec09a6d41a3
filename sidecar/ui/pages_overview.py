"""Overview: what the memory holds (``memory.stats``) as charts, the authored rules by tier
with their source files, the store's size, and the daemon's health and models."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from protocol.authored import AuthoredDocument
from protocol.core import HealthResult, StatusResult
from protocol.memory_stats import MemoryStatsResult, NamespaceStats
from sidecar.ui import charts
from sidecar.ui.context import PageError, UiContext
from sidecar.ui.formats import duration, size, when
from sidecar.ui.html import Child, Html, el, join, table
from sidecar.ui.layout import as_of, ns_field, page

BUCKETS = ("month", "week", "day")
TIERS = ("hard", "soft", "variant")


def _bucket_form(ctx: UiContext, ns: str, bucket: str) -> Html:
    return el(
        "form",
        el("label", "Records by ", for_="bucket"),
        el(
            "select",
            [el("option", b, value=b, selected=b == bucket) for b in BUCKETS],
            id="bucket",
            name="bucket",
            data_autosubmit=True,
        ),
        ns_field(ctx, ns) if ns != ctx.default_namespace else None,
        " ",
        el("button", "Show", type="submit"),
        method="get",
        action="/overview",
        class_="inline",
    )


def _namespace(stats: MemoryStatsResult, ns: str) -> NamespaceStats | None:
    return next((n for n in stats.namespaces if n.namespace == ns), None)


def _timeline(ctx: UiContext, ns: str, n: NamespaceStats, bucket: str) -> Html:
    points = [(b.label, b.records) for b in n.timeline]
    notes: list[str] = []
    if n.earlier:
        notes.append(f"{n.earlier:,} earlier records before the first {bucket} shown")
    if n.out_of_range:
        notes.append(f"{n.out_of_range:,} records dated outside 1970..9999, not charted")
    span = (
        f"{when(n.first_ts)} .. {when(n.last_ts)}" if n.first_ts is not None else "no dated records"
    )
    return el(
        "section",
        el("h2", "Records over time"),
        _bucket_form(ctx, ns, bucket),
        charts.columns(points, title=f"records by {bucket}"),
        el("p", span, "; " + "; ".join(notes) if notes else None, class_="muted"),
        id="timeline",
    )


def _scopes(n: NamespaceStats) -> Html:
    points = [
        ("durable", n.durable),
        ("superseded", n.superseded),
        ("history", n.history),
        ("summary", n.summary),
        ("elevated", n.elevated),
        ("dream", n.dream),
    ]
    levels = [(f"level {lv.level}", lv.count) for lv in n.summary_levels]
    return join(
        el(
            "section",
            el("h2", "Per scope"),
            charts.rows(points, title="records per scope"),
            el("p", f"{n.records:,} records in {n.sessions:,} sessions", class_="muted"),
            id="scopes",
        ),
        el(
            "section",
            el("h2", "Summaries per level"),
            charts.rows(levels, title="summaries per DAG level"),
            el(
                "p",
                f"depth {n.depth}: level 1 summarizes turns, level n summarizes level n-1",
                class_="muted",
            ),
            id="levels",
        ),
    )


def _source(doc: AuthoredDocument) -> str:
    if doc.root or doc.path:
        where = f"{doc.root.rstrip('/')}/{doc.path}" if doc.root else doc.path
        return where + (" (watched)" if doc.watched else "")
    return "sent by a client (authored.ingest)"


def _authored(docs: list[AuthoredDocument]) -> Html:
    tiers: list[Child] = []
    for tier in TIERS:
        rows = [
            el(
                "tr",
                el("th", d.source_doc, scope="row"),
                el("td", getattr(d, tier), class_="num"),
                el("td", el("code", _source(d))),
            )
            for d in docs
            if getattr(d, tier) > 0
        ]
        total = sum(getattr(d, tier) for d in docs)
        tiers.append(
            el(
                "details",
                el("summary", f"{tier}: {total:,} rule(s) from {len(rows)} document(s)"),
                el(
                    "div",
                    table(("document", "rules", "source"), rows, numeric=("rules",)),
                    class_="scroll",
                )
                if rows
                else el("p", "none", class_="muted"),
                open=tier == "hard",
            )
        )
    return el("section", el("h2", "Authored rules by tier"), tiers, id="authored")


def _store(stats: MemoryStatsResult) -> Html:
    d = stats.disk
    return el(
        "section",
        el("h2", "Store"),
        el(
            "dl",
            el("dt", "records"),
            el("dd", f"{stats.records:,} in {stats.collections:,} collections"),
            el("dt", "on disk"),
            el(
                "dd",
                f"{size(d.total_bytes)} (database {size(d.database_bytes)}, "
                f"log {size(d.wal_bytes)}, indexes {size(d.index_bytes)})",
            ),
            class_="facts",
        ),
        id="store",
    )


def _daemon(health: HealthResult, status: StatusResult) -> Html:
    models = [
        el(
            "tr",
            el("th", name, scope="row"),
            el("td", m.state),
            el("td", m.profile),
            el("td", m.reason, class_="muted"),
        )
        for name, m in sorted(health.models.items())
    ]
    return el(
        "section",
        el("h2", "Daemon"),
        el(
            "p",
            el(
                "strong",
                "healthy" if health.ok else "not healthy",
                class_="ok" if health.ok else "error",
            ),
            f": {health.message}",
        ),
        el(
            "dl",
            el("dt", "version"),
            el("dd", status.version),
            el("dt", "up"),
            el("dd", duration(status.uptime_s)),
            el("dt", "process"),
            el("dd", status.pid),
            el("dt", "endpoint"),
            el("dd", el("code", status.endpoint)),
            el("dt", "data"),
            el("dd", el("code", status.data_dir)),
            class_="facts",
        ),
        el(
            "div",
            table(("model", "state", "profile", "note"), models),
            class_="scroll",
        ),
        id="daemon",
    )


async def overview(request: Request) -> Response:
    ctx: UiContext = request.app.state.ui
    ns = ctx.namespace(request)
    bucket = request.query_params.get("bucket", "month")
    if bucket not in BUCKETS:
        raise PageError(400, f"bucket is month, week or day, not {bucket!r}")
    (stats, at), (authored, _), health, status = await asyncio.gather(
        ctx.kept(
            request,
            ("memory.stats", ns, bucket),
            lambda c: c.memory_stats(namespace=ns, bucket=bucket),  # type: ignore[arg-type]
        ),
        ctx.kept(request, ("authored.list",), lambda c: c.authored_list()),
        ctx.link.call(lambda c: c.health()),
        ctx.link.call(lambda c: c.status()),
    )
    n = _namespace(stats, ns)
    memory: Child = (
        join(_timeline(ctx, ns, n, bucket), _scopes(n))
        if n is not None
        else el("p", f"The namespace {ns} holds no records.", class_="muted")
    )
    body = join(
        as_of(request, at),
        el("div", memory, class_="grid"),
        el(
            "div",
            _authored(authored.documents),
            _store(stats),
            _daemon(health, status),
            class_="grid",
        ),
    )
    return page(ctx, request, ns=ns, active="overview", title="Overview", body=body)
