"""Authored markdown → tiered nodes: rules, notes and the structure around them.

The body is parsed as strict CommonMark (markdown-it-py ``"commonmark"`` preset: no
tables, strikethrough or task lists). Top-level blocks become nodes:

==============  =====================================================================
kind            text
==============  =====================================================================
Paragraph       inline text
List            one node per top-level list item; nested lists are flattened into it
Blockquote      one node for the whole quote
CodeBlock       fenced or indented code, raw content lines, trimmed
HTMLBlock       the HTML source, trimmed
==============  =====================================================================

**Front matter and headings are structure, never nodes.** The reference made the front
matter node 0 (a hard rule in a core document, so ``title: Team handbook core: true``
was injected as a rule) and every heading a node of its own (so a bare "Rules" was
recalled as a memory). Here the front matter is metadata: ``core`` decides the tiers,
``title`` and ``tags`` go into every node's metadata, the hop keys give hop targets.
Headings give each node its ``headings`` path (the enclosing headings, outermost first).

Tags: the front matter's ``tags``/``tag`` (a list, or a scalar of words separated by
commas or blanks; a leading ``#`` is dropped) are the document's tags. Obsidian inline
tags (``#word``, ``#nested/tag``; not ``#123``, not inside code) are the node's own; a
paragraph of tags only is not a node, its tags join the document's. Every node carries the
document's tags and its own (``tags``). A document tagged ``core`` is core, like
``core: true``.

Inline text concatenates text, code spans, link text and image alt text, with a space
for line breaks; autolink URLs and inline HTML are dropped; Obsidian wiki-links
``[[Target#Heading|alias]]`` render as ``alias`` (or ``Target``); whitespace collapses.
Empty nodes are skipped.

Tiers (values as in the reference: variant 0, hard 1, soft 2):

* **Only a core document yields hard nodes.** A document is core when its front matter
  says ``core: true`` (``yes``/``on``/``1``) or tags it ``core``, or when the caller
  passes ``core_doc=True`` and the front matter does not say ``core: false``. In a core
  document every top-level list item is hard and blockquotes are soft (reference
  behaviour). The reference treated *every* watched note as core, so every list item of
  an Obsidian vault became a hard invariant.
* In a non-core document, list items and blockquotes are soft when the deontic
  classifier finds a rule in them, else variant.
* In any document a paragraph is soft when it states a rule (promoted), else variant;
  code and HTML are variant.

Front matter: an optional UTF-8 BOM, then a first line that is
exactly ``---`` (trailing spaces allowed) ended by LF or CRLF; it closes at the next line
that is ``---`` or ``...``, ended by a newline **or by end of input**. Without a closing
line there is no front matter. The content is read as a small YAML subset (scalars,
quoted strings, inline ``[a, b]`` lists, block ``- item`` lists, ``#`` comments); nested
mappings are kept as raw text. Hop targets come from the ``hop_targets``, ``hops``,
``links`` and ``related`` keys (list or scalar; ``[[wiki]]`` syntax accepted) followed by
the body's wiki-links, deduplicated in order; links to attachments (a file extension
other than ``.md``) are not hop targets. Variant nodes carry the document's hop targets,
every node its own wiki-links.

Node ids are ``<sourceDoc>#%06d`` of the ordinal (0-based, in document order of the
nodes). ``position`` is the UTF-8 byte offset in the raw input where the node's text
starts (the first inline text of the block, else its first non-blank character), non-
decreasing; ``line``/``end_line`` are 1-based raw line numbers. ``token_estimate`` uses
the one estimator of :mod:`sidecar.memory.core.tokens`. Replacing a stored document
atomically is the store's job; this module only builds the model.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from sidecar.memory.authored.deontic import evaluate_text
from sidecar.memory.authored.frontmatter import (
    HOP_KEYS,
    LINE_SPLIT_RE,
    WIKI_RE,
    WS_RE,
    Frontmatter,
    FrontmatterValue,
    dedupe,
    frontmatter_tags,
    hop_values,
    is_truthy,
    split_frontmatter,
    wiki_target,
)
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.core.tokens import estimate_tokens

DEFAULT_TOKENIZER_ID = "markdown-ingest:v1"


class NodeKind(enum.StrEnum):
    FRONTMATTER = "YAMLFrontmatter"
    HEADING = "Heading"
    PARAGRAPH = "Paragraph"
    LIST = "List"
    BLOCKQUOTE = "Blockquote"
    CODE = "CodeBlock"
    HTML = "HTMLBlock"


class Tier(enum.IntEnum):
    VARIANT = 0
    HARD = 1
    SOFT = 2


@dataclass(frozen=True, slots=True)
class AuthoredNode:
    id: str
    source_doc: str
    ordinal: int
    kind: NodeKind
    tier: Tier
    text: str
    position: int
    line: int
    end_line: int
    headings: tuple[str, ...]
    token_estimate: int
    promoted: bool
    modality_mask: int
    hop_targets: tuple[str, ...]
    links: tuple[str, ...]
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AuthoredDocument:
    source_doc: str
    tokenizer_id: str
    cache_key: str
    core: bool
    frontmatter: Frontmatter | None
    hop_targets: tuple[str, ...]
    nodes: tuple[AuthoredNode, ...] = field(default_factory=tuple)
    title: str = ""
    tags: tuple[str, ...] = ()

    @property
    def authority(self) -> float:
        return 1.0 if self.core else 0.0

    def tier(self, tier: Tier) -> list[AuthoredNode]:
        return [n for n in self.nodes if n.tier == tier]

    def node_metadata(self, node: AuthoredNode) -> dict[str, Any]:
        """The reference metadata keys for a stored node (plus ``line``, ``headings``)."""
        meta: dict[str, Any] = {
            "source_doc": self.source_doc,
            "tokenizer_id": self.tokenizer_id,
            "cache_key": self.cache_key,
            "node_kind": str(node.kind),
            "ordinal": node.ordinal,
            "position": node.position,
            "line": node.line,
            "tier": int(node.tier),
            "authority": self.authority,
            "token_estimate": node.token_estimate,
            "promoted": node.promoted,
            "modality_mask": node.modality_mask,
            "authored": True,
            "is_core_doc": self.core,
        }
        if node.headings:
            meta["headings"] = list(node.headings)
        if node.hop_targets:
            meta["hop_targets"] = list(node.hop_targets)
        if node.tags:
            meta["tags"] = list(node.tags)
        if self.title:
            meta["title"] = self.title
        return meta


# ----------------------------------------------------------------------------- frontmatter


# ---------------------------------------------------------------------------------- body


def _render_wiki(text: str, links: list[str]) -> str:
    def repl(m: re.Match[str]) -> str:
        target, heading, alias = m.group(2), m.group(3), m.group(4)
        t = wiki_target(target)
        if t is not None and not m.group(1):
            links.append(t)
        if alias:
            return alias.strip()
        shown = target.strip() or (heading or "").strip()
        return shown

    return WIKI_RE.sub(repl, text)


def _inline_text(tokens: Sequence[Token], links: list[str]) -> str:
    parts: list[str] = []
    text_run: list[str] = []
    skip_autolink = False

    def flush() -> None:
        if text_run:
            parts.append(_render_wiki("".join(text_run), links))
            text_run.clear()

    for tok in tokens:
        if tok.type == "link_open" and tok.markup == "autolink":
            skip_autolink = True
        elif tok.type == "link_close" and tok.markup == "autolink":
            skip_autolink = False
        elif skip_autolink:
            continue
        elif tok.type == "text":
            text_run.append(tok.content)
        elif tok.type in {"softbreak", "hardbreak"}:
            text_run.append(" ")
        elif tok.type == "code_inline" or tok.type == "image":
            flush()
            parts.append(tok.content)
    flush()
    return WS_RE.sub(" ", "".join(parts)).strip()


class _Lines:
    """Byte offsets of the body's lines in the raw input."""

    def __init__(self, raw: str, body_start: int) -> None:
        self.base_bytes = len(raw[:body_start].encode("utf-8"))
        self.base_line = raw[:body_start].count("\n") + (
            raw[:body_start].count("\r") - raw[:body_start].count("\r\n")
        )
        body = raw[body_start:]
        self.lines: list[str] = []
        self.offsets: list[int] = []
        off = self.base_bytes
        pos = 0
        for m in LINE_SPLIT_RE.finditer(body):
            line = body[pos : m.start()]
            self.lines.append(line)
            self.offsets.append(off)
            off += len(body[pos : m.end()].encode("utf-8"))
            pos = m.end()
        self.lines.append(body[pos:])
        self.offsets.append(off)

    def position(self, line_idx: int, needle: str | None) -> int:
        if line_idx >= len(self.lines):
            return self.offsets[-1] + len(self.lines[-1].encode("utf-8"))
        line = self.lines[line_idx]
        col = -1
        if needle:
            col = line.find(needle)
        if col < 0:
            stripped = line.lstrip()
            col = len(line) - len(stripped)
        return self.offsets[line_idx] + len(line[:col].encode("utf-8"))

    def raw_line(self, line_idx: int) -> int:
        return self.base_line + line_idx + 1


