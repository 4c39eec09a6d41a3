"""memory.list pages through what the memory keeps; memory.update corrects a fact and keeps
the old text as superseded history that ranks below the correction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.memory_rpc.conftest import Harness, make_harness

USER = "lia"
T0 = 1_700_000_000_000


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    # Every user turn admitted, so durable memory has something to list and correct.
    harness, close = await make_harness(
        tmp_path, **{"compaction.auto": False, "gating.threshold": 0.0}
    )
    try:
        yield harness
    finally:
        await close()


def _turns(sid: str, texts: list[str], start: int = 0) -> list[dict[str, Any]]:
    return [
        {"id": f"{sid}-{start + i}", "role": "user", "content": t, "ts": T0 + (start + i) * 1000}
        for i, t in enumerate(texts)
    ]


async def test_list_pages_newest_first_with_a_stable_cursor(h: Harness) -> None:
    rpc = h.call
    texts = [f"Fact number {i} about the garden." for i in range(7)]
    await rpc("ingest", {"sessionId": "s1", "userId": USER, "messages": _turns("s1", texts)})
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"userId": USER, "scope": "history", "limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = await rpc("memory.list", params)
        assert page["total"] == (7 if pages == 0 else 8)  # the late record counts
        seen += [r["id"] for r in page["records"]]
        pages += 1
        cursor = page["nextCursor"]
        if not cursor:
            break
        # A record added between pages is newer: it never shifts the pages still to come.
        if pages == 1:
            late = _turns("s1", ["A late fact about the shed."], start=100)
            await rpc("ingest", {"sessionId": "s1", "userId": USER, "messages": late})
    assert pages == 3
    assert seen == [f"s1:s1-{i}" for i in reversed(range(7))]
    rec = (await rpc("memory.list", {"userId": USER, "scope": "history", "limit": 1}))["records"][0]
    assert rec["text"] == "A late fact about the shed." and rec["role"] == "user"
    assert rec["sessionId"] == "s1" and rec["ts"] == T0 + 100_000


async def test_list_filters_by_session_and_time(h: Harness) -> None:
    rpc = h.call
    await rpc("ingest", {"sessionId": "a", "userId": USER, "messages": _turns("a", ["x1", "x2"])})
    await rpc(
        "ingest", {"sessionId": "b", "userId": USER, "messages": _turns("b", ["y1", "y2"], 10)}
    )
    only_b = await rpc("memory.list", {"userId": USER, "scope": "durable", "sessionId": "b"})
    assert [r["text"] for r in only_b["records"]] == ["y2", "y1"]
    window = await rpc(
        "memory.list",
        {"userId": USER, "scope": "history", "since": T0 + 1000, "until": T0 + 10_000},
    )
    assert [r["text"] for r in window["records"]] == ["y1", "x2"]
    # A session alone names its namespace.
    by_session = await rpc("memory.list", {"sessionId": "a", "scope": "history"})
    assert by_session["total"] == 2


async def test_list_refuses_bad_input(h: Harness) -> None:
    rpc = h.call
    e = await rpc("memory.list", {"scope": "durable"}, error=True)
    assert "namespace, userId or sessionId" in e["message"]
    e = await rpc("memory.list", {"userId": USER, "scope": "everything"}, error=True)
    assert e["code"] == -32602
    e = await rpc("memory.list", {"userId": USER, "cursor": "not-a-cursor"}, error=True)
    assert e["code"] == -32009 and "cursor" in e["message"]
    e = await rpc("memory.list", {"userId": USER, "since": 5, "until": 1}, error=True)
    assert "since" in e["message"]
    e = await rpc("memory.list", {"userId": USER, "limit": 501}, error=True)
    assert e["code"] == -32009


async def test_update_replaces_the_fact_and_keeps_the_old_one_as_history(h: Harness) -> None:
    rpc = h.call
    turns = _turns("s1", ["I live in Lisbon near the river.", "I like sardines."])
    await rpc("ingest", {"sessionId": "s1", "userId": USER, "messages": turns})
    durable = (await rpc("memory.list", {"userId": USER}))["records"]
    lisbon = next(r for r in durable if "Lisbon" in r["text"])
    out = await rpc(
        "memory.update",
        {
            "userId": USER,
            "collection": lisbon["collection"],
            "id": lisbon["id"],
            "text": "I live in Porto near the river.",
        },
    )
    assert out["record"]["id"] == lisbon["id"] and out["record"]["text"].startswith(
        "I live in Porto"
    )
    assert out["record"]["metadata"]["revision"] == 2
    prev = out["previous"]
    assert prev["text"] == lisbon["text"] and prev["metadata"]["superseded_by"] == lisbon["id"]

    # The current list shows the correction only; with includeSuperseded, both.
    now = (await rpc("memory.list", {"userId": USER}))["records"]
    assert [r["text"] for r in now if "live in" in r["text"]] == ["I live in Porto near the river."]
    both = await rpc("memory.list", {"userId": USER, "includeSuperseded": True})
    assert {r["id"] for r in both["records"]} >= {lisbon["id"], prev["id"]}
    # The raw turn keeps its text (history is lossless) and says it was superseded.
    raw = (
        await rpc("memory.get", {"userId": USER, "collection": "turns:lia", "id": lisbon["id"]})
    )["record"]
    assert raw["text"] == lisbon["text"] and raw["metadata"]["superseded_by"] == lisbon["id"]

    # The correction outranks the old text for a present-tense question.
    res = await rpc(
        "assemble",
        {"sessionId": "fresh", "userId": USER, "prompt": "Where do I live?", "tokenBudget": 4000},
    )
    texts = [s for s in res["selected"] if "live in" in _text(h, s)]
    assert texts and "Porto" in _text(h, texts[0])
    # Both stay findable.
    hits = (await rpc("search", {"query": "live in Lisbon", "userId": USER, "k": 10}))["hits"]
    assert any("Lisbon" in x["text"] for x in hits)

    # A second correction keeps both earlier versions.
    again = await rpc(
        "memory.update",
        {"userId": USER, "collection": "user:lia", "id": lisbon["id"], "text": "I live in Braga."},
    )
    assert again["record"]["metadata"]["revision"] == 3
    assert again["previous"]["text"] == "I live in Porto near the river."
    versions = await rpc("memory.list", {"userId": USER, "includeSuperseded": True})
    assert sum("live in" in r["text"] for r in versions["records"]) == 3

    # Forgetting the turn forgets its corrections and their old versions too.
    await rpc("forget", {"userId": USER, "messageIds": ["s1-0"]})
    left = await rpc("memory.list", {"userId": USER, "includeSuperseded": True})
    assert not [r for r in left["records"] if "live in" in r["text"]]


def _text(h: Harness, selected: dict[str, Any]) -> str:
    rec = h.memory.store.store.get(selected["collection"], selected["id"])
    return rec.text if rec is not None else ""


async def test_update_of_a_history_turn_creates_its_durable_copy(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"gating.threshold": 0.999})
    try:
        rpc = h.call
        turns = _turns("s1", ["My dentist is Dr Rocha."])
        await rpc("ingest", {"sessionId": "s1", "userId": USER, "messages": turns})
        assert (await rpc("memory.list", {"userId": USER}))["total"] == 0
        out = await rpc(
            "memory.update",
            {
                "userId": USER,
                "collection": "turns:lia",
                "id": "s1:s1-0",
                "text": "My dentist is Dr Sousa.",
            },
        )
        assert out["previous"] is None and out["record"]["collection"] == "user:lia"
        assert out["record"]["metadata"]["revision"] == 1
        listed = (await rpc("memory.list", {"userId": USER}))["records"]
        assert [r["text"] for r in listed] == ["My dentist is Dr Sousa."]
    finally:
        await close()


async def test_update_refuses_what_it_cannot_correct(h: Harness) -> None:
    rpc = h.call
    await rpc("ingest", {"sessionId": "s1", "userId": USER, "messages": _turns("s1", ["Hello."])})
    base = {"userId": USER, "text": "new"}
    e = await rpc(
        "memory.update", {**base, "collection": "session_raw:s1", "id": "s1-0"}, error=True
    )
    assert e["code"] == -32009 and "durable facts" in e["message"]
    e = await rpc("memory.update", {**base, "collection": "user:lia", "id": "nope"}, error=True)
    assert e["code"] == -32002
    e = await rpc(
        "memory.update", {**base, "collection": "user:other", "id": "s1:s1-0"}, error=True
    )
    assert e["code"] == -32009
    e = await rpc(
        "memory.update",
        {**base, "collection": "user:lia", "id": "s1:s1-0", "text": " "},
        error=True,
    )
    assert "blank" in e["message"]
    updated = await rpc("memory.update", {**base, "collection": "user:lia", "id": "s1:s1-0"})
    old = updated["previous"]["id"]
    e = await rpc("memory.update", {**base, "collection": "user:lia", "id": old}, error=True)
    assert "superseded version" in e["message"]
