"""A forget takes exactly what it names: every version of it, and nothing else.

Regressions (issue 32):

* after ``memory.update`` of a record stored under its own id, ``forget {records}``
  deleted the current text only; ``search``, ``memory.list includeSuperseded`` and
  ``export_memory`` still returned the old text from ``<id>~v1``;
* forgetting "I moved to Porto in June." also deleted the older, different "I moved to
  Lisbon in May." (ingest had marked it ``superseded_by`` the Porto turn, and forget took
  every record so marked for an old version of the turn), and left the Lisbon history
  copies pointing at a turn that no longer exists;
* a namespace's forget deleted a shared ``global`` record, and its tombstone then made a
  later ``insert_text`` of that id answer ``ok`` and store nothing, for every client.
"""

from __future__ import annotations

from typing import Any

from sidecar.memory.core import layout as C
from tests.memory_rpc.conftest import Call, Harness

NS = "fay"


def _update(collection: str, record_id: str, text: str) -> dict[str, str]:
    return {"namespace": NS, "collection": collection, "id": record_id, "text": text}


async def _texts(h: Harness, collection: str) -> dict[str, str]:
    return {r.id: r.text for r in await h.memory.store.list_records(collection)}


async def _everywhere(h: Harness) -> str:
    """Every record's text and metadata, as one string to search."""
    store = h.memory.store
    parts: list[str] = []
    for info in store.collections():
        for r in await store.list_records(info.name):
            parts.append(f"{info.name} {r.id} {r.text} {r.metadata}")
    return "\n".join(parts)


async def test_forgetting_a_corrected_record_removes_every_version(
    harness: Harness, rpc: Call
) -> None:
    durable = C.user(NS)
    await rpc("insert_text", {"collection": durable, "id": "blood", "text": "My blood type is B+"})
    await rpc("memory.update", _update(durable, "blood", "Blood type O-"))
    await rpc("memory.update", _update(durable, "blood", "Blood type A-"))
    assert set(await _texts(harness, durable)) == {"blood", "blood~v1", "blood~v2"}

    out = await rpc(
        "forget", {"namespace": NS, "records": [{"collection": durable, "id": "blood"}]}
    )

    assert out["deleted"] == 3
    assert await _texts(harness, durable) == {}
    listed = await rpc("memory.list", {"namespace": NS, "includeSuperseded": True})
    assert listed["records"] == []
    exported = await rpc("export_memory", {"collection": durable})
    assert "B+" not in repr(exported) and "O-" not in repr(exported)
    hits = await rpc("search", {"namespace": NS, "query": "blood type B+"})
    assert not any("B+" in h["text"] or "O-" in h["text"] for h in hits["hits"])
    prompt = {"sessionId": "q1", "namespace": NS, "prompt": "my blood type?", "tokenBudget": 4000}
    added = (await rpc("assemble", prompt))["systemPromptAddition"]
    assert "B+" not in added and "O-" not in added
    # a retry finds nothing and deletes nothing
    again = await rpc(
        "forget", {"namespace": NS, "records": [{"collection": durable, "id": "blood"}]}
    )
    assert again["deleted"] == 0 and again["missing"] == [{"collection": durable, "id": "blood"}]


async def test_forgetting_a_corrected_turn_removes_its_versions(
    harness: Harness, rpc: Call
) -> None:
    await rpc(
        "ingest",
        {
            "sessionId": "s1",
            "userId": NS,
            "messages": [
                {"id": "m1", "role": "user", "content": "My passport number is X7Q-49A8-ZZ."}
            ],
        },
    )
    rid = C.namespace_turn_id("s1", "m1")
    await rpc("memory.update", _update(C.turns(NS), rid, "Passport X7Q-49A8-ZY"))
    before = await _everywhere(harness)
    assert "X7Q-49A8-ZZ" in before and "X7Q-49A8-ZY" in before

    out = await rpc("forget", {"namespace": NS, "messageIds": ["m1"]})

    assert [i["id"] for i in out["items"]] == ["m1"]
    after = await _everywhere(harness)
    assert "X7Q-49A8" not in after


async def _moved(rpc: Call) -> None:
    await rpc(
        "ingest",
        {
            "sessionId": "fay1",
            "userId": NS,
            "messages": [{"id": "f1", "role": "user", "content": "I moved to Lisbon in May."}],
        },
    )
    await rpc(
        "ingest",
        {
            "sessionId": "fay2",
            "userId": NS,
            "messages": [{"id": "f2", "role": "user", "content": "I moved to Porto in June."}],
        },
    )


