"""v2 ``memory.get``: read one record a search found, never outside the namespace."""

from __future__ import annotations

from protocol.codes import ErrorCode
from tests.memory_rpc.conftest import Call

FACT = "My sister Ines lives in Porto and teaches physics."


async def _seed(rpc: Call) -> None:
    msgs = [{"id": "m1", "role": "user", "content": FACT}]
    await rpc("ingest", {"sessionId": "s-ana", "userId": "ana", "messages": msgs})
    other = [{"id": "m9", "role": "user", "content": "Bob's bank PIN is 4411."}]
    await rpc("ingest", {"sessionId": "s-bob", "userId": "bob", "messages": other})


async def test_get_returns_a_search_hit(rpc: Call) -> None:
    await _seed(rpc)
    hits = (await rpc("search", {"query": "Where does Ines live?", "userId": "ana"}))["hits"]
    hit = next(h for h in hits if h["text"] == FACT)
    got = await rpc(
        "memory.get", {"collection": hit["collection"], "id": hit["id"], "userId": "ana"}
    )
    rec = got["record"]
    assert rec["text"] == FACT and rec["role"] == "user" and rec["sessionId"] == "s-ana"
    assert rec["collection"] == hit["collection"] and isinstance(rec["ts"], int)
    # the raw turn of a session of the namespace, named through the session
    raw = await rpc(
        "memory.get", {"collection": "session_raw:s-ana", "id": "m1", "sessionId": "s-ana"}
    )
    assert raw["record"]["text"] == FACT


async def test_other_namespaces_are_not_reachable(rpc: Call) -> None:
    await _seed(rpc)
    for coll, rid in (
        ("turns:bob", "s-bob:m9"),
        ("session_raw:s-bob", "m9"),
        ("session_state:s-ana", "__ingest_state__"),
    ):
        err = await rpc("memory.get", {"collection": coll, "id": rid, "userId": "ana"}, error=True)
        assert err["code"] == ErrorCode.NOT_FOUND, (coll, err)
        assert "4411" not in err["message"]
    err = await rpc(
        "memory.get",
        {"collection": "session_raw:s-bob", "id": "m9", "sessionId": "s-bob", "userId": "ana"},
        error=True,
    )
    assert err["code"] == ErrorCode.WRONG_NAMESPACE


async def test_bad_requests(rpc: Call) -> None:
    err = await rpc("memory.get", {"collection": "turns:ana", "id": "x"}, error=True)
    assert err["code"] == ErrorCode.INVALID_INPUT and "namespace" in err["message"]
    err = await rpc("memory.get", {"collection": "", "id": "x", "userId": "a"}, error=True)
    assert err["code"] == ErrorCode.INVALID_INPUT
    err = await rpc(
        "memory.get", {"collection": "turns:ana", "id": "nope", "userId": "ana"}, error=True
    )
    assert err["code"] == ErrorCode.NOT_FOUND
