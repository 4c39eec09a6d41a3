"""Charts as server-rendered SVG: no script draws them, so they show as soon as the page
does, and each bar carries a ``<title>`` (its tooltip, read by screen readers)."""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.ui.html import Html, el

# viewBox units; the SVG scales to the width of its column.
WIDTH = 720
COLUMN_HEIGHT = 180


def _bar(tooltip: str, x: float, y: float, width: float, height: float, cls: str = "bar") -> Html:
    """One bar of a chart: a rectangle whose ``<title>`` is its tooltip."""
    return el(
        "rect",
        el("title", tooltip),
        x=f"{x:.2f}",
        y=f"{y:.2f}",
        width=f"{width:.2f}",
        height=f"{height:.2f}",
        class_=cls,
    )


def columns(points: Sequence[tuple[str, int]], *, title: str) -> Html:
    """A column per point (a timeline: label, count), oldest left. The bars stretch to
    the width of the page; the scale and the first, middle and last labels are HTML
    around them, so their text keeps its size on any screen."""
    if not points:
        return el("p", "No dated records.", class_="muted")
    top = max(count for _, count in points) or 1
    step = WIDTH / len(points)
    gap = min(2.0, step * 0.2)
    bars = []
    for i, (label, count) in enumerate(points):
        h = COLUMN_HEIGHT * count / top
        x = i * step + gap / 2
        bars.append(
            _bar(f"{label}: {count:,} records", x, COLUMN_HEIGHT - h, max(step - gap, 0.5), h)
        )
    middle = points[len(points) // 2][0] if len(points) > 2 else None
    return el(
        "figure",
        el("p", f"{top:,}", class_="scale"),
        el(
            "svg",
            el("title", title),
            bars,
            viewBox=f"0 0 {WIDTH} {COLUMN_HEIGHT}",
            role="img",
            aria_label=title,
            class_="chart columns",
            preserveAspectRatio="none",
        ),
        el(
            "p",
            el("span", points[0][0]),
            el("span", middle) if middle else None,
            el("span", points[-1][0]) if len(points) > 1 else None,
            class_="ticks",
        ),
        class_="columns",
    )


def rows(points: Sequence[tuple[str, int]], *, title: str) -> Html:
    """A horizontal bar per point (label, count), in the order given: a table whose bars
    are SVG that stretches with the column, so the labels stay text of the page's size."""
    if not points:
        return el("p", "Nothing to chart.", class_="muted")
    top = max(count for _, count in points) or 1
    body = [
        el(
            "tr",
            el("th", label, scope="row"),
            el(
                "td",
                el(
                    "svg",
                    _bar(f"{label}: {count:,}", 0, 0, 100 * count / top, 10),
                    viewBox="0 0 100 10",
                    preserveAspectRatio="none",
                    aria_hidden="true",
                    class_="row-bar",
                ),
                class_="bar-cell",
            ),
            el("td", f"{count:,}", class_="num"),
        )
        for label, count in points
    ]
    return el("table", el("caption", title), el("tbody", body), class_="chart-rows")


def stacked(parts: Sequence[tuple[str, int]], total: int, *, title: str) -> Html:
    """One bar of ``total`` split into ``parts`` (the budget: what each section took)."""
    total = max(total, sum(n for _, n in parts), 1)
    x = 0.0
    rects = []
    for i, (label, n) in enumerate(parts):
        if n <= 0:
            continue
        w = WIDTH * n / total
        rects.append(_bar(f"{label}: {n:,} tokens", x, 0, w, 28, f"bar part{i % 6}"))
        x += w
    return el(
        "svg",
        el("title", title),
        el("rect", x="0", y="0", width=str(WIDTH), height="28", class_="free"),
        rects,
        viewBox=f"0 0 {WIDTH} 28",
        role="img",
        aria_label=title,
        class_="chart stacked",
        preserveAspectRatio="none",
    )
