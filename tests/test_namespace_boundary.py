"""A session belongs to the namespace that created it; names never look like paths.

Regressions: `assemble {namespace: "bob", sessionId: "alice-s1"}` returned alice's
session tail while `search` with the same params returned nothing; `search_text` and
`list_collection` answered a missing or empty `collection` with an empty result while
`insert_text` refused it with -32009. A session written through v1
(`insert_session_turn`, as the published plugin does) counted as unowned: bob's
`assemble` read its tail and bob's `ingest` took it over; `forget {namespace:
"session:a-v2"}` reached into alice's v2 session a-v2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import RawConnection, StoreTarget, running_daemon, using_store

pytestmark = pytest.mark.usefixtures("store_target")  # both store backends

ALICE_TURNS = [
    {"role": "user", "content": "My locker code at the climbing gym is 4417."},
    {"role": "assistant", "content": "Got it, locker 4417 at the climbing gym."},
]


@pytest.fixture(scope="module")
def conn(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[RawConnection]:
    tmp = tmp_path_factory.mktemp("boundary")
    with (
        using_store(module_store_target),
        running_daemon(tmp, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as connection,
    ):
        reply = connection.call(
            "ingest", {"sessionId": "alice-s1", "namespace": "alice", "messages": ALICE_TURNS}
        )
        assert reply["result"]["ingested"] == 2, reply
        _seed_alice(connection)
        yield connection


# ---- alice's sessions written through v1, v2 and by an older daemon ----------------------

PIN = "990"
V1_TURNS = [("t1", "user", f"my bank pin is {PIN}"), ("t2", "assistant", f"Noted, pin {PIN}.")]
V2_TURNS = [
    {"id": "a1", "role": "user", "content": f"My bank pin is {PIN}, I always forget it."},
    {"id": "a2", "role": "assistant", "content": "I will remember your pin."},
]
ALICE_SESSIONS = ("a-v1", "a-v2", "a-legacy")
ALICE_COLLECTIONS = [
    *(f"{kind}:{sid}" for sid in ALICE_SESSIONS for kind in ("session_raw", "session")),
    "session_summary:a-v1",
    "turns:alice",
    "user:alice",
]
# what another namespace sends: bob, and the default namespaces spelled like collections
INTRUDERS = ["bob", *(f"session:{sid}" for sid in ALICE_SESSIONS)]


def plugin_turn(
    conn: RawConnection, sid: str, turn: str, role: str, text: str, user: str | None
) -> dict[str, Any]:
    """One message as the published plugin stores it: ``insert_session_turn`` with the
    namespace in the metadata's ``userId``, then the namespace's copies of a user turn."""
    meta: dict[str, Any] = {"role": role, "ts": 1_760_000_000_000, "sessionId": sid}
    meta |= {"type": "turn", "provenance_class": "session_turn", "source_turn_id": turn}
    if user is not None:
        meta["userId"] = user
    reply = conn.call(
        "insert_session_turn",
        {"sessionId": sid, "id": f"{sid}:{turn}", "text": text, "metadata": meta},
    )
    if "error" in reply or role != "user" or user is None:
        return dict(reply)
    for coll in (f"turns:{user}", f"user:{user}"):
        conn.result(
            "insert_text",
            {"collection": coll, "id": f"{user}:{turn}", "text": text, "metadata": meta},
        )
    return dict(reply)


def _seed_alice(conn: RawConnection) -> None:
    for turn, role, text in V1_TURNS:
        assert "result" in plugin_turn(conn, "a-v1", turn, role, text, "alice")
    summary = {"type": "summary", "sessionId": "a-v1", "userId": "alice"}
    conn.result(
        "insert_text",
        {
            "collection": "session_summary:a-v1",
            "id": "summary:1",
            "text": f"pin {PIN}",
            "metadata": summary,
        },
    )
    out = conn.result("ingest", {"sessionId": "a-v2", "namespace": "alice", "messages": V2_TURNS})
    assert out["ingested"] == 2, out
    # An older daemon's v1 session: its state record names no userId, its turns do.
    conn.result("ensure_collections", {"collections": ["session_state:a-legacy"]})
    state = {"type": "session_state", "sessionId": "a-legacy", "compaction_generation": 0}
    conn.result(
        "insert_text",
        {
            "collection": "session_state:a-legacy",
            "id": "__session_state__",
            "text": "",
            "metadata": state,
        },
    )
    for turn, role, text in V1_TURNS:
        meta = {"role": role, "userId": "alice", "sessionId": "a-legacy", "type": "turn"}
        for coll in ("session:a-legacy", "session_raw:a-legacy"):
            conn.result(
                "insert_text",
                {"collection": coll, "id": f"a-legacy:{turn}", "text": text, "metadata": meta},
            )


def alice_records(conn: RawConnection) -> dict[str, list[tuple[str, str]]]:
    """Every record of alice's sessions and namespace, by collection."""
    out: dict[str, list[tuple[str, str]]] = {}
    for coll in ALICE_COLLECTIONS:
        rows = conn.result("list_collection", {"collection": coll})["results"]
        out[coll] = sorted((r["id"], r["text"]) for r in rows)
    return out


