"""Wire contract of the v1 memory methods (reference §4, §4a, §5), one test per method,
in-process behind the real dispatcher with a deterministic hash embedder."""

from __future__ import annotations

from protocol.codes import ErrorCode
from tests.memory_rpc.conftest import Call, Harness


async def _turn(rpc: Call, sid: str, tid: str, text: str, role: str, ts: int) -> None:
    meta = {
        "role": role,
        "ts": ts,
        "userId": "u1",
        "sessionId": sid,
        "type": "turn",
        "stability_weight": 0.5 if role == "user" else 0.25,
    }
    ok = await rpc(
        "insert_session_turn",
        {"sessionId": sid, "id": f"{sid}:{tid}", "text": text, "metadata": meta},
    )
    assert ok == {"ok": True}


async def _chat(rpc: Call, sid: str, n: int) -> None:
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"turn {i}: we talked about the garden, tomatoes number {i} and watering plans"
        await _turn(rpc, sid, f"t{i:03d}", text, role, 1000 + i)


async def test_insert_session_turn(rpc: Call) -> None:
    await _turn(rpc, "s1", "t1", "hello there", "user", 5)
    (a,) = (await rpc("list_collection", {"collection": "session:s1"}))["results"]
    (r,) = (await rpc("list_collection", {"collection": "session_raw:s1"}))["results"]
    assert a["id"] == r["id"] == "s1:t1"
    assert a["metadata"]["text"] == "hello there" and a["metadata"]["access_count"] == 0
    assert "raw_history" not in a["metadata"]
    assert r["metadata"]["raw_history"] is True and r["metadata"]["active_view"] is False
    (st,) = (await rpc("list_collection", {"collection": "session_state:s1"}))["results"]
    assert st["id"] == "__session_state__" and st["version"] == 1
    assert st["metadata"]["compaction_generation"] == 0
    for c in ("session_summary:s1", "session_edge:s1"):
        assert (await rpc("list_collection", {"collection": c}))["results"] == []
    # a repeat upserts the active view (version + 1); the raw history is immutable
    await _turn(rpc, "s1", "t1", "hello again", "user", 5)
    (a,) = (await rpc("list_collection", {"collection": "session:s1"}))["results"]
    assert a["version"] == 2 and a["text"] == "hello again"
    (r,) = (await rpc("list_collection", {"collection": "session_raw:s1"}))["results"]
    assert r["version"] == 1 and r["text"] == "hello there"
    err = await rpc("insert_session_turn", {"sessionId": " ", "id": "x", "text": "t"}, error=True)
    assert err["code"] == ErrorCode.INVALID_INPUT and err["message"] == "session ID is required"
    err = await rpc("insert_session_turn", {"sessionId": "s2", "text": "t"}, error=True)
    assert err["message"] == "record id is required"
    assert (await rpc("list_collection", {"collection": "session:s2"}))["results"] == []


async def test_gating_scalar(rpc: Call) -> None:
    keys = {
        "g",
        "t",
        "h",
        "r",
        "d",
        "inputFreq",
        "memSaturation",
        "p",
        "a",
        "dtech",
        "gconv",
        "gtech",
    }
    res = await rpc(
        "gating_scalar",
        {"userId": "nobody", "text": "I prefer dark mode and work best in the mornings"},
    )
    assert set(res) == keys
    assert abs(res["g"] - 0.45) < 1e-9 and res["h"] == 1.0 and res["t"] == 0.0
    # the host inserts the turn into turns:<ns> before asking: no self-hit
    text = "the deploy pipeline broke again after the migration"
    await rpc(
        "insert_text",
        {"collection": "turns:u9", "id": "u9:a", "text": text, "metadata": {"role": "user"}},
    )
    res = await rpc("gating_scalar", {"userId": "u9", "text": text})
    assert res["inputFreq"] == 0.0
    # genuine repeats still count as repetition
    for i in range(5):
        await rpc(
            "insert_text",
            {
                "collection": "turns:u9",
                "id": f"u9:r{i}",
                "text": text,
                "metadata": {"role": "user"},
            },
        )
    res = await rpc("gating_scalar", {"userId": "u9", "text": text})
    assert res["inputFreq"] == 1.0 and res["r"] == 1.0
    # "Every engineer should review each error estimate." has no error codes
    res = await rpc(
        "gating_scalar",
        {"userId": "u9", "text": "Every engineer should review each error estimate."},
    )
    assert res["p"] == 0.0