@dataclass(slots=True)
class _Block:
    kind: NodeKind
    text: str
    line_idx: int
    end_idx: int
    needle: str | None
    links: list[str]
    level: int = 0  # heading level


def _first_inline(tokens: Sequence[Token], i: int, end: int) -> Token | None:
    for k in range(i, end):
        if tokens[k].type == "inline":
            return tokens[k]
    return None


def _needle(inline: Token | None) -> str | None:
    if inline is None or not inline.content:
        return None
    first = inline.content.split("\n", 1)[0].strip()
    return first[:24] or None


def _matching_close(tokens: Sequence[Token], i: int) -> int:
    level = tokens[i].level
    close = tokens[i].type.replace("_open", "_close")
    for k in range(i + 1, len(tokens)):
        if tokens[k].type == close and tokens[k].level == level:
            return k
    return len(tokens) - 1


def _collect_text(tokens: Sequence[Token], i: int, end: int, links: list[str]) -> str:
    texts = []
    for k in range(i, end):
        if tokens[k].type == "inline":
            t = _inline_text(tokens[k].children or [], links)
            if t:
                texts.append(t)
    return " ".join(texts)


def _blocks(tokens: Sequence[Token]) -> list[_Block]:
    out: list[_Block] = []
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        line_idx = tok.map[0] if tok.map else 0
        end_idx = tok.map[1] if tok.map else line_idx + 1
        if tok.type == "heading_open" or tok.type == "paragraph_open":
            close = _matching_close(tokens, i)
            links: list[str] = []
            inline = _first_inline(tokens, i, close)
            text = _inline_text(inline.children or [], links) if inline else ""
            kind = NodeKind.HEADING if tok.type == "heading_open" else NodeKind.PARAGRAPH
            level = int(tok.tag[1:]) if kind == NodeKind.HEADING and tok.tag[1:].isdigit() else 0
            out.append(_Block(kind, text, line_idx, end_idx, _needle(inline), links, level))
            i = close + 1
        elif tok.type in {"bullet_list_open", "ordered_list_open"}:
            close = _matching_close(tokens, i)
            k = i + 1
            while k < close:
                item = tokens[k]
                if item.type == "list_item_open" and item.level == tok.level + 1:
                    item_close = _matching_close(tokens, k)
                    links = []
                    text = _collect_text(tokens, k, item_close, links)
                    il = item.map[0] if item.map else line_idx
                    ie = item.map[1] if item.map else il + 1
                    inline = _first_inline(tokens, k, item_close)
                    needle = (
                        _needle(inline) if inline and inline.map and inline.map[0] == il else None
                    )
                    out.append(_Block(NodeKind.LIST, text, il, ie, needle, links))
                    k = item_close + 1
                else:
                    k += 1
            i = close + 1
        elif tok.type == "blockquote_open":
            close = _matching_close(tokens, i)
            links = []
            text = _collect_text(tokens, i, close, links)
            inline = _first_inline(tokens, i, close)
            needle = (
                _needle(inline) if inline and inline.map and inline.map[0] == line_idx else None
            )
            out.append(_Block(NodeKind.BLOCKQUOTE, text, line_idx, end_idx, needle, links))
            i = close + 1
        elif tok.type in {"fence", "code_block"}:
            out.append(_Block(NodeKind.CODE, tok.content.strip(), line_idx, end_idx, None, []))
            i += 1
        elif tok.type == "html_block":
            out.append(_Block(NodeKind.HTML, tok.content.strip(), line_idx, end_idx, None, []))
            i += 1
        else:
            i += 1
    return out


