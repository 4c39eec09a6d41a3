"""Wire contract of the v1 storage methods (reference libravdbd §3-§4), one test per method.

The handlers run behind the daemon's real dispatcher (JSON in, JSON out: param decoding,
camelCase, coercion of fractional integers, error codes), in-process, with a deterministic
hash embedder. (The daemon's services do not install the store yet; see the report.)
Every test runs on both store backends (``store_target``: tests/conftest.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import ErrorCode
from sidecar.api import build_registry
from sidecar.app import App
from sidecar.config import load_settings
from sidecar.server.dispatch import Dispatcher
from sidecar.services import install_memory
from sidecar.store.service import StoreService
from tests.support import StoreTarget, hash_embedder

DIMS = 16
Call = Callable[..., Awaitable[Any]]


hash_embed = hash_embedder(DIMS)


@pytest.fixture
async def rpc(tmp_path: Path, store_target: StoreTarget) -> AsyncIterator[Call]:
    data_dir = tmp_path / "data"
    flags = {"data_dir": str(data_dir), **store_target.flags(data_dir)}
    settings = load_settings(flags=flags, env={})
    app = App(settings)
    store_svc = StoreService(settings, embed=hash_embed, embed_dims=DIMS, fingerprint="hash-embed")
    app.provide(StoreService, store_svc)
    install_memory(app, store_svc)
    await app.start()
    dispatcher = Dispatcher(app, build_registry())
    counter = iter(range(1, 10**9))

    async def send(_line: bytes) -> None:
        return None

    async def call(method: str, params: Any = None, *, error: bool = False) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": next(counter), "method": method}
        if params is not None:
            msg["params"] = params
        raw = await dispatcher.handle_frame(json.dumps(msg).encode(), 1, send)
        assert raw is not None
        reply = json.loads(raw)
        if error:
            assert "error" in reply, reply
            return reply["error"]
        assert "error" not in reply, reply
        return reply["result"]

    try:
        yield call
    finally:
        await app.close()


async def _insert(rpc: Call, coll: str, rid: str, text: str, **meta: Any) -> None:
    ok = await rpc("insert_text", {"collection": coll, "id": rid, "text": text, "metadata": meta})
    assert ok == {"ok": True}


async def test_ensure_collections(rpc: Call) -> None:
    names = ["session:s1", "session_state:s1", "authored:hard", "turns:u1", "user:u1"]
    assert await rpc("ensure_collections", {"collections": names}) == {"ok": True}
    assert await rpc("ensure_collections", {"collections": names}) == {"ok": True}  # idempotent
    assert await rpc("ensure_collections", {}) == {"ok": True}
    assert await rpc("list_collection", {"collection": "session:s1"}) == {"results": []}
    err = await rpc("ensure_collections", {"collections": ["bad\x01"]}, error=True)
    assert err["code"] == ErrorCode.INVALID_INPUT and "control characters" in err["message"]


async def test_insert_text(rpc: Call) -> None:
    await _insert(rpc, "user:u1", "u1:t1", "alpha", role="user", ts=1.5)
    (rec,) = (await rpc("list_collection", {"collection": "user:u1"}))["results"]
    assert rec == {
        "id": "u1:t1",
        "score": 0.0,
        "text": "alpha",
        "metadata": {"role": "user", "ts": 1.5, "text": "alpha", "access_count": 0},
        "version": 1,
    }
    # inserting an existing id upserts (the reference failed): version + 1
    await rpc(
        "insert_text",
        {"collection": "user:u1", "id": "u1:t1", "text": "alpha2", "score": 0.9},
    )
    (rec,) = (await rpc("list_collection", {"collection": "user:u1"}))["results"]
    assert rec["version"] == 2 and rec["text"] == "alpha2"
    # empty text: no metadata.text; caller's access_count kept
    await rpc(
        "insert_text",
        {"collection": "user:u1", "id": "e", "text": "", "metadata": {"access_count": 3}},
    )
    e = await rpc("list_by_meta", {"collection": "user:u1", "key": "access_count", "value": ""})
    assert e["results"] == []
    recs = (await rpc("list_collection", {"collection": "user:u1"}))["results"]
    assert recs[0]["id"] == "e" and recs[0]["metadata"] == {"access_count": 3}
    err = await rpc("insert_text", {"collection": "user:u1", "text": "x"}, error=True)
    assert err["message"] == "record id is required" and err["code"] == ErrorCode.INVALID_INPUT
    err = await rpc(
        "insert_text", {"collection": "user:u1", "id": "x", "metadata": [1]}, error=True
    )
    assert err["code"] == ErrorCode.INVALID_PARAMS
    err = await rpc("insert_text", {"collection": "", "id": "x", "text": "t"}, error=True)
    assert err["code"] == ErrorCode.INVALID_INPUT
    # a vectorless collection keeps the text (no embedding needed)
    await _insert(rpc, "authored:hard", "doc#000000", "Always test.")
    (h,) = (await rpc("list_collection", {"collection": "authored:hard"}))["results"]
    assert h["text"] == "Always test." and h["metadata"]["text"] == "Always test."


async def test_search_text(rpc: Call) -> None:
    # Port of the reference RPC test: alpha first, then beta; delete alpha -> beta only.
    await _insert(rpc, "session:s1", "alpha", "alpha")
    await _insert(rpc, "session:s1", "beta", "beta")
    res = await rpc("search_text", {"collection": "session:s1", "text": "query-alpha", "k": 5})
    assert [r["id"] for r in res["results"]] == ["alpha", "beta"]
    top = res["results"][0]
    assert set(top) == {"id", "score", "text", "metadata", "version"}
    assert top["metadata"]["collection"] == "session:s1"
    assert top["metadata"]["text"] == "alpha" and top["metadata"]["access_count"] == 0
    assert -1.0 <= top["score"] <= 1.0 and top["score"] > res["results"][1]["score"]
    res = await rpc(
        "search_text",
        {"collection": "session:s1", "text": "alpha", "k": 5, "excludeIds": ["alpha"]},
    )
    assert [r["id"] for r in res["results"]] == ["beta"]
    res = await rpc("search_text", {"collection": "session:s1", "text": "alpha", "k": 1.9})
    assert len(res["results"]) == 1  # fractional k truncated, not an error
    res = await rpc("search_text", {"collection": "session:s1", "text": "alpha", "k": 0})
    assert len(res["results"]) == 2  # k <= 0: all, sorted
    await rpc("delete", {"collection": "session:s1", "id": "alpha"})
    res = await rpc("search_text", {"collection": "session:s1", "text": "alpha", "k": 5})
    assert [r["id"] for r in res["results"]] == ["beta"]
    assert (await rpc("search_text", {"collection": "missing", "text": "x", "k": 3})) == {
        "results": []
    }


async def test_search_text_collections(rpc: Call) -> None:
    # Port: k=2 across 3 collections with an exclusion; each result carries its collection.
    await _insert(rpc, "elevated:user:u1", "g1", "never use mutexes in hot paths")
    await _insert(rpc, "elevated:session:s1", "g2", "use mutexes sparingly")
    await _insert(rpc, "global", "g3", "mutexes in hot paths")
    res = await rpc(
        "search_text_collections",
        {
            "collections": ["elevated:user:u1", "elevated:session:s1", "global"],
            "text": "mutexes hot paths",
            "k": 2,
            "excludeByCollection": {"global": ["g3"]},
        },
    )
    results = res["results"]
    assert len(results) == 2
    assert all(r["metadata"]["collection"] != "global" for r in results)
    assert [r["id"] for r in results] == ["g1", "g2"]
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    empty = {"collections": ["global"], "text": "x", "k": 0}
    assert await rpc("search_text_collections", empty) == {"results": []}
    assert await rpc("search_text_collections", {"collections": [], "k": 3}) == {"results": []}


async def test_list_collection(rpc: Call) -> None:
    for rid, pos in [("d#000002", 30), ("d#000001", 10), ("c#000000", 5)]:
        src = rid.split("#")[0]
        await _insert(rpc, "authored:soft", rid, f"text {rid}", source_doc=src, position=pos)
    for rid in ["b", "a", "C"]:
        await _insert(rpc, "user:u1", rid, rid)
    authored = (await rpc("list_collection", {"collection": "authored:soft"}))["results"]
    assert [r["id"] for r in authored] == ["c#000000", "d#000001", "d#000002"]
    plain = (await rpc("list_collection", {"collection": "user:u1"}))["results"]
    assert [r["id"] for r in plain] == ["C", "a", "b"]  # byte order
    assert all(r["score"] == 0 and "collection" not in r["metadata"] for r in plain)
    assert await rpc("list_collection", {"collection": "missing"}) == {"results": []}


async def test_list_by_meta(rpc: Call) -> None:
    await _insert(rpc, "session:s1", "s1:2", "two", sessionId="s1", n=2)
    await _insert(rpc, "session:s1", "s1:1", "one", sessionId="s1", n="2")
    await _insert(rpc, "session:s1", "s10:1", "other", sessionId="s10")
    res = await rpc("list_by_meta", {"collection": "session:s1", "key": "sessionId", "value": "s1"})
    assert [r["id"] for r in res["results"]] == ["s1:1", "s1:2"]
    # a numeric metadata value never matches the string param (reference semantics)
    res = await rpc("list_by_meta", {"collection": "session:s1", "key": "n", "value": "2"})
    assert [r["id"] for r in res["results"]] == ["s1:1"]
    assert await rpc("list_by_meta", {"collection": "nope", "key": "k", "value": "v"}) == {
        "results": []
    }


async def test_delete(rpc: Call) -> None:
    await _insert(rpc, "user:u1", "a", "alpha")
    assert await rpc("delete", {"collection": "user:u1", "id": "a"}) == {"ok": True}
    assert await rpc("delete", {"collection": "user:u1", "id": "a"}) == {"ok": True}  # again
    assert await rpc("delete", {"collection": "missing", "id": "a"}) == {"ok": True}
    assert await rpc("list_collection", {"collection": "user:u1"}) == {"results": []}


async def test_delete_batch(rpc: Call) -> None:
    for rid in ("a", "b", "c"):
        await _insert(rpc, "session:s1", rid, rid)
    ok = await rpc("delete_batch", {"collection": "session:s1", "ids": ["a", "zz", "b", "a"]})
    assert ok == {"ok": True}
    res = await rpc("list_collection", {"collection": "session:s1"})
    assert [r["id"] for r in res["results"]] == ["c"]
    assert await rpc("delete_batch", {"collection": "missing", "ids": ["x"]}) == {"ok": True}
    assert await rpc("delete_batch", {"collection": "session:s1"}) == {"ok": True}


async def test_bump_access_counts(rpc: Call) -> None:
    await _insert(rpc, "user:u1", "a", "alpha")
    await _insert(rpc, "turns:u1", "t", "turn")
    updates = [
        {"collection": "user:u1", "ids": ["a", "a", "missing"]},  # missing id skipped
        {"collection": "turns:u1", "ids": ["t"]},
        {"collection": "no_such", "ids": ["x"]},
    ]
    assert await rpc("bump_access_counts", {"updates": updates}) == {"ok": True}
    (a,) = (await rpc("list_collection", {"collection": "user:u1"}))["results"]
    assert a["metadata"]["access_count"] == 1 and a["version"] == 1
    (t,) = (await rpc("list_collection", {"collection": "turns:u1"}))["results"]
    assert t["metadata"]["access_count"] == 1
    assert await rpc("bump_access_counts", {}) == {"ok": True}


async def test_export_memory(rpc: Call) -> None:
    await _insert(rpc, "user:u1", "m1", "likes tea", kind="pref")
    await _insert(rpc, "user:u1:notes", "n1", "note")
    await _insert(rpc, "user:u10", "x", "other user")
    res = await rpc("export_memory", {"userId": "u1"})
    assert res == {
        "records": [
            {
                "collection": "user:u1",
                "id": "m1",
                "text": "likes tea",
                "metadata": {"kind": "pref", "text": "likes tea", "access_count": 0},
            },
            {
                "collection": "user:u1:notes",
                "id": "n1",
                "text": "note",
                "metadata": {"text": "note", "access_count": 0},
            },
        ]
    }
    assert await rpc("export_memory", {"namespace": "user:u10"}) == await rpc(
        "export_memory", {"namespace": "u10"}
    )
    assert await rpc("export_memory", {}) == {"records": []}


async def test_flush_namespace(rpc: Call) -> None:
    for coll in (
        "user:u1",
        "user:u1:notes",
        "turns:u1",
        "elevated:user:u1",
        "dream:u1",
        "user:u10",
        "turns:u10",
        "session:s1",
    ):
        await _insert(rpc, coll, "r", "text")
    assert await rpc("flush_namespace", {"userId": "u1"}) == {"ok": True}
    left = {
        c
        for c in ("user:u1", "user:u1:notes", "turns:u1", "elevated:user:u1", "dream:u1")
        if (await rpc("list_collection", {"collection": c}))["results"]
    }
    assert left == set()  # complete "forget", including turns, guidance and dreams
    for c in ("user:u10", "turns:u10", "session:s1"):  # exact namespace: u10 untouched
        assert (await rpc("list_collection", {"collection": c}))["results"]
    err = await rpc("flush_namespace", {}, error=True)
    assert err["message"] == "namespace or userId is required"


async def test_flush(rpc: Call) -> None:
    await _insert(rpc, "user:u1", "a", "alpha")
    assert await rpc("flush") == {"ok": True}
    assert await rpc("flush", {"anything": 1}) == {"ok": True}


async def test_status_counts(rpc: Call) -> None:
    await _insert(rpc, "turns:u1", "t1", "hello")
    await _insert(rpc, "user:u1", "m1", "memory")
    await _insert(rpc, "_internal:lifecycle_journal", "h:s:1", "")
    status = await rpc("status")
    assert status["turnCount"] == 1 and status["memoryCount"] == 1
    assert status["lifecycleHintCount"] == 1
    assert status["records"]["records"] == 3
    assert status["models"]["store"]["state"] == "ready"
