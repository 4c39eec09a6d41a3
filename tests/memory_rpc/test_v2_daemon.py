"""v2 ingest / compact / expand / forget against a real daemon process (MiniLM)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from protocol.codes import ErrorCode
from tests.support import DaemonProcess, RawConnection, StoreTarget, start_daemon, using_store

TOPICS = [
    "We planted tomatoes and basil in the raised bed near the fence.",
    "The PostgreSQL migration failed with ERR_LOCK_TIMEOUT on the orders table.",
    "My sister Anna is visiting Lisbon in March for the conference.",
    "The invoice for the roof repair came to 2,400 euros.",
    "I switched the build from webpack to esbuild; it is five times faster.",
    "The dog needs his vaccination at the vet on 2026-04-02.",
]


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[DaemonProcess]:
    tmp = tmp_path_factory.mktemp("memd")
    config = tmp / "libravdb.toml"
    # Few active summaries, so that compaction condenses a level up within these tests.
    config.write_text("[compaction]\nauto = false\nmax_active_summaries = 3\n")
    with using_store(module_store_target):
        d = start_daemon(tmp, "--tcp", "127.0.0.1:0", extra_args=("--config", str(config)))
    yield d
    d.stop()


@pytest.fixture
def conn(daemon: DaemonProcess) -> Iterator[RawConnection]:
    with RawConnection(daemon.endpoint, timeout=60) as c:
        yield c


def ok(reply: dict[str, Any]) -> Any:
    assert "error" not in reply, reply
    return reply["result"]


def err(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, reply
    return dict(reply["error"])


def chat(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    msgs = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"{TOPICS[i % len(TOPICS)]} (note {i})"
        msgs.append({"id": f"{prefix}{i:03d}", "role": role, "content": text, "ts": 10_000 + i})
    return msgs


def listc(conn: RawConnection, coll: str) -> list[dict[str, Any]]:
    return list(ok(conn.call("list_collection", {"collection": coll}))["results"])


def test_ingest_ids_idempotency_and_both_roles(conn: RawConnection) -> None:
    msgs = chat(6)
    msgs[1]["content"] = [{"type": "text", "text": "part one"}, "part two"]
    del msgs[2]["id"]
    res = ok(conn.call("ingest", {"sessionId": "a1", "userId": "alice", "messages": msgs}))
    assert res["ingested"] == 6 and res["skipped"] == 0
    assert res["ids"][0] == "m000" and res["ids"][2].startswith("turn:000002:")
    again = ok(conn.call("ingest", {"sessionId": "a1", "userId": "alice", "messages": msgs[:2]}))
    assert again == {"ingested": 0, "skipped": 2, "ids": ["m000", "m001"], "empty": 0}
    raw = {r["id"]: r for r in listc(conn, "session_raw:a1")}
    assert len(raw) == 6 and raw["m001"]["text"] == "part one\npart two"
    assert raw["m000"]["metadata"]["ts"] == 10_000 and raw["m000"]["metadata"]["role"] == "user"
    assert "gating_score" in raw["m001"]["metadata"]
    # namespace raw history holds both roles, so cross-session recall reaches the assistant
    turns = listc(conn, "turns:alice")
    assert {t["metadata"]["role"] for t in turns} == {"user", "assistant"}
    assert all(t["id"].startswith("a1:") for t in turns)
    hits = ok(
        conn.call(
            "search_text",
            {"collection": "turns:alice", "k": 1, "text": "how much did the roof repair cost"},
        )
    )
    assert "roof" in hits["results"][0]["text"]
    # durable admission: only user turns, every signal stored with the decision
    durable = listc(conn, "user:alice")
    assert durable and all(d["metadata"]["role"] == "user" for d in durable)
    for d in durable:
        m = d["metadata"]
        assert m["gating_admitted"] is True and m["gating_score"] >= m["gating_threshold"]
        assert {"gating_t", "gating_h", "gating_r", "gating_d", "gating_p"} <= set(m)
    # default namespace session:<sid>
    ok(conn.call("ingest", {"sessionId": "anon", "messages": [{"role": "user", "content": "hi"}]}))
    assert len(listc(conn, "turns:session:anon")) == 1


def test_ingest_bad_input_writes_nothing(conn: RawConnection) -> None:
    good = {"role": "user", "content": "fine"}
    cases = [
        ({"sessionId": "b1", "messages": [good, {"role": "robot", "content": "x"}]}, "role"),
        ({"sessionId": "b1", "messages": [good, {"role": "user", "content": 5}]}, "content"),
        ({"sessionId": "b1", "messages": [good, {"role": "user", "content": "x", "ts": -1}]}, "ts"),
        ({"sessionId": "b1", "messages": [good, {"role": "user", "content": "x", "id": ""}]}, "id"),
        ({"sessionId": "", "messages": [good]}, "sessionId"),
    ]
    for params, needle in cases:
        e = err(conn.call("ingest", params))
        assert e["code"] in (ErrorCode.INVALID_INPUT, ErrorCode.INVALID_PARAMS), e
        assert needle in e["message"], e
    e = err(conn.call("ingest", {"sessionId": "b1"}))
    assert e["code"] == ErrorCode.INVALID_PARAMS
    assert listc(conn, "session_raw:b1") == []


def test_compact_expand_incremental(conn: RawConnection) -> None:
    ok(conn.call("ingest", {"sessionId": "c1", "userId": "carol", "messages": chat(40, "c")}))
    res = ok(conn.call("compact", {"sessionId": "c1", "targetSize": 8}))
    assert res["didCompact"] is True and res["summaryIds"]
    assert res["turnsCovered"] >= 30 and res["clustersFormed"] >= 4
    assert 0 < res["meanConfidence"] <= 1 and res["summaryMethod"]
    # every summary expands to raw turns, chronological
    covered: list[str] = []
    for sid in res["summaryIds"]:
        turns = ok(conn.call("expand", {"sessionId": "c1", "summaryId": sid}))["turns"]
        assert turns and all(set(t) == {"id", "role", "ts", "text"} for t in turns)
        assert [t["ts"] for t in turns] == sorted(t["ts"] for t in turns)
        covered += [t["id"] for t in turns]
    assert set(covered) <= {f"c{i:03d}" for i in range(40)}
    # depth-limited: a condensed summary shows its child summaries at depth 1
    sums = {s["id"]: s for s in listc(conn, "session_summary:c1")}
    high = [s for s in sums.values() if s["metadata"]["level"] > 1]
    assert high, "more than max_active_summaries summaries are condensed a level up"
    t1 = ok(conn.call("expand", {"sessionId": "c1", "summaryId": high[0]["id"], "maxDepth": 1}))[
        "turns"
    ]
    assert t1 and {t["role"] for t in t1} == {"summary"}
    full = ok(conn.call("expand", {"sessionId": "c1", "summaryId": high[0]["id"]}))["turns"]
    assert full and {t["role"] for t in full} <= {"user", "assistant"}
    # idempotent re-run; new turns are compacted incrementally, ids never collide
    again = ok(conn.call("compact", {"sessionId": "c1", "targetSize": 8}))
    assert again["didCompact"] is False and again["summaryIds"] == []
    ok(conn.call("ingest", {"sessionId": "c1", "userId": "carol", "messages": chat(60, "c")[40:]}))
    more = ok(conn.call("compact", {"sessionId": "c1", "targetSize": 8}))
    assert more["didCompact"] is True and not set(more["summaryIds"]) & set(res["summaryIds"])
    assert len(listc(conn, "session_raw:c1")) == 60  # raw turns are never deleted
    e = err(conn.call("expand", {"sessionId": "c1", "summaryId": "sum:nope"}))
    assert e["code"] == ErrorCode.NOT_FOUND
    e = err(conn.call("compact", {"sessionId": " "}))
    assert e["code"] == ErrorCode.INVALID_INPUT
    # a session nothing was ingested for is the documented -32002, not a silent no-op
    unknown = err(conn.call("compact", {"sessionId": "never-seen"}))
    assert unknown["code"] == ErrorCode.NOT_FOUND


def test_forget_everything_and_tombstones(conn: RawConnection) -> None:
    ok(conn.call("ingest", {"sessionId": "d1", "userId": "dave", "messages": chat(30, "d")}))
    ok(conn.call("ingest", {"sessionId": "d2", "userId": "dave", "messages": chat(4, "e")}))
    ok(conn.call("ingest", {"sessionId": "x1", "userId": "dave2", "messages": chat(2, "x")}))
    ok(conn.call("compact", {"sessionId": "d1", "targetSize": 6}))
    ok(conn.call("insert_text", {"collection": "dream:dave", "id": "dr1", "text": "a dream"}))
    ok(
        conn.call(
            "insert_text",
            {"collection": "elevated:user:dave", "id": "g1", "text": "Always run the tests."},
        )
    )
    res = ok(conn.call("forget", {"userId": "dave", "includeSessions": True}))
    assert res["deleted"] >= 30 + 4 + 30 + 4
    for coll in (
        "turns:dave",
        "user:dave",
        "dream:dave",
        "elevated:user:dave",
        "session_raw:d1",
        "session_summary:d1",
        "session_edge:d1",
        "session_raw:d2",
    ):
        assert listc(conn, coll) == [], coll
    assert len(listc(conn, "turns:dave2")) == 2  # exact namespace match
    # re-sending the forgotten messages does not resurrect them
    back = ok(conn.call("ingest", {"sessionId": "d1", "userId": "dave", "messages": chat(3, "d")}))
    assert back["ingested"] == 0 and back["skipped"] == 3
    # without includeSessions the session collections stay
    ok(conn.call("ingest", {"sessionId": "f1", "userId": "fay", "messages": chat(2, "f")}))
    ok(conn.call("forget", {"namespace": "fay"}))
    assert listc(conn, "turns:fay") == [] and len(listc(conn, "session_raw:f1")) == 2
    e = err(conn.call("forget", {}))
    assert e["code"] == ErrorCode.INVALID_INPUT and "namespace or userId" in e["message"]


def test_forget_never_touches_a_namespace_that_extends_it(conn: RawConnection) -> None:
    # Regression: "team" matched "turns:team:alice" as a prefix and deleted another namespace.
    ok(conn.call("ingest", {"sessionId": "t1", "userId": "team", "messages": chat(2, "t")}))
    ok(conn.call("ingest", {"sessionId": "t2", "userId": "team:alice", "messages": chat(2, "a")}))
    ok(conn.call("forget", {"userId": "team", "includeSessions": True}))
    assert listc(conn, "turns:team") == []
    assert listc(conn, "session_raw:t1") == []
    assert len(listc(conn, "turns:team:alice")) == 2
    assert len(listc(conn, "session_raw:t2")) == 2


def test_guidance_only_compaction_moves_rules_verbatim(conn: RawConnection) -> None:
    # Clusters holding only rule-like turns summarize nothing: the turns leave the active
    # view and are kept verbatim as guidance shards. That is a compaction (didCompact, as
    # the reference plugin's forced compaction expects), reported with the method
    # "guidance_shard" and no summary confidence.
    rules = [
        "You must never push directly to the main branch.",
        "Always run the full test suite before you open a pull request.",
        "Do not delete migration files once they have been released.",
        "You must sign every commit with your own key.",
    ]
    msgs = [
        {"id": f"g{i:03d}", "role": "user", "content": f"{rules[i % 4]} (rule {i})", "ts": 50 + i}
        for i in range(12)
    ]
    ok(conn.call("ingest", {"sessionId": "g1", "userId": "gus", "messages": msgs}))
    res = ok(conn.call("compact", {"sessionId": "g1", "targetSize": 4, "force": True}))
    assert res["didCompact"] is True
    assert res["summaryMethod"] == "guidance_shard" and res["meanConfidence"] == 0
    shards = listc(conn, "elevated:session:g1") + listc(conn, "elevated:user:gus")
    assert shards, "protected turns are kept verbatim as guidance shards"
    assert len(listc(conn, "session_raw:g1")) == 12


def test_forget_one_fact_by_query_with_the_real_model(conn: RawConnection) -> None:
    """The issue's case: "forget that I'm allergic" removes that fact, not the user."""
    fact = "I'm allergic to peanuts, so never suggest recipes with peanuts."
    texts = [*TOPICS[:3], fact, *TOPICS[3:]]
    msgs = [{"id": f"p{i}", "role": "user", "content": t} for i, t in enumerate(texts)]
    ok(conn.call("ingest", {"sessionId": "pn1", "userId": "pia", "messages": msgs}))
    ok(conn.call("compact", {"sessionId": "pn1", "force": True, "targetSize": 3}))
    dry = ok(conn.call("forget", {"userId": "pia", "query": "my peanut allergy", "dryRun": True}))
    assert [i["id"] for i in dry["items"]] == ["p3"] and dry["dryRun"] is True
    assert len(listc(conn, "session_raw:pn1")) == len(texts)  # nothing changed yet
    gone = ok(conn.call("forget", {"userId": "pia", "query": "my peanut allergy"}))
    assert [i["id"] for i in gone["items"]] == ["p3"]
    hits = ok(conn.call("search", {"query": "peanut allergy", "userId": "pia", "k": 20}))["hits"]
    assert not [h for h in hits if "peanut" in h["text"].lower()]
    for coll in ("session_raw:pn1", "session_summary:pn1", "turns:pia", "user:pia"):
        assert not [r for r in listc(conn, coll) if "peanut" in r["text"].lower()], coll
    assert {r["id"] for r in listc(conn, "session_raw:pn1")} == {m["id"] for m in msgs} - {"p3"}