def test_assemble_in_another_namespace_is_refused_and_shows_nothing(conn: RawConnection) -> None:
    params = {"sessionId": "alice-s1", "namespace": "bob", "tokenBudget": 4000, "prompt": "code?"}
    error = conn.error("assemble", params)
    assert error["code"] == -32012
    assert "belongs to another namespace" in error["message"]
    assert "alice" not in error["message"].replace("alice-s1", "")  # the owner is not told
    assert "4417" not in repr(error)


def test_user_id_naming_another_namespace_is_refused_too(conn: RawConnection) -> None:
    params = {"sessionId": "alice-s1", "userId": "bob", "tokenBudget": 4000, "prompt": "code?"}
    assert conn.error("assemble", params)["code"] == -32012


def test_search_with_the_session_of_another_namespace_is_refused(conn: RawConnection) -> None:
    params = {"query": "locker code", "namespace": "bob", "sessionId": "alice-s1"}
    assert conn.error("search", params)["code"] == -32012


def test_ingest_into_the_session_of_another_namespace_is_refused(conn: RawConnection) -> None:
    params = {
        "sessionId": "alice-s1",
        "namespace": "bob",
        "messages": [{"role": "user", "content": "bob was here"}],
    }
    assert conn.error("ingest", params)["code"] == -32012
    raw = conn.call("list_collection", {"collection": "session_raw:alice-s1"})["result"]
    assert "bob was here" not in repr(raw)
    assert conn.call("list_collection", {"collection": "turns:bob"})["result"]["results"] == []


def test_the_owning_namespace_and_no_namespace_both_reach_the_session(
    conn: RawConnection,
) -> None:
    for extra in ({"namespace": "alice"}, {}):
        params = {"sessionId": "alice-s1", "tokenBudget": 4000, "prompt": "locker code?", **extra}
        result = conn.call("assemble", params)["result"]
        assert "4417" in repr(result), extra
    # a later ingest without a namespace lands in alice's namespace, not session:alice-s1
    more = [{"role": "user", "content": "The gym closes at ten on Sundays."}]
    assert conn.call("ingest", {"sessionId": "alice-s1", "messages": more})["result"]["ingested"]
    turns = conn.call("list_collection", {"collection": "turns:alice"})["result"]["results"]
    assert any("Sundays" in r["text"] for r in turns)
    other = conn.call("list_collection", {"collection": "turns:session:alice-s1"})["result"]
    assert other["results"] == []


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("search_text", {"text": "x", "k": 3}),
        ("search_text", {"collection": "", "text": "x", "k": 3}),
        ("list_collection", {}),
        ("list_collection", {"collection": ""}),
        ("list_by_meta", {"collection": "", "key": "a", "value": "b"}),
        ("delete", {"collection": "", "id": "x"}),
        ("delete_batch", {"collection": "", "ids": ["x"]}),
        ("search_text_collections", {"collections": ["turns:alice", ""], "text": "x", "k": 3}),
        ("bump_access_counts", {"updates": [{"collection": "", "ids": ["x"]}]}),
    ],
)
def test_a_missing_or_empty_collection_is_refused_everywhere(
    conn: RawConnection, method: str, params: dict[str, Any]
) -> None:
    error = conn.error(method, params)
    assert error["code"] == -32009
    assert "collection name is required" in error["message"]


