"""A small HTML builder that escapes everything it is not told is markup.

Pages are built from :func:`el` calls rather than string templates so that no memory text,
session id or daemon message can reach the page unescaped: a plain ``str`` is always
text, and only :class:`Html` (what ``el`` and ``raw`` return) passes through as markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TypeAlias

# Elements that have no closing tag.
_VOID = frozenset({"br", "hr", "img", "input", "link", "meta", "source", "wbr"})


class Html(str):
    """Markup that is already safe: written to the page as it is."""

    __slots__ = ()


Child: TypeAlias = str | int | float | Html | Iterable["Child"] | None


def raw(markup: str) -> Html:
    """Trusted markup (the page's own constants, an SVG the chart code built)."""
    return Html(markup)


def _render(child: Child, out: list[str]) -> None:
    if child is None or child is False:
        return
    if isinstance(child, Html):
        out.append(child)
    elif isinstance(child, str):
        out.append(html.escape(child, quote=False))
    elif isinstance(child, int | float):
        out.append(html.escape(str(child), quote=False))
    else:
        for part in child:
            _render(part, out)


def join(*children: Child) -> Html:
    out: list[str] = []
    _render(children, out)
    return Html("".join(out))


def _attr_name(key: str) -> str:
    # class_ -> class, aria_label -> aria-label, data_src -> data-src
    return key.rstrip("_").replace("_", "-")


def attrs(values: dict[str, object]) -> str:
    parts: list[str] = []
    for key, value in values.items():
        if value is None or value is False:
            continue
        name = _attr_name(key)
        if value is True:
            parts.append(f" {name}")
        else:
            parts.append(f' {name}="{html.escape(str(value), quote=True)}"')
    return "".join(parts)


def el(tag: str, *children: Child, **attributes: object) -> Html:
    """``<tag attrs>children</tag>``: strings among ``children`` and every attribute value
    are escaped; ``True`` writes a bare attribute, ``None``/``False`` leave it out."""
    opening = f"<{tag}{attrs(attributes)}>"
    if tag in _VOID:
        return Html(opening)
    return Html(opening + join(*children) + f"</{tag}>")


def labelled(
    label: str,
    name: str,
    *after: Child,
    tag: str = "input",
    content: Child = None,
    **attributes: object,
) -> Html:
    """A form's paragraph: ``label`` for the control ``<tag id=name name=name ...>content``,
    then ``after`` (a datalist, a button)."""
    control = el(tag, content, id=name, name=name, **attributes)
    return el("p", el("label", label, for_=name), control, *after)


def table(
    columns: Iterable[str], rows: Child, *, numeric: Iterable[str] = (), **attributes: object
) -> Html:
    """A ``<table>``: a header row of ``columns`` (those in ``numeric`` right-aligned,
    class ``num``), ``rows`` as its body."""
    num = set(numeric)
    head = [el("th", c, scope="col", class_="num" if c in num else None) for c in columns]
    return el("table", el("thead", el("tr", head)), el("tbody", rows), **attributes)
