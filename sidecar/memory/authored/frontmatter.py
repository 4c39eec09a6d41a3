"""Front matter of an authored markdown document: where it is, its values (a small YAML
subset), and what they say (core flag, hop targets, tags). See ``markdown`` for how a
document uses them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FrontmatterValue = str | bool | list[str]
HOP_KEYS = ("hop_targets", "hops", "links", "related")


@dataclass(frozen=True, slots=True)
class Frontmatter:
    raw: str  # trimmed content, LF line ends
    values: Mapping[str, FrontmatterValue]
    start: int  # byte offset of the content (after the opening line)
    end: int  # byte offset just after the closing line
    end_line: int  # 1-based raw line number of the last content line


_OPEN_RE = re.compile(r"---[ \t]*(\r\n|\n)")
_CLOSE_RE = re.compile(r"(?:---|\.\.\.)[ \t]*(?:\r\n|\n|\r)?")
_KEY_RE = re.compile(r"^([A-Za-z0-9_][\w.-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_ITEM_RE = re.compile(r"^[ \t]*-(?:[ \t]+(.*)|[ \t]*)$")
WIKI_RE = re.compile(r"(!?)\[\[([^\[\]|#\n]*)(?:#([^\[\]|\n]*))?(?:\|([^\[\]\n]+))?\]\]")
WS_RE = re.compile(r"\s+")
LINE_SPLIT_RE = re.compile(r"\r\n|\r|\n")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in {"'", '"'}:
        return value[1:-1]
    return value


def _strip_comment(value: str) -> str:
    value = value.strip()
    if value[:1] in {"'", '"'}:
        end = value.find(value[0], 1)
        if end > 0 and (not value[end + 1 :].strip() or value[end + 1 :].lstrip()[0] == "#"):
            return value[: end + 1]
        return value
    m = re.search(r"\s#", value)
    return value[: m.start()] if m else value


def _split_inline_list(body: str) -> list[str]:
    items: list[str] = []
    buf: list[str] = []
    quote = ""
    depth = 0
    for ch in body:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
        elif ch in {"'", '"'}:
            quote = ch
            buf.append(ch)
        elif ch == "[":
            depth += 1
            buf.append(ch)
        elif ch == "]":
            depth -= 1
            buf.append(ch)
        elif ch == "," and depth == 0:
            items.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    items.append("".join(buf))
    return [_unquote(i) for i in items if i.strip()]


def _scalar(value: str) -> FrontmatterValue:
    value = _strip_comment(value).strip()
    if value.startswith("[") and value.endswith("]") and not value.startswith("[["):
        return _split_inline_list(value[1:-1])
    low = value.lower()
    if low in {"true", "false"}:
        return low == "true"
    return _unquote(value)


def parse_frontmatter_values(text: str) -> dict[str, FrontmatterValue]:
    """Parse the YAML subset described in the module doc. Never raises."""
    out: dict[str, FrontmatterValue] = {}
    lines = LINE_SPLIT_RE.split(text)
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _KEY_RE.match(line)
        if m is None or line[:1].isspace():
            i += 1
            continue
        key, value = m.group(1), (m.group(2) or "").strip()
        i += 1
        if value in {"|", ">", "|-", ">-", "|+", ">+"}:
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
                block.append(lines[i].strip())
                i += 1
            joiner = "\n" if value.startswith("|") else " "
            out[key] = joiner.join(block).strip()
            continue
        if value:
            out[key] = _scalar(value)
            continue
        items: list[str] = []
        nested: list[str] = []
        j = i
        while j < len(lines):
            nxt = lines[j]
            if not nxt.strip():
                j += 1
                continue
            im = _ITEM_RE.match(nxt)
            if im is not None:
                items.append(_unquote(_strip_comment(im.group(1) or "")))
                j += 1
                i = j
                continue
            if nxt[:1].isspace() and not items:
                nested.append(nxt.strip())
                j += 1
                i = j
                continue
            break
        if items:
            out[key] = [it for it in items if it]
        else:
            out[key] = "\n".join(nested)
    return out


def split_frontmatter(raw: str) -> tuple[Frontmatter | None, int]:
    """The frontmatter of ``raw`` (or None) and the character index where the body starts."""
    start = 1 if raw.startswith("\ufeff") else 0
    m = _OPEN_RE.match(raw, start)
    if m is None:
        return None, 0
    content_start = m.end()
    pos = content_start
    while pos <= len(raw):
        nl = LINE_SPLIT_RE.search(raw, pos)
        line_end = nl.start() if nl else len(raw)
        after = nl.end() if nl else len(raw)
        line = raw[pos:line_end]
        if line.rstrip(" \t") in {"---", "..."}:
            content = raw[content_start:pos]
            fm = Frontmatter(
                raw=LINE_SPLIT_RE.sub("\n", content).strip(),
                values=parse_frontmatter_values(content),
                start=len(raw[:content_start].encode("utf-8")),
                end=len(raw[:after].encode("utf-8")),
                end_line=1 + len(LINE_SPLIT_RE.findall(content)),
            )
            return fm, after
        if nl is None:
            break
        pos = after
    return None, 0


def is_truthy(value: FrontmatterValue | None) -> bool | None:
    """``True``/``False`` for boolean-like values, ``None`` when absent or not boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    return None


def wiki_target(target: str) -> str | None:
    target = target.strip()
    if not target:
        return None
    base = target.rsplit("/", 1)[-1]
    if "." in base and not base.lower().endswith(".md"):
        return None  # an attachment, not a note
    return target


def hop_values(value: FrontmatterValue) -> list[str]:
    if isinstance(value, bool):
        return []
    values = value if isinstance(value, list) else [value]
    out: list[str] = []
    for v in values:
        v = _unquote(v)
        m = WIKI_RE.fullmatch(v.strip())
        if m is not None:
            v = m.group(2)
        v = v.strip()
        if v:
            out.append(v)
    return out


def dedupe(items: Sequence[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for it in items:
        if it not in seen:
            seen.add(it)
            out.append(it)
    return tuple(out)


_TAGS_SPLIT_RE = re.compile(r"[\s,]+")


def frontmatter_tags(values: Mapping[str, FrontmatterValue]) -> list[str]:
    out: list[str] = []
    for key in ("tags", "tag"):
        value = values.get(key)
        if isinstance(value, bool) or value is None:
            continue
        items = value if isinstance(value, list) else _TAGS_SPLIT_RE.split(value)
        out += [t.strip().lstrip("#") for t in items if t.strip().lstrip("#")]
    return out