_PARSER = MarkdownIt("commonmark")


def cache_key(raw: str | bytes, tokenizer_id: str = DEFAULT_TOKENIZER_ID) -> str:
    """hex sha256(raw ‖ 0x00 ‖ tokenizer_id), as in the reference."""
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    return hashlib.sha256(data + b"\x00" + tokenizer_id.encode("utf-8")).hexdigest()


def node_id(source_doc: str, ordinal: int) -> str:
    return f"{source_doc}#{ordinal:06d}"


def parse_document(
    source_doc: str,
    raw: str,
    *,
    core_doc: bool | None = None,
    tokenizer_id: str = DEFAULT_TOKENIZER_ID,
) -> AuthoredDocument:
    """Parse ``raw`` into an :class:`AuthoredDocument` (module doc).

    ``source_doc`` must be non-blank (``ValueError`` otherwise).
    """
    if not source_doc.strip():
        raise MemoryInputError("sourceDoc is required")
    fm, body_start = split_frontmatter(raw)
    values: Mapping[str, FrontmatterValue] = fm.values if fm else {}

    fm_hops: list[str] = []
    for key in HOP_KEYS:
        if key in values:
            fm_hops.extend(hop_values(values[key]))

    lines = _Lines(raw, body_start)
    blocks = _blocks(_PARSER.parse(raw[body_start:]))
    body_links = [link for b in blocks for link in b.links]
    hop_targets = dedupe(fm_hops + body_links)
    doc_tags = list(frontmatter_tags(values))
    doc_tags += [t for b in blocks if _only_tags(b) for t in inline_tags(b.text)]
    tags = dedupe(doc_tags)
    fm_core = is_truthy(values.get("core"))
    if fm_core is None and "core" in {t.lower() for t in tags}:
        fm_core = True
    core = fm_core if fm_core is not None else bool(core_doc)
    title = values.get("title")

    nodes: list[AuthoredNode] = []
    headings: list[tuple[int, str]] = []  # (level, text)
    for b in blocks:
        if b.kind == NodeKind.HEADING:
            # structure, not a node: the path of the nodes below it
            while headings and headings[-1][0] >= b.level:
                headings.pop()
            if b.text:
                headings.append((b.level, b.text))
            continue
        if not b.text or _only_tags(b):
            continue
        promoted, mask = False, 0
        if b.kind in {NodeKind.PARAGRAPH, NodeKind.LIST, NodeKind.BLOCKQUOTE}:
            res = evaluate_text(b.text)
            promoted, mask = res.promoted, int(res.mask)
        tier = _tier(b.kind, core=core, promoted=promoted)
        own = inline_tags(b.text) if b.kind not in {NodeKind.CODE, NodeKind.HTML} else ()
        ordinal = len(nodes)
        nodes.append(
            AuthoredNode(
                id=node_id(source_doc, ordinal),
                source_doc=source_doc,
                ordinal=ordinal,
                kind=b.kind,
                tier=tier,
                text=b.text,
                position=lines.position(b.line_idx, b.needle),
                line=lines.raw_line(b.line_idx),
                end_line=lines.raw_line(max(b.end_idx - 1, b.line_idx)),
                headings=tuple(t for _, t in headings),
                token_estimate=estimate_tokens(b.text),
                promoted=promoted,
                modality_mask=mask,
                hop_targets=hop_targets if tier == Tier.VARIANT else (),
                links=dedupe(b.links),
                tags=dedupe([*tags, *own]),
            )
        )

    return AuthoredDocument(
        source_doc=source_doc,
        tokenizer_id=tokenizer_id,
        cache_key=cache_key(raw, tokenizer_id),
        core=core,
        frontmatter=fm,
        hop_targets=hop_targets,
        nodes=tuple(nodes),
        title=title.strip() if isinstance(title, str) else "",
        tags=tags,
    )