async def test_forgetting_a_newer_fact_keeps_the_older_one_and_clears_its_mark(
    harness: Harness, rpc: Call
) -> None:
    await _moved(rpc)
    lisbon = C.namespace_turn_id("fay1", "f1")
    porto = C.namespace_turn_id("fay2", "f2")
    marked = await harness.memory.store.get(C.turns(NS), lisbon)
    assert marked is not None and marked.metadata.get(C.SUPERSEDED_BY) == porto  # the premise

    out = await rpc("forget", {"namespace": NS, "messageIds": ["f2"]})

    assert [i["id"] for i in out["items"]] == ["f2"]
    for coll in (C.turns(NS), C.user(NS)):
        texts = await _texts(harness, coll)
        assert lisbon in texts and porto not in texts, (coll, texts)
    raw = await harness.memory.store.get(C.session_raw("fay1"), "f1")
    assert raw is not None and not raw.metadata.get(C.SUPERSEDED_BY)
    for coll in (C.turns(NS), C.user(NS)):
        rec = await harness.memory.store.get(coll, lisbon)
        assert rec is not None and not rec.metadata.get(C.SUPERSEDED_BY), coll
    listed = await rpc("memory.list", {"namespace": NS})
    assert [r["text"] for r in listed["records"]] == ["I moved to Lisbon in May."]
    assert "Porto" not in await _everywhere(harness)


async def test_forgetting_a_repeated_fact_keeps_the_first_statement(
    harness: Harness, rpc: Call
) -> None:
    said = "I moved to Porto in June."
    for sid, mid in (("r1", "p1"), ("r2", "p2")):
        await rpc(
            "ingest",
            {
                "sessionId": sid,
                "userId": NS,
                "messages": [{"id": mid, "role": "user", "content": said}],
            },
        )
    first = C.namespace_turn_id("r1", "p1")
    marked = await harness.memory.store.get(C.user(NS), first)
    assert marked is not None and marked.metadata.get(C.SUPERSEDED_BY)  # the premise

    out = await rpc("forget", {"namespace": NS, "messageIds": ["p2"]})

    assert [i["id"] for i in out["items"]] == ["p2"]
    for coll in (C.turns(NS), C.user(NS)):
        assert set(await _texts(harness, coll)) == {first}, coll


async def test_a_namespace_forget_never_deletes_shared_global_records(
    harness: Harness, rpc: Call
) -> None:
    await rpc("insert_text", {"collection": C.GLOBAL, "id": "g1", "text": "Office wifi: otter"})
    error = await rpc(
        "forget",
        {"namespace": "bob", "records": [{"collection": C.GLOBAL, "id": "g1"}]},
        error=True,
    )
    assert error["code"] == -32009
    assert "global" in error["message"]
    assert await _texts(harness, C.GLOBAL) == {"g1": "Office wifi: otter"}
    whole = await rpc("forget", {"namespace": "bob"})
    assert whole["deleted"] == 0
    assert await _texts(harness, C.GLOBAL) == {"g1": "Office wifi: otter"}


async def test_an_insert_that_a_tombstone_swallows_says_so(harness: Harness, rpc: Call) -> None:
    durable = C.user(NS)
    await rpc("insert_text", {"collection": durable, "id": "pin", "text": "bank pin 990"})
    await rpc("forget", {"namespace": NS, "records": [{"collection": durable, "id": "pin"}]})
    reply: dict[str, Any] = await rpc(
        "insert_text", {"collection": durable, "id": "pin", "text": "bank pin 990"}
    )
    assert reply["ok"] is True  # the reference's reply shape, unchanged
    assert reply.get("stored") is False and reply.get("reason") == "forgotten"
    assert await _texts(harness, durable) == {}
    fresh = await rpc("insert_text", {"collection": durable, "id": "pin2", "text": "new fact"})
    assert fresh == {"ok": True}


async def test_a_stale_global_tombstone_does_not_block_an_explicit_insert(
    harness: Harness, rpc: Call
) -> None:
    # written by an earlier version's namespace forget; shared records are never
    # tombstoned any more, so such a tombstone must not swallow the record for everyone
    await harness.memory.store.add_tombstones(
        "bob", [C.tombstone_key(C.GLOBAL, "g1")], C.TOMBSTONE_REASON_FORGET
    )
    reply = await rpc("insert_text", {"collection": C.GLOBAL, "id": "g1", "text": "Office wifi"})
    assert reply == {"ok": True}
    assert await _texts(harness, C.GLOBAL) == {"g1": "Office wifi"}
