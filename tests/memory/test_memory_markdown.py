from __future__ import annotations

import hashlib

import pytest

from sidecar.memory.authored.frontmatter import parse_frontmatter_values, split_frontmatter
from sidecar.memory.authored.markdown import (
    NodeKind,
    Tier,
    cache_key,
    inline_tags,
    parse_document,
)

FULL = """---
title: Guide
hop_targets:
  - alpha
  - beta
---
# Guide

You must keep the recent tail exact.

> Prefer small, focused modules.

- Run the linter.
- The cache lives in memory.

The history of the project is long.

```go
func main() {}
```
"""


def kinds(doc_nodes: object) -> list[str]:
    return [n.kind.value for n in doc_nodes]  # type: ignore[attr-defined]


def test_reference_full_document_core() -> None:
    doc = parse_document("guide.md", FULL, core_doc=True)
    # front matter and the heading are structure, not nodes (the reference made both nodes)
    assert kinds(doc.nodes) == ["Paragraph", "Blockquote", "List", "List", "Paragraph", "CodeBlock"]
    tiers = [n.tier for n in doc.nodes]
    assert tiers.count(Tier.HARD) == 2
    assert tiers.count(Tier.SOFT) == 2
    assert tiers.count(Tier.VARIANT) == 2
    plain = doc.nodes[4]
    assert plain.text == "The history of the project is long."
    assert plain.hop_targets == ("alpha", "beta")
    assert plain.headings == ("Guide",)
    assert doc.authority == 1.0 and doc.title == "Guide"
    assert doc.node_metadata(plain)["title"] == "Guide"
    assert [n.id for n in doc.nodes][:2] == ["guide.md#000000", "guide.md#000001"]
    assert [n.ordinal for n in doc.nodes] == list(range(6))
    assert doc.nodes[5].text == "func main() {}"


def test_non_core_document_has_no_hard_nodes() -> None:
    doc = parse_document("vault/note.md", FULL)
    assert not doc.core
    assert doc.tier(Tier.HARD) == []
    by_text = {n.text: n for n in doc.nodes}
    assert by_text["Run the linter."].tier == Tier.SOFT  # a rule
    assert by_text["The cache lives in memory."].tier == Tier.VARIANT
    assert by_text["Prefer small, focused modules."].tier == Tier.SOFT  # a rule
    assert NodeKind.FRONTMATTER not in {n.kind for n in doc.nodes}
    assert doc.authority == 0.0


def test_non_rule_blockquote_in_non_core_doc_is_variant() -> None:
    doc = parse_document("n.md", "> The sea was calm that night.\n")
    assert doc.nodes[0].tier == Tier.VARIANT
    core = parse_document("n.md", "> The sea was calm that night.\n", core_doc=True)
    assert core.nodes[0].tier == Tier.SOFT


def test_frontmatter_core_flag_wins() -> None:
    assert parse_document("a.md", "---\ncore: true\n---\n- x\n").core
    assert parse_document("a.md", "---\ncore: yes\n---\n- x\n").core
    assert not parse_document("a.md", "---\ncore: false\n---\n- x\n", core_doc=True).core
    assert parse_document("a.md", "---\ntitle: t\n---\n- x\n", core_doc=True).core


def test_pure_code_document() -> None:
    doc = parse_document("c.md", "```\nprint(1)\n```\n", core_doc=True)
    assert len(doc.nodes) == 1
    assert doc.nodes[0].kind == NodeKind.CODE and doc.nodes[0].tier == Tier.VARIANT


def test_persisted_example_counts() -> None:
    raw = (
        "---\ntags: [rules]\n---\n"
        "You must answer in English.\n\n"
        "> Quote of the day.\n\n"
        "- keep it short\n\n"
        "Long ago a dragon lived in these hills.\n"
    )
    doc = parse_document("p.md", raw, core_doc=True)
    tiers = [n.tier for n in doc.nodes]
    assert (tiers.count(Tier.HARD), tiers.count(Tier.SOFT), tiers.count(Tier.VARIANT)) == (1, 2, 1)
    assert doc.authority == 1.0
    meta = doc.node_metadata(doc.nodes[0])
    assert meta["tier"] == 2 and meta["promoted"] is True and meta["modality_mask"] == 2
    assert meta["authority"] == 1.0 and meta["is_core_doc"] is True and meta["authored"] is True
    assert (
        meta["node_kind"] == "Paragraph" and meta["token_estimate"] == doc.nodes[0].token_estimate
    )
    assert meta["tags"] == ["rules"]