async def test_compact_session(harness: Harness) -> None:
    rpc = harness.call
    await _chat(rpc, "s1", 24)
    res = await rpc(
        "compact_session",
        {
            "sessionId": "s1",
            "targetSize": 5,
            "continuityMinTurns": 4,
            "continuityTailBudgetTokens": 128,
        },
    )
    assert set(res) == {
        "didCompact",
        "clustersFormed",
        "clustersDeclined",
        "turnsRemoved",
        "summaryMethod",
        "meanConfidence",
    }
    assert res["didCompact"] is True and res["summaryMethod"] == "extractive"
    assert res["turnsRemoved"] >= 16 and res["clustersFormed"] >= 4
    assert 0.0 < res["meanConfidence"] <= 1.0
    # nothing deleted; summaries + edges written; state generation advanced
    assert len((await rpc("list_collection", {"collection": "session:s1"}))["results"]) == 24
    assert len((await rpc("list_collection", {"collection": "session_raw:s1"}))["results"]) == 24
    sums = (await rpc("list_collection", {"collection": "session_summary:s1"}))["results"]
    assert sums and all(s["metadata"]["type"] == "summary" for s in sums)
    meta = sums[0]["metadata"]
    for key in (
        "source_ids",
        "method",
        "confidence",
        "decay_rate",
        "original_tokens",
        "summary_tokens",
        "generation",
        "source_ts_min",
        "source_ts_max",
        "continuity_lineage",
    ):
        assert key in meta, key
    assert abs(meta["decay_rate"] - (1 - meta["confidence"])) < 1e-9
    (st,) = (await rpc("list_collection", {"collection": "session_state:s1"}))["results"]
    assert st["metadata"]["compaction_generation"] == 1
    assert harness.memory.epoch("s1") == 1
    # repeated compaction is idempotent: nothing new, no error (reference §14.1)
    again = await rpc("compact_session", {"sessionId": "s1", "targetSize": 5})
    assert again["didCompact"] is False and again["turnsRemoved"] == 0
    assert "summaryMethod" not in again
    assert len(
        (await rpc("list_collection", {"collection": "session_summary:s1"}))["results"]
    ) == len(sums)
    # continuityMinTurns absent still protects the tail; tiny sessions do nothing
    await _chat(rpc, "s2", 3)
    small = await rpc("compact_session", {"sessionId": "s2"})
    assert small == {
        "didCompact": False,
        "clustersFormed": 0,
        "clustersDeclined": 0,
        "turnsRemoved": 0,
        "meanConfidence": 0.0,
    }
    err = await rpc("compact_session", {"sessionId": ""}, error=True)
    assert err["message"] == "session ID is required" and err["code"] == ErrorCode.INVALID_INPUT


async def test_expand_summary(rpc: Call) -> None:
    await _chat(rpc, "s1", 24)
    await rpc("compact_session", {"sessionId": "s1", "targetSize": 5})
    sums = (await rpc("list_collection", {"collection": "session_summary:s1"}))["results"]
    level1 = [s for s in sums if s["metadata"]["level"] == 1]
    first = min(level1, key=lambda s: s["metadata"]["source_ts_min"])
    res = (await rpc("expand_summary", {"sessionId": "s1", "summaryId": first["id"]}))["results"]
    assert [r["id"] for r in res] == first["metadata"]["source_ids"]
    assert [r["metadata"]["ts"] for r in res] == sorted(r["metadata"]["ts"] for r in res)
    assert all(
        r["score"] == 0.0 and set(r) == {"id", "score", "text", "metadata", "version"} for r in res
    )
    assert (await rpc("expand_summary", {"sessionId": "s1", "summaryId": "nope"})) == {
        "results": []
    }
    err = await rpc("expand_summary", {"sessionId": "s1"}, error=True)
    assert err["message"] == "summaryId is required"
    err = await rpc("expand_summary", {"summaryId": "x"}, error=True)
    assert err["message"] == "sessionId is required"


async def test_query_raw_session(rpc: Call) -> None:
    await _turn(rpc, "s1", "a", "tomatoes need water daily", "user", 1)
    await _turn(rpc, "s1", "b", "the invoice is due friday", "assistant", 2)
    res = await rpc("query_raw_session", {"sessionId": "s1", "text": "tomatoes water", "k": 1})
    (hit,) = res["results"]
    assert hit["id"] == "s1:a" and hit["metadata"]["collection"] == "session_raw:s1"
    assert set(hit) == {"id", "score", "text", "metadata", "version"}
    res = await rpc(
        "query_raw_session", {"sessionId": "s1", "text": "tomatoes", "k": 5, "excludeIds": ["s1:a"]}
    )
    assert [r["id"] for r in res["results"]] == ["s1:b"]
    assert (await rpc("query_raw_session", {"sessionId": "none", "text": "x", "k": 3})) == {
        "results": []
    }
    err = await rpc("query_raw_session", {"text": "x"}, error=True)
    assert err["message"] == "sessionId is required"


async def test_v1_writes_cannot_resurrect_forgotten_records(rpc: Call) -> None:
    # Regression: v1 insert_session_turn / insert_text ignored forget's tombstones, and
    # tombstones were only checked under the writer's own namespace.
    await _turn(rpc, "fs", "t1", "my bank pin is in the blue notebook", "user", 1)
    await _turn(rpc, "fa", "t1", "assistant-only session of the same user", "assistant", 1)
    await rpc("insert_text", {"collection": "turns:u1", "id": "fs:t1", "text": "pin note"})
    await rpc("forget", {"namespace": "u1", "includeSessions": True})
    # the session is found through the namespace in its v1 state, even with no user turn
    assert (await rpc("list_collection", {"collection": "session_raw:fa"}))["results"] == []
    assert await rpc("insert_session_turn", {"sessionId": "fs", "id": "fs:t1", "text": "x"}) == {
        "ok": True
    }
    await rpc("insert_text", {"collection": "turns:u1", "id": "fs:t1", "text": "pin note"})
    for coll in ("session:fs", "session_raw:fs", "turns:u1"):
        assert (await rpc("list_collection", {"collection": coll}))["results"] == [], coll
    # v2 ingest of the same session under another namespace does not bring it back either
    back = await rpc(
        "ingest",
        {"sessionId": "fs", "messages": [{"id": "fs:t1", "role": "user", "content": "again"}]},
    )
    assert back["ingested"] == 0 and back["skipped"] == 1
    # new records are written as usual
    await _turn(rpc, "fs", "t2", "a new message", "user", 2)
    assert len((await rpc("list_collection", {"collection": "session_raw:fs"}))["results"]) == 1