BAD_NAMES = [
    ("../etc", "path separator"),
    ("turns:a/b", "path separator"),
    ("turns:a\\b", "path separator"),
    ("turns:..", "'..' segment"),
    ("turns:a\x01b", "control characters"),
    ("turns:" + "x" * 300, "the limit is"),
]


@pytest.mark.parametrize(("name", "why"), BAD_NAMES)
def test_v1_collection_names_are_validated_on_reads_and_writes(
    conn: RawConnection, name: str, why: str
) -> None:
    for method, params in [
        ("insert_text", {"collection": name, "id": "r1", "text": "x"}),
        ("list_collection", {"collection": name}),
        ("search_text", {"collection": name, "text": "x", "k": 2}),
        ("ensure_collections", {"collections": [name]}),
    ]:
        error = conn.error(method, params)
        assert error["code"] == -32009, (method, error)
        assert why in error["message"], (method, error)


@pytest.mark.parametrize("value", ["../alice", "a/b", "..", "a\x00b", "x" * 300, "alice:..:bob"])
def test_v2_session_ids_and_namespaces_are_validated(conn: RawConnection, value: str) -> None:
    msgs = [{"role": "user", "content": "hello"}]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ingest", {"sessionId": value, "messages": msgs}),
        ("ingest", {"sessionId": "fresh", "namespace": value, "messages": msgs}),
        ("ingest", {"sessionId": "fresh", "userId": value, "messages": msgs}),
        ("assemble", {"sessionId": value, "tokenBudget": 1000}),
        ("assemble", {"sessionId": "fresh", "namespace": value, "tokenBudget": 1000}),
        ("search", {"query": "hello", "namespace": value}),
        ("forget", {"namespace": value}),
        ("export_memory", {"namespace": value}),
        ("flush_namespace", {"userId": value}),
        # found by the fuzzer (make stress): these answered -32603 internal error
        ("compact", {"sessionId": value, "force": True}),
        ("expand", {"sessionId": value, "summaryId": "s"}),
        ("insert_session_turn", {"sessionId": value, "role": "user", "text": "hi", "id": "t"}),
        ("query_raw_session", {"sessionId": value, "text": "hi", "k": 3}),
        ("compact_session", {"sessionId": value, "force": True}),
    ]
    for method, params in calls:
        error = conn.error(method, params)
        assert error["code"] in (-32009, -32602), (method, error)
    assert conn.call("list_collection", {"collection": "turns:fresh"})["result"]["results"] == []


# ---- a session's owner, whichever way it was written ------------------------------------