@pytest.mark.parametrize(
    "raw",
    [
        "---\r\ncore: true\r\nhops: [a]\r\n---\r\n- item\r\n",
        "\ufeff---\ncore: true\nhops: [a]\n---\n- item\n",
        "---\ncore: true\nhops: [a]\n...\n- item\n",
    ],
)
def test_frontmatter_variants(raw: str) -> None:
    doc = parse_document("f.md", raw)
    assert doc.core
    assert doc.hop_targets == ("a",)
    assert [(n.kind, n.text, n.tier) for n in doc.nodes] == [(NodeKind.LIST, "item", Tier.HARD)]


def test_frontmatter_closed_at_eof_and_unclosed() -> None:
    fm, body = split_frontmatter("---\ncore: true\n---")
    assert fm is not None and fm.values["core"] is True
    assert body == len("---\ncore: true\n---")
    doc = parse_document("e.md", "---\ncore: true\n---")
    assert doc.core and doc.nodes == ()
    fm2, body2 = split_frontmatter("---\ncore: true\nno closing line\n")
    assert fm2 is None and body2 == 0


def test_frontmatter_values_subset() -> None:
    values = parse_frontmatter_values(
        'title: "Hello: world"\n'
        "tags: [a, 'b, c', d]\n"
        'links:\n  - one\n\n  - "two"  # comment\n'
        "desc: |\n  line 1\n  line 2\n"
        "nested:\n  key: value\n"
        "flag: false\n"
        "plain: text # trailing\n"
    )
    assert values["title"] == "Hello: world"
    assert values["tags"] == ["a", "b, c", "d"]
    assert values["links"] == ["one", "two"]
    assert values["desc"] == "line 1\nline 2"
    assert values["nested"] == "key: value"
    assert values["flag"] is False
    assert values["plain"] == "text"


def test_hop_targets_from_all_keys_and_wiki_links() -> None:
    raw = (
        "---\nhop_targets: x\nhops: [y, x]\nlinks:\n  - '[[Z|zed]]'\nrelated: [[W]]\n---\n"
        "See [[Notes/Alpha#Intro|alpha notes]] and ![[diagram.png]] and `[[ -f a ]]`.\n"
    )
    doc = parse_document("h.md", raw)
    assert doc.hop_targets == ("x", "y", "Z", "W", "Notes/Alpha")
    para = doc.nodes[-1]
    assert para.text == "See alpha notes and diagram.png and [[ -f a ]]."
    assert para.links == ("Notes/Alpha",)


def test_inline_text_rules() -> None:
    raw = (
        "Visit <https://example.com> or *read* [the docs](http://x) with `code` "
        "and <b>bold</b> ![alt text](i.png)\nnext line  \nhard break\n"
    )
    doc = parse_document("i.md", raw)
    assert doc.nodes[0].text == (
        "Visit or read the docs with code and bold alt text next line hard break"
    )


def test_nested_lists_flatten_and_headings_path() -> None:
    raw = (
        "# Top\n\n## Sub\n\n- outer\n  - inner one\n  - inner two\n- second\n\n"
        "### Deeper\n\ntext\n\n## Other\n\nmore\n\nSetext\n------\n\nlast\n"
    )
    doc = parse_document("n.md", raw)
    items = [n for n in doc.nodes if n.kind == NodeKind.LIST]
    assert [n.text for n in items] == ["outer inner one inner two", "second"]
    paths = {n.text: n.headings for n in doc.nodes}
    assert paths["outer inner one inner two"] == ("Top", "Sub")
    assert paths["text"] == ("Top", "Sub", "Deeper")
    assert paths["more"] == ("Top", "Other")
    assert paths["last"] == ("Top", "Setext")
    assert not {"Top", "Sub", "Deeper", "Other", "Setext"} & set(paths)  # headings: no nodes