# Obsidian tags: '#' then a letter or '_' then word characters, '/' or '-'; not after a
# word character, '#', '&' or '/' (so not "C#", "&#39;", "a/#b") and not all digits.
_TAG_RE = re.compile(r"(?<![\w#&/])#([A-Za-z_][\w/-]*)")


def inline_tags(text: str) -> tuple[str, ...]:
    """The Obsidian ``#tags`` in ``text``, in order, without the ``#``."""
    return dedupe([m.group(1).rstrip("/-") for m in _TAG_RE.finditer(text)])


def _only_tags(b: _Block) -> bool:
    """A paragraph of tags and nothing else: document metadata, not a note."""
    return b.kind == NodeKind.PARAGRAPH and bool(b.text) and not _TAG_RE.sub("", b.text).strip()


def _tier(kind: NodeKind, *, core: bool, promoted: bool) -> Tier:
    if kind == NodeKind.LIST:
        if core:
            return Tier.HARD
        return Tier.SOFT if promoted else Tier.VARIANT
    if kind == NodeKind.BLOCKQUOTE:
        return Tier.SOFT if (core or promoted) else Tier.VARIANT
    if kind == NodeKind.PARAGRAPH:
        return Tier.SOFT if promoted else Tier.VARIANT
    return Tier.VARIANT
