"""Wire contract of the v1 authored / dream / journal methods (reference §4, §8, §11).

One test per method (plus the reference Go tests of §11 Authored / Dream / RPC), through
the daemon's real dispatcher in-process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import ErrorCode
from tests.authored.conftest import Rpc, make_rpc

FULL_DOC = """---
title: Guide
hop_targets: [alpha, beta]
---
# Heading

You must always run the tests before pushing.

> A quoted note.

- first item
- second item

Plain lore paragraph about history.

```
code block
```
"""

PERSISTED = """---
title: Persisted
---
You must keep answers short.

> Quote about style.

- list item rule

The lore of the old kingdom.
"""


@pytest.fixture
async def reference_rpc(tmp_path: Path) -> AsyncIterator[Rpc]:
    """The reference's semantics: coreDoc:true alone makes a document core."""
    r, app = await make_rpc(tmp_path, **{"authored.v1_core_doc": "trust"})
    try:
        yield r
    finally:
        await app.close()


def _tiers(results: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    return {k: len(v) for k, v in results.items()}


async def _authored(rpc: Rpc, doc: str | None = None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for tier in ("hard", "soft", "variant"):
        recs = await rpc.listing(f"authored:{tier}")
        out[tier] = [r for r in recs if doc is None or r["metadata"]["source_doc"] == doc]
    return out


async def test_ingest_markdown_document(reference_rpc: Rpc) -> None:
    rpc = reference_rpc
    res = await rpc(
        "ingest_markdown_document",
        {
            "sourceDoc": "/notes/guide.md",
            "text": FULL_DOC,
            "coreDoc": True,
            "sourceMeta": {
                "sourceRoot": "/notes",
                "sourcePath": "guide.md",
                "sourceKind": "OBSIDIAN",
                "fileHash": "8010d29826a519fb",
                "sourceSize": 123.0,
                "sourceMtimeMs": 1795345703743.9092,  # fractional, as Node sends it
                "ingestVersion": 3,
                "hashBackend": "wasm-fnv1a64",
            },
        },
    )
    assert res == {"ok": True}
    got = await _authored(rpc)
    # promoted paragraph, blockquote, 2 list items, plain paragraph, code. Fixed: the
    # reference made the front matter a hard rule and the heading a variant node; both are
    # structure here (docs/authored.md).
    assert _tiers(got) == {"hard": 2, "soft": 2, "variant": 2}
    allrecs = sorted(
        (r for v in got.values() for r in v), key=lambda r: int(r["metadata"]["ordinal"])
    )
    assert [r["metadata"]["node_kind"] for r in allrecs] == [
        "Paragraph",
        "Blockquote",
        "List",
        "List",
        "Paragraph",
        "CodeBlock",
    ]
    assert [r["id"] for r in allrecs] == [f"/notes/guide.md#{i:06d}" for i in range(6)]
    plain = next(r for r in got["variant"] if r["text"].startswith("Plain lore"))
    assert plain["metadata"]["hop_targets"] == ["alpha", "beta"]
    meta = got["hard"][0]["metadata"]
    assert meta["source_root"] == "/notes" and meta["source_path"] == "guide.md"
    assert meta["source_kind"] == "obsidian" and meta["file_hash"] == "8010d29826a519fb"
    assert meta["source_mtime_ms"] == 1795345703743 and meta["source_size"] == 123
    assert meta["ingest_version"] == 3 and meta["hash_backend"] == "wasm-fnv1a64"
    assert meta["authority"] == 1.0 and meta["is_core_doc"] is True
    assert meta["authored"] is True and meta["access_count"] == 0
    assert meta["tokenizer_id"] == "markdown-ingest:v1" and len(meta["cache_key"]) == 64
    assert meta["text"] == got["hard"][0]["text"]
    # variants embedded in ONE batch call; hard/soft never embedded
    assert rpc.embed.calls == [2]

    # a pure code document gives one variant node
    await rpc("ingest_markdown_document", {"sourceDoc": "code.md", "text": "```\nx = 1\n```\n"})
    assert _tiers(await _authored(rpc, "code.md")) == {"hard": 0, "soft": 0, "variant": 1}

    # persisted example: hard 1, soft 2, variant 1 (the reference: hard 2, counting the
    # front matter), authority 1.0 when core
    await rpc("ingest_markdown_document", {"sourceDoc": "p.md", "text": PERSISTED, "coreDoc": True})
    p = await _authored(rpc, "p.md")
    assert _tiers(p) == {"hard": 1, "soft": 2, "variant": 1}
    assert {r["metadata"]["authority"] for v in p.values() for r in v} == {1.0}

    # not core: no hard rules at all (fix of host B6); authority 0
    await rpc("ingest_markdown_document", {"sourceDoc": "p.md", "text": PERSISTED})
    p = await _authored(rpc, "p.md")
    assert p["hard"] == [] and {r["metadata"]["authority"] for v in p.values() for r in v} == {0.0}

    # re-ingest replaces the old records (shorter doc: stale nodes gone)
    await rpc("ingest_markdown_document", {"sourceDoc": "p.md", "text": "just lore text\n"})
    p = await _authored(rpc, "p.md")
    assert _tiers(p) == {"hard": 0, "soft": 0, "variant": 1}
    assert p["variant"][0]["id"] == "p.md#000000" and p["variant"][0]["text"] == "just lore text"

    # errors: blank sourceDoc, nothing written
    for sd in ("", "   "):
        err = await rpc("ingest_markdown_document", {"sourceDoc": sd, "text": "x"}, error=True)
        assert err["message"] == "sourceDoc is required"
        assert err["code"] == ErrorCode.INVALID_INPUT
    err = await rpc("ingest_markdown_document", {"sourceDoc": 5}, error=True)
    assert err["code"] == ErrorCode.INVALID_PARAMS


async def test_ingest_replace_is_atomic(rpc: Rpc) -> None:
    await rpc("ingest_markdown_document", {"sourceDoc": "a.md", "text": FULL_DOC, "coreDoc": True})
    before = await _authored(rpc, "a.md")
    rpc.embed.fail = True  # the new version needs embeddings: the write must not happen
    err = await rpc(
        "ingest_markdown_document",
        {"sourceDoc": "a.md", "text": "- only one item\n\nnew lore here\n", "coreDoc": True},
        error=True,
    )
    assert err["code"] == ErrorCode.MODEL_UNAVAILABLE and "embedder exploded" in err["message"]
    assert await _authored(rpc, "a.md") == before  # old version intact, nothing partial
    rpc.embed.fail = False
    # unchanged re-ingest: nothing embedded, nothing written (versions stay 1)
    calls = len(rpc.embed.calls)
    await rpc("ingest_markdown_document", {"sourceDoc": "a.md", "text": FULL_DOC, "coreDoc": True})
    assert len(rpc.embed.calls) == calls
    assert await _authored(rpc, "a.md") == before


async def test_delete_authored_document(reference_rpc: Rpc) -> None:
    rpc = reference_rpc
    await rpc("ingest_markdown_document", {"sourceDoc": "a.md", "text": FULL_DOC, "coreDoc": True})
    await rpc("ingest_markdown_document", {"sourceDoc": "b.md", "text": PERSISTED, "coreDoc": True})
    assert await rpc("delete_authored_document", {"sourceDoc": "a.md"}) == {"ok": True}
    assert _tiers(await _authored(rpc, "a.md")) == {"hard": 0, "soft": 0, "variant": 0}
    assert _tiers(await _authored(rpc, "b.md")) == {"hard": 1, "soft": 2, "variant": 1}
    # idempotent; unknown documents are fine
    assert await rpc("delete_authored_document", {"sourceDoc": "a.md"}) == {"ok": True}
    err = await rpc("delete_authored_document", {}, error=True)
    assert err["message"] == "sourceDoc is required" and err["code"] == ErrorCode.INVALID_INPUT


async def test_plugin_core_doc_alone_makes_no_hard_rules(tmp_path: Path) -> None:
    # The published plugin sends coreDoc:true for every watched note (host-behaviour B6):
    # by default only a sourcePath matching authored.core_globs, or frontmatter core: true,
    # makes a document core.
    rpc, app = await make_rpc(tmp_path, **{"authored.core_globs": ["rules/**"]})
    try:
        note = {"sourceRoot": "/vault", "sourcePath": "daily/2026-11-01.md"}
        await rpc(
            "ingest_markdown_document",
            {"sourceDoc": "/vault/daily.md", "text": FULL_DOC, "coreDoc": True, "sourceMeta": note},
        )
        got = await _authored(rpc, "/vault/daily.md")
        assert got["hard"] == []
        assert {r["metadata"]["is_core_doc"] for v in got.values() for r in v} == {False}
        rules = {"sourceRoot": "/vault", "sourcePath": "rules/agents.md"}
        await rpc(
            "ingest_markdown_document",
            {
                "sourceDoc": "/vault/rules.md",
                "text": FULL_DOC,
                "coreDoc": True,
                "sourceMeta": rules,
            },
        )
        assert len((await _authored(rpc, "/vault/rules.md"))["hard"]) == 2  # the list items
        marked = "---\ncore: true\n---\n- always cite sources\n"
        await rpc(
            "ingest_markdown_document", {"sourceDoc": "m.md", "text": marked, "coreDoc": True}
        )
        assert len((await _authored(rpc, "m.md"))["hard"]) >= 1
    finally:
        await app.close()


def _entry(text: str, score: float, recall: int, unique: int, **kw: Any) -> dict[str, Any]:
    return {"text": text, "score": score, "recallCount": recall, "uniqueQueries": unique, **kw}


async def test_promote_dream_entries(rpc: Rpc) -> None:
    params: dict[str, Any] = {
        "userId": " u1 ",
        "sourceDoc": "dreams.md",
        "sourceRoot": "/diary",
        "sourcePath": "dreams.md",
        "fileHash": "abc",
        "sourceSize": 10.5,
        "sourceMtimeMs": 1795345703743.9092,
        "ingestVersion": 1,
        "hashBackend": "js-fnv1a64",
        "entries": [
            _entry(
                "the user prefers tea over coffee",
                0.82,
                3,
                2,
                section="deep sleep",
                line=1,
                sourceLine=7,
                metadata={"custom": "x", "type": "overridden"},
            ),
            _entry("rarely recalled fact here", 0.2, 1, 1, line=2, sourceLine=9),
        ],
    }
    assert await rpc("promote_dream_entries", params) == {"promoted": 1, "rejected": 1}
    (rec,) = await rpc.listing("dream:u1")
    assert (
        rec["id"] == "dreams.md#dream#000000" and rec["text"] == "the user prefers tea over coffee"
    )
    m = rec["metadata"]
    assert m["source_kind"] == "dream" and m["dream_score"] == 0.82
    assert m["source_type"] == "dream" and m["type"] == "dream_promotion"
    assert m["dream_recall_count"] == 3 and m["dream_unique_queries"] == 2
    assert m["dream_section"] == "deep sleep" and m["dream_line"] == 7  # the file line
    assert m["custom"] == "x" and m["authored"] is True and m["access_count"] == 0
    assert m["source_mtime_ms"] == 1795345703743 and m["source_size"] == 10
    assert m["source_root"] == "/diary" and m["hash_backend"] == "js-fnv1a64"
    assert isinstance(m["dream_promoted_at"], int)

    # every entry rejected: the earlier entries are removed anyway (fix §14.19)
    params["entries"] = [_entry("short", 0.9, 5, 5)]
    assert await rpc("promote_dream_entries", params) == {"promoted": 0, "rejected": 1}
    assert await rpc.listing("dream:u1") == []

    for missing, message in (
        ("userId", "userId is required"),
        ("sourceDoc", "sourceDoc is required"),
    ):
        bad = {**params, missing: "  "}
        err = await rpc("promote_dream_entries", bad, error=True)
        assert err["message"] == message and err["code"] == ErrorCode.INVALID_INPUT


async def test_session_lifecycle_hint(rpc: Rpc) -> None:
    res = await rpc(
        "session_lifecycle_hint",
        {
            "hook": "session_end",
            "sessionId": "s1",
            "reason": "new",
            "sessionKey": "k1",
            "messageCount": 4.0,
            "durationMs": 1500.7,
            "transcriptArchived": True,
        },
    )
    assert res == {"ok": True, "hook": "session_end", "sessionId": "s1", "reason": "new"}
    (rec,) = await rpc.listing("_internal:lifecycle_journal")
    assert rec["id"].startswith("session_end:s1:") and rec["text"] == ""
    m = rec["metadata"]
    assert m["type"] == "session_lifecycle_hint" and m["internal"] is True
    assert m["source"] == "openclaw-hook" and m["ingest_kind"] == "lifecycle_journal"
    assert m["sessionKey"] == "k1" and m["messageCount"] == 4 and m["durationMs"] == 1500
    assert m["transcriptArchived"] is True and isinstance(m["ts"], int)
    # no hook / session: reference id placeholders
    await rpc("session_lifecycle_hint", {})
    ids = [r["id"] for r in await rpc.listing("_internal:lifecycle_journal")]
    assert any(i.startswith("unknown:none:") for i in ids)


async def test_list_lifecycle_journal(tmp_path: Path) -> None:
    rpc, app = await make_rpc(tmp_path, **{"journal.max_entries": 2})
    try:
        for sid, reason in (("s1", "old"), ("s2", "new"), ("s3", "later")):
            await rpc(
                "session_lifecycle_hint",
                {"hook": "before_reset", "sessionId": sid, "reason": reason},
            )
        res = (await rpc("list_lifecycle_journal", {}))["results"]
        # cap 2 with 3 hints keeps s2 and s3, newest first (fix §14.9)
        assert [r["metadata"]["sessionId"] for r in res] == ["s3", "s2"]
        assert all(r["score"] == 0 and r["version"] == 1 for r in res)
        (only,) = (await rpc("list_lifecycle_journal", {"sessionId": "s2"}))["results"]
        assert only["metadata"]["reason"] == "new"
        # limit keeps the most recent (not the first by id)
        await rpc("session_lifecycle_hint", {"hook": "a_first_by_id", "sessionId": "s4"})
        (latest,) = (await rpc("list_lifecycle_journal", {"limit": 1}))["results"]
        assert latest["metadata"]["sessionId"] == "s4"
        assert len((await rpc("list_lifecycle_journal", {"limit": 0}))["results"]) == 2
        assert (await rpc("list_lifecycle_journal", {"sessionId": "zz"}))["results"] == []
    finally:
        await app.close()


async def test_journal_unbounded(tmp_path: Path) -> None:
    rpc, app = await make_rpc(tmp_path, **{"journal.max_entries": 0})
    try:
        for i in range(7):
            await rpc("session_lifecycle_hint", {"hook": "h", "sessionId": f"s{i}"})
        res = (await rpc("list_lifecycle_journal", {}))["results"]
        assert [r["metadata"]["sessionId"] for r in res] == [f"s{i}" for i in range(6, -1, -1)]
    finally:
        await app.close()