def test_the_gate_keeps_constraints_and_drops_chit_chat(conn: RawConnection) -> None:
    """The issue's 10-turn chat with the real model: the constraint is durable, the
    thanks and acknowledgements are not (the reference kept the constraint out)."""
    chat_turns = [
        ("Hi! I'm Dana.", True),
        ("Can you help me plan dinners this week?", False),
        ("My partner Sam is vegetarian.", True),
        ("Thanks!", False),
        ("I'm allergic to peanuts, so never suggest recipes with peanuts.", True),
        ("Ok, sounds good.", False),
        ("I usually cook on Sundays for the whole week.", True),
        ("Nice, that looks tasty.", False),
        ("I don't like coriander at all.", True),
        ("Bye for now.", False),
    ]
    said = []
    for i, (text, _) in enumerate(chat_turns):
        msg = {"id": f"dn{i}", "role": "user", "content": text}
        out = ok(
            conn.call(
                "ingest",
                {"sessionId": "dana-g", "userId": "dana-g", "messages": [msg], "explain": True},
            )
        )
        said.append(out["messages"][0]["durable"])
    assert said == [durable for _, durable in chat_turns]


def test_a_fact_that_changed_ranks_the_new_one_first(conn: RawConnection) -> None:
    """ "I moved to Porto" after "I live in Lisbon": the newer ranks first for a
    present-tense question; both are found; a history question keeps the old one."""
    day = 86_400_000
    t0 = 1_700_000_000_000
    first = [
        {"id": "h1", "role": "user", "content": "I live in Lisbon near the river.", "ts": t0},
        {
            "id": "h2",
            "role": "user",
            "content": "My favourite food is grilled sardines.",
            "ts": t0 + 1,
        },
    ]
    later = [
        {
            "id": "h3",
            "role": "user",
            "content": "I moved to Porto last month, loving the new flat.",
            "ts": t0 + 40 * day,
        },
    ]
    ok(conn.call("ingest", {"sessionId": "home-1", "userId": "lia2", "messages": first}))
    ok(conn.call("ingest", {"sessionId": "home-2", "userId": "lia2", "messages": later}))
    old = ok(
        conn.call("memory.get", {"userId": "lia2", "collection": "turns:lia2", "id": "home-1:h1"})
    )
    assert old["record"]["metadata"]["superseded_by"] == "home-2:h3"
    texts = {r["id"]: r["text"] for r in listc(conn, "turns:lia2")}

    def ranked(prompt: str) -> list[str]:
        out = ok(
            conn.call(
                "assemble",
                {"sessionId": "home-3", "userId": "lia2", "prompt": prompt, "tokenBudget": 4000},
            )
        )
        return [s["id"] for s in sorted(out["selected"], key=lambda s: -s["score"])]

    now = ranked("Where do I live?")
    assert now.index("home-2:h3") < now.index("home-1:h1"), [texts.get(i) for i in now]
    before = ranked("Where did I live before Porto?")
    assert "home-1:h1" in before
    # the same history without a change cue: Lisbon is not superseded and scores higher
    plain = [*first, {**later[0], "content": "Porto has lovely bridges and old trams."}]
    ok(conn.call("ingest", {"sessionId": "home-9", "userId": "lia3", "messages": plain}))
    q = {"sessionId": "home-8", "prompt": "Where do I live?", "tokenBudget": 4000}
    lisbon = {}
    for ns, sid in (("lia2", "home-1"), ("lia3", "home-9")):
        out = ok(conn.call("assemble", {**q, "userId": ns}))
        lisbon[ns] = next(s["score"] for s in out["selected"] if s["id"] == f"{sid}:h1")
    assert lisbon["lia2"] < 0.5 * lisbon["lia3"], lisbon