def _session_calls(sid: str, who: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Every v2 verb that names a session, asked by ``who`` (a namespace or userId)."""
    msgs = [{"role": "user", "content": "bob was here"}]
    raw = f"session_raw:{sid}"
    return [
        ("assemble", {"sessionId": sid, "tokenBudget": 4000, "prompt": "bank pin?", **who}),
        ("search", {"query": "bank pin", "sessionId": sid, **who}),
        ("search", {"query": "bank pin", "sessionId": sid, "scopes": ["session"], **who}),
        ("ingest", {"sessionId": sid, "messages": msgs, **who}),
        ("ingest", {"sessionId": sid, "messages": msgs, "advancementKey": "k1", **who}),
        *(
            ("memory.list", {"sessionId": sid, "scope": scope, **who})
            for scope in ("history", "summary", "elevated")
        ),
        ("memory.get", {"sessionId": sid, "collection": raw, "id": f"{sid}:t1", **who}),
        ("memory.get", {"sessionId": sid, "collection": raw, "id": "a1", **who}),
    ]


@pytest.mark.parametrize("sid", ALICE_SESSIONS)
@pytest.mark.parametrize("who", [{"namespace": "bob"}, {"userId": "bob"}])
def test_every_v2_verb_naming_another_namespace_is_refused_on_alices_sessions(
    conn: RawConnection, sid: str, who: dict[str, str]
) -> None:
    before = alice_records(conn)
    for method, params in _session_calls(sid, who):
        error = conn.error(method, params)
        assert error["code"] == -32012, (method, params, error)
        assert PIN not in repr(error), (method, error)
    assert alice_records(conn) == before
    assert conn.result("list_collection", {"collection": "turns:bob"})["results"] == []


@pytest.mark.parametrize("sid", ALICE_SESSIONS)
def test_a_default_namespace_spelled_like_another_session_is_refused_too(
    conn: RawConnection, sid: str
) -> None:
    for other in ALICE_SESSIONS:
        for method, params in _session_calls(sid, {"namespace": f"session:{other}"}):
            error = conn.error(method, params)
            assert error["code"] == -32012, (method, params, error)


@pytest.mark.parametrize("sid", ["a-v1", "a-v2"])
def test_a_v1_write_naming_another_user_cannot_enter_alices_session(
    conn: RawConnection, sid: str
) -> None:
    before = alice_records(conn)
    reply = plugin_turn(conn, sid, "b1", "user", "bob was here", "bob")
    assert reply.get("error", {}).get("code") == -32012, reply
    assert alice_records(conn) == before
    params = {"sessionId": sid, "namespace": "bob", "tokenBudget": 900}
    assert conn.error("assemble", params)["code"] == -32012


@pytest.mark.parametrize("ns", INTRUDERS)
def test_reads_of_another_namespace_show_nothing_of_alices_sessions(
    conn: RawConnection, ns: str
) -> None:
    for scope in ("durable", "history", "summary", "elevated", "dream"):
        page = conn.result("memory.list", {"namespace": ns, "scope": scope})
        assert PIN not in repr(page), (scope, page)
    listed = conn.result("sessions.list", {"namespace": ns})
    assert not {s["sessionId"] for s in listed["sessions"]} & {*ALICE_SESSIONS, "alice-s1"}
    (stats,) = conn.result("memory.stats", {"namespace": ns})["namespaces"]
    assert (stats["sessions"], stats["history"], stats["summary"]) == (0, 0, 0), stats
    hits = conn.result("search", {"query": "bank pin", "namespace": ns, "k": 50})["hits"]
    assert PIN not in repr(hits)
    for sid in ALICE_SESSIONS:
        for coll, rid in ((f"session_raw:{sid}", f"{sid}:t1"), (f"session_raw:{sid}", "a1")):
            params = {"namespace": ns, "collection": coll, "id": rid}
            assert conn.error("memory.get", params)["code"] == -32002
    summary = {"namespace": ns, "collection": "session_summary:a-v1", "id": "summary:1"}
    assert conn.error("memory.get", summary)["code"] == -32002


@pytest.mark.parametrize("ns", INTRUDERS)
def test_forget_in_another_namespace_reaches_nothing_of_alices_sessions(
    conn: RawConnection, ns: str
) -> None:
    before = alice_records(conn)
    assert before["session_raw:a-v2"] and before["session_raw:a-v1"]
    ids = ["a1", "a2", "a-v1:t1", "a-legacy:t1", "t1"]
    records = [
        {"collection": coll, "id": rid}
        for coll, rows in before.items()
        for rid, _ in rows
        if not coll.startswith("session_summary:")  # summaries are refused outright
    ]
    for params in (
        {"messageIds": ids, "dryRun": True},
        {"messageIds": ids},
        {"records": records},
        {"query": "bank pin", "limit": 10},
        {"includeSessions": True, "dryRun": True},
        {"includeSessions": True},
    ):
        out = conn.result("forget", {"namespace": ns, **params})
        assert out["deleted"] == 0, (params, out)
        assert out.get("items", []) == [], (params, out)
    update = {"namespace": ns, "collection": "session_raw:a-v1", "id": "a-v1:t1", "text": "x"}
    assert conn.error("memory.update", update)["code"] == -32009
    assert alice_records(conn) == before


@pytest.mark.parametrize("sid", ["a-v1", "a-v2"])
def test_compact_and_expand_cannot_name_a_namespace(conn: RawConnection, sid: str) -> None:
    # They act for the session's owner; a namespace is an unknown field.
    for method, params in (
        ("compact", {"sessionId": sid, "namespace": "bob"}),
        ("expand", {"sessionId": sid, "summaryId": "summary:1", "namespace": "bob"}),
    ):
        assert conn.error(method, params)["code"] == -32602


def test_bobs_ingest_cannot_take_over_alices_v1_session(conn: RawConnection) -> None:
    msgs = [{"role": "user", "content": "bob owns this now"}]
    for who in ({"namespace": "bob"}, {"userId": "bob"}, {"namespace": "session:a-v1"}):
        assert (
            conn.error("ingest", {"sessionId": "a-v1", "messages": msgs, **who})["code"] == -32012
        )
    raw = conn.result("list_collection", {"collection": "session_raw:a-v1"})["results"]
    assert "bob owns" not in repr(raw)
    listed = conn.result("memory.list", {"namespace": "bob", "scope": "history"})
    assert listed["records"] == []
    params = {"sessionId": "a-v1", "namespace": "bob", "tokenBudget": 4000, "prompt": "pin?"}
    assert conn.error("assemble", params)["code"] == -32012


@pytest.mark.parametrize("sid", ALICE_SESSIONS)
def test_alice_still_reaches_her_own_session_afterwards(conn: RawConnection, sid: str) -> None:
    for who in ({"namespace": "alice"}, {"userId": "alice"}, {}):
        params = {"sessionId": sid, "tokenBudget": 4000, "prompt": "what is my bank pin?", **who}
        assert PIN in repr(conn.result("assemble", params)), (sid, who)
        hits = conn.result("search", {"query": "bank pin", "sessionId": sid, **who})["hits"]
        assert PIN in repr(hits), (sid, who)
    listed = conn.result("memory.list", {"sessionId": sid, "scope": "history"})["records"]
    assert {r["sessionId"] for r in listed} == ({sid} if sid != "a-legacy" else set())
    sessions = conn.result("sessions.list", {"namespace": "alice"})["sessions"]
    assert sid in {s["sessionId"] for s in sessions}
    # alice writes on through v2 (no namespace: the session's own) and through v1
    more = [{"id": f"{sid}-late", "role": "user", "content": "The bank moved to Elm Street."}]
    assert conn.result("ingest", {"sessionId": sid, "messages": more})["ingested"] == 1
    turns = conn.result("list_collection", {"collection": "turns:alice"})["results"]
    assert any("Elm Street" in r["text"] for r in turns)
    assert "result" in plugin_turn(conn, sid, "late-v1", "user", "Elm Street it is.", "alice")


def test_a_v1_session_without_a_user_belongs_to_its_default_namespace(
    conn: RawConnection,
) -> None:
    assert "result" in plugin_turn(conn, "anon-v1", "t1", "user", "anon pin 5521", None)
    for who in ({"namespace": "bob"}, {"userId": "bob"}):
        params = {"sessionId": "anon-v1", "tokenBudget": 900, "prompt": "pin?", **who}
        assert conn.error("assemble", params)["code"] == -32012
    for who in ({"namespace": "session:anon-v1"}, {}):
        params = {"sessionId": "anon-v1", "tokenBudget": 900, "prompt": "pin?", **who}
        assert "5521" in repr(conn.result("assemble", params))
    listed = conn.result("sessions.list", {"namespace": "session:anon-v1"})["sessions"]
    assert [s["sessionId"] for s in listed] == ["anon-v1"]
