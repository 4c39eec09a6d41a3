"""Forgetting one fact from a compacted session: gone from search, assemble, expand and
every collection, its summaries rebuilt, its neighbours intact, and no way back in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sidecar.memory.compaction.lineage import reproduce_history
from sidecar.memory.compaction.loading import load_session
from tests.memory_rpc.conftest import Call, Harness, make_harness

SID = "dana-1"
USER = "dana"
FACT = "I'm allergic to peanuts, so never suggest recipes with peanuts."
CHAT = [
    "Hi! I'm Dana, I work as a nurse in Leeds.",
    "Sounds good, thanks for the welcome.",
    "My sister Maya is visiting next month from Toronto.",
    "We are planning a trip to the Lake District together.",
    "I need a vegetarian dinner plan for the week.",
    "My favourite cuisine is Thai food with lots of basil.",
    FACT,
    "I cycle to the hospital every morning along the canal.",
    "My cat Biscuit is fourteen years old and very lazy.",
    "I usually cook on Sunday for the whole week ahead.",
    "Remind me that the boiler service is on the ninth.",
    "I'm learning Portuguese for a holiday in Porto.",
    "Maya likes board games, especially Carcassonne.",
    "We might rent a cottage near Windermere.",
    "What should I pack for a rainy hiking weekend?",
    "Thanks, that list is helpful.",
]


def _messages() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, text in enumerate(CHAT):
        out.append({"id": f"d{i}", "role": "user", "content": text, "ts": 1_700_000_000_000 + i})
        out.append(
            {
                "id": f"a{i}",
                "role": "assistant",
                "content": f"Noted about point {i}.",
                "ts": 1_700_000_000_000 + i,
            }
        )
    return out


async def _everything(h: Harness) -> list[tuple[str, str, str]]:
    """Every record of every collection, straight from the store."""
    store = h.memory.store
    out: list[tuple[str, str, str]] = []
    for info in store.collections():
        out += [(r.collection, r.id, r.text) for r in await store.list_records(info.name)]
    return sorted(out)


async def _compacted(rpc: Call) -> list[str]:
    await rpc("ingest", {"sessionId": SID, "userId": USER, "messages": _messages()})
    out = await rpc("compact", {"sessionId": SID, "force": True, "targetSize": 4})
    assert out["didCompact"] is True
    return [str(s) for s in out["summaryIds"]]


def _mentions(text: str) -> bool:
    return "peanut" in text.lower()


async def test_forget_one_fact_from_a_compacted_session(harness: Harness) -> None:
    rpc = harness.call
    summary_ids = await _compacted(rpc)
    covering = [
        s
        for s in summary_ids
        if any(
            t["id"] == "d6"
            for t in (await rpc("expand", {"sessionId": SID, "summaryId": s}))["turns"]
        )
    ]
    assert covering, "the fact must be under a summary for this test to mean anything"
    assert any(_mentions(r[2]) for r in await _everything(harness))

    out = await rpc("forget", {"userId": USER, "messageIds": ["d6"]})
    assert [(i["id"], i["sessionId"]) for i in out["items"]] == [("d6", SID)]
    assert out["items"][0]["copies"] >= 2  # raw history and the namespace index at least
    assert out["summariesRebuilt"] >= 1
    assert out["deleted"] >= out["items"][0]["copies"]
    assert out["missing"] == []

    # Not in any record of any collection (raw, index, durable, shards, summaries).
    assert not [r for r in await _everything(harness) if _mentions(r[2])]
    # Not found by search in any scope, dense or lexical.
    for query in ("peanuts", "allergic to peanuts recipes", "what am I allergic to?"):
        hits = (await rpc("search", {"query": query, "userId": USER, "k": 50}))["hits"]
        assert not [h for h in hits if _mentions(h["text"])], query
    # Not in what assemble injects.
    res = await rpc(
        "assemble",
        {"sessionId": SID, "userId": USER, "prompt": "Any peanut allergy?", "tokenBudget": 8000},
    )
    assert not _mentions(res["systemPromptAddition"])
    # The old summaries are gone; every current summary expands without the fact and
    # with its neighbours.
    for s in covering:
        err = await rpc("expand", {"sessionId": SID, "summaryId": s}, error=True)
        assert err["code"] == -32002  # not found
    current = (await rpc("list_collection", {"collection": f"session_summary:{SID}"}))["results"]
    expanded: set[str] = set()
    for rec in current:
        turns = (await rpc("expand", {"sessionId": SID, "summaryId": rec["id"]}))["turns"]
        assert not [t for t in turns if _mentions(t["text"])]
        expanded.update(t["id"] for t in turns)
    assert {"d5", "a5", "a6", "d7"} <= expanded  # the neighbours are still covered
    raw = (await rpc("list_collection", {"collection": f"session_raw:{SID}"}))["results"]
    assert {r["id"] for r in raw} == {m["id"] for m in _messages()} - {"d6"}

    # Re-ingesting the same message does not bring it back.
    again = await rpc(
        "ingest",
        {
            "sessionId": SID,
            "userId": USER,
            "messages": [{"id": "d6", "role": "user", "content": FACT}],
        },
    )
    assert again["ingested"] == 0 and again["skipped"] == 1


async def test_dry_run_by_query_lists_and_changes_nothing(harness: Harness) -> None:
    rpc = harness.call
    await _compacted(rpc)
    before = await _everything(harness)
    out = await rpc(
        "forget",
        {"userId": USER, "query": "suggest recipes with peanuts", "limit": 3, "dryRun": True},
    )
    assert out["dryRun"] is True
    fact = [i for i in out["items"] if i["id"] == "d6"]
    assert fact and _mentions(fact[0]["text"]) and fact[0]["copies"] >= 2
    assert out["summariesRebuilt"] == 0
    assert await _everything(harness) == before

    gone = await rpc("forget", {"userId": USER, "query": "never suggest recipes with peanuts"})
    assert [i["id"] for i in gone["items"]] == ["d6"]
    assert not [r for r in await _everything(harness) if _mentions(r[2])]


async def test_forget_by_record_resolves_a_durable_copy_to_its_turn(harness: Harness) -> None:
    rpc = harness.call
    await rpc("ingest", {"sessionId": SID, "userId": USER, "messages": _messages()})
    durable = (await rpc("list_collection", {"collection": f"user:{USER}"}))["results"]
    assert durable, "some user turns are admitted to durable memory"
    target = durable[0]
    turn_id = target["id"].split(":", 1)[1]
    out = await rpc(
        "forget", {"userId": USER, "records": [{"collection": f"user:{USER}", "id": target["id"]}]}
    )
    assert [(i["id"], i["sessionId"]) for i in out["items"]] == [(turn_id, SID)]
    left = {
        r["id"]
        for r in (await rpc("list_collection", {"collection": f"session_raw:{SID}"}))["results"]
    }
    assert turn_id not in left and len(left) == len(CHAT) * 2 - 1


async def test_unknown_and_foreign_things_are_reported_missing(harness: Harness) -> None:
    rpc = harness.call
    await rpc("ingest", {"sessionId": SID, "userId": USER, "messages": _messages()})
    await rpc(
        "ingest",
        {
            "sessionId": "eve-1",
            "userId": "eve",
            "messages": [{"id": "e0", "role": "user", "content": "Eve's secret plan"}],
        },
    )
    out = await rpc(
        "forget",
        {
            "userId": USER,
            "messageIds": ["nope", "e0"],
            "records": [{"collection": "turns:eve", "id": "eve-1:e0"}],
        },
    )
    assert out["items"] == [] and out["deleted"] == 0
    assert {(m["collection"], m["id"]) for m in out["missing"]} == {
        ("", "nope"),
        ("", "e0"),
        ("turns:eve", "eve-1:e0"),
    }
    eve = (await rpc("list_collection", {"collection": "session_raw:eve-1"}))["results"]
    assert [r["id"] for r in eve] == ["e0"]


async def test_bad_forget_requests_are_refused(harness: Harness) -> None:
    rpc = harness.call
    summary_ids = await _compacted(rpc)
    err = await rpc(
        "forget",
        {
            "userId": USER,
            "records": [{"collection": f"session_summary:{SID}", "id": summary_ids[0]}],
        },
        error=True,
    )
    assert err["code"] == -32009 and "expand lists them" in err["message"]
    err = await rpc(
        "forget",
        {"userId": USER, "records": [{"collection": "authored:hard", "id": "x"}]},
        error=True,
    )
    assert "authored.delete" in err["message"]
    err = await rpc(
        "forget", {"userId": USER, "messageIds": ["d1"], "includeSessions": True}, error=True
    )
    assert "whole namespace" in err["message"]
    err = await rpc("forget", {"userId": USER, "query": "  "}, error=True)
    assert "blank" in err["message"]
    err = await rpc("forget", {"userId": USER, "query": "x", "limit": 0}, error=True)
    assert err["code"] == -32009


async def test_whole_namespace_dry_run_counts_without_deleting(harness: Harness) -> None:
    rpc = harness.call
    await rpc("ingest", {"sessionId": SID, "userId": USER, "messages": _messages()})
    before = await _everything(harness)
    out = await rpc("forget", {"userId": USER, "includeSessions": True, "dryRun": True})
    assert out["dryRun"] is True and out["deleted"] >= len(CHAT) * 2
    assert await _everything(harness) == before


async def test_a_condensed_summary_is_rebuilt_from_rebuilt_children(tmp_path: Path) -> None:
    h, close = await make_harness(
        tmp_path, **{"compaction.auto": False, "compaction.max_active_summaries": 2}
    )
    try:
        rpc = h.call
        await _compacted(rpc)
        sums = await h.memory.store.list_records(f"session_summary:{SID}")
        assert max(int(s.metadata["level"]) for s in sums) >= 2, "needs a condensed level"
        out = await rpc("forget", {"userId": USER, "messageIds": ["d6"]})
        assert out["summariesRebuilt"] >= 2  # the turn's summary and the one above it
        assert not [r for r in await _everything(h) if _mentions(r[2])]
        after = await h.memory.store.list_records(f"session_summary:{SID}")
        top = max(after, key=lambda s: int(s.metadata["level"]))
        assert int(top.metadata["level"]) >= 2
        leaves = (await rpc("expand", {"sessionId": SID, "summaryId": top.id}))["turns"]
        ids = {t["id"] for t in leaves}
        assert "d6" not in ids and {"d5", "d7"} & ids
        # Expanding every active summary plus the uncovered turns is still the whole
        # history, less the forgotten turn (the lossless property holds after a forget).
        turns, _s, graph = await load_session(h.memory, SID)
        assert reproduce_history(graph) == [t.turn.id for t in turns]
        assert "d6" not in graph.turns
    finally:
        await close()