def test_positions_are_byte_offsets() -> None:
    raw = "---\r\nname: ü\r\n---\r\n# Tëst héading\r\n\r\n- **Bold** item\r\n\r\nPara ü one\r\n"
    doc = parse_document("p.md", raw)
    data = raw.encode("utf-8")
    positions = [n.position for n in doc.nodes]
    assert positions == sorted(positions)
    assert data[doc.nodes[0].position :].startswith(b"**Bold**")
    assert data[doc.nodes[1].position :].startswith("Para ü".encode())
    assert [n.line for n in doc.nodes] == [6, 8]
    assert doc.nodes[0].headings == ("Tëst héading",)


def test_cache_key_and_errors() -> None:
    expected = hashlib.sha256(b"abc\x00tok").hexdigest()
    assert cache_key("abc", "tok") == expected
    assert parse_document("x.md", "abc", tokenizer_id="tok").cache_key == expected
    with pytest.raises(ValueError, match="sourceDoc is required"):
        parse_document("  ", "text")


def test_empty_nodes_skipped() -> None:
    doc = parse_document("e.md", "-\n\n---\n\n<!-- -->\n\n  \n")
    assert all(n.text for n in doc.nodes)
    assert [n.kind for n in doc.nodes] == [NodeKind.HTML]


HANDBOOK = """---
title: Team handbook
core: true
tags: [team, process]
---
# Team handbook

## Rules

- Never push to main. #git
- Review every change before merging.

## Deploys

### Fridays

We deploy from the release branch, never on Fridays.

#policy #deploys
"""


def test_front_matter_is_metadata_and_headings_are_context() -> None:
    """The issue's document: no rule text comes from the front matter or a heading."""
    doc = parse_document("handbook.md", HANDBOOK)
    assert doc.core and doc.title == "Team handbook"
    texts = [n.text for n in doc.nodes]
    assert texts == [
        "Never push to main. #git",
        "Review every change before merging.",
        "We deploy from the release branch, never on Fridays.",
    ]
    assert not any("title:" in t or "core:" in t for t in texts)
    hard = doc.tier(Tier.HARD)
    assert [n.text for n in hard] == texts[:2]
    assert hard[0].headings == ("Team handbook", "Rules")
    friday = doc.nodes[2]
    assert friday.headings == ("Team handbook", "Deploys", "Fridays")
    # document tags (front matter and a paragraph of tags only) plus the node's own
    assert doc.tags == ("team", "process", "policy", "deploys")
    assert hard[0].tags == ("team", "process", "policy", "deploys", "git")
    meta = doc.node_metadata(friday)
    assert meta["headings"] == ["Team handbook", "Deploys", "Fridays"]
    assert meta["title"] == "Team handbook" and "git" not in meta["tags"]


def test_a_bare_heading_is_not_a_memory() -> None:
    assert parse_document("r.md", "# Rules\n").nodes == ()
    assert parse_document("r.md", "Rules\n=====\n\n## Also\n").nodes == ()


def test_obsidian_tags() -> None:
    assert inline_tags("Use #python and #lang/rust, see C# and x#y and #123 &#39;") == (
        "python",
        "lang/rust",
    )
    doc = parse_document("t.md", "Some lore. #history\n\n```\n#include <x>\n```\n")
    assert doc.nodes[0].tags == ("history",) and doc.nodes[1].tags == ()
    # a tag-only paragraph is document metadata, and #core makes a document core
    core = parse_document("c.md", "#core\n\n- Always sign commits.\n")
    assert core.core and [n.tier for n in core.nodes] == [Tier.HARD]
    fm = parse_document("c.md", "---\ntags: core, misc\n---\n- Always sign commits.\n")
    assert fm.core and fm.tags == ("core", "misc")
    off = parse_document("c.md", "---\ncore: false\ntags: [core]\n---\n- x\n", core_doc=True)
    assert not off.core  # an explicit core: false wins over the tag
