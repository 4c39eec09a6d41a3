"""v2 ``assemble`` and ``search`` against a real daemon process (issue 6)."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.codes import ErrorCode
from sidecar.memory.core.tokens import estimate_tokens
from tests.support import DaemonProcess, RawConnection, StoreTarget, start_daemon, using_store

NS = "alice"
DAY = 86_400_000
T0 = 1_700_000_000_000

SESSIONS: dict[str, list[tuple[str, str, str]]] = {
    "s1": [
        ("s1-1", "user", "I adopted a golden retriever puppy named Biscuit last week."),
        ("s1-2", "assistant", "Congratulations on adopting Biscuit! How is the puppy doing?"),
        ("s1-3", "user", "Biscuit loves chasing tennis balls in the park."),
        ("s1-4", "assistant", "Tennis balls are a classic retriever favourite."),
    ],
    "s2": [
        ("s2-1", "user", "My sister Maria is visiting from Lisbon in the spring."),
        ("s2-2", "assistant", "Lisbon is lovely in spring. Any plans for the visit?"),
        ("s2-3", "user", "We plan to hike the coastal trail near Sintra together."),
        ("s2-4", "assistant", "The Sintra coast trail has great ocean views."),
    ],
    "s3": [
        ("s3-1", "user", "I started learning the cello; my teacher is called Mr Okafor."),
        ("s3-2", "assistant", "Cello is a beautiful instrument. How are lessons going?"),
        ("s3-3", "user", "Slowly. Bowing technique is hard but I practise every evening."),
        ("s3-4", "assistant", "Daily practice is the best way to improve bowing."),
    ],
}

CORE_DOC = "---\ncore: true\n---\n- Always answer in British English.\n\n- Never reveal secrets.\n"


def _ok(reply: dict[str, Any]) -> Any:
    assert "error" not in reply, reply
    return reply["result"]


def _err(reply: dict[str, Any]) -> int:
    assert "error" in reply, reply
    return int(reply["error"]["code"])


def _ingest_all(conn: RawConnection) -> None:
    for i, (sid, turns) in enumerate(SESSIONS.items()):
        msgs = [
            {"id": tid, "role": role, "content": text, "ts": T0 + i * DAY + j * 1000}
            for j, (tid, role, text) in enumerate(turns)
        ]
        res = _ok(conn.call("ingest", {"sessionId": sid, "namespace": NS, "messages": msgs}))
        assert res["ingested"] == len(turns)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget) -> Any:
    tmp = tmp_path_factory.mktemp("assemble")
    with using_store(module_store_target):
        d = start_daemon(tmp, "--socket", str(tmp / "d.sock"))
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def conn(daemon: DaemonProcess) -> Any:
    with RawConnection(daemon.endpoint, timeout=60) as c:
        _ingest_all(c)
        _ok(conn_call_core(c))
        yield c


def conn_call_core(c: RawConnection) -> dict[str, Any]:
    return c.call("authored.ingest", {"sourceDoc": "core.md", "text": CORE_DOC, "core": True})


def _turn_ids(result: dict[str, Any]) -> list[str]:
    return [t for item in result["selected"] for t in item["turnIds"]]


def test_assemble_fresh_session_retrieves_and_keeps_budget(conn: RawConnection) -> None:
    res = _ok(
        conn.call(
            "assemble",
            {
                "sessionId": "fresh-1",
                "namespace": NS,
                "prompt": "What is the name of my dog?",
                "tokenBudget": 2000,
            },
        )
    )
    budget = res["budget"]
    assert budget["total"] == 500
    assert budget["used"] <= budget["total"]
    assert sum(i["tokens"] for i in res["selected"]) == budget["used"]
    assert "degraded" not in res
    ids = _turn_ids(res)
    assert "s1-1" in ids
    assert len(ids) == len(set(ids)), "a source turn was injected twice"
    hard = [i for i in res["selected"] if i["collection"] == "authored:hard"]
    assert len(hard) >= 2
    addition = res["systemPromptAddition"]
    assert "Always answer in British English." in addition
    assert "Never reveal secrets." in addition
    assert "<recalled_memories>" in addition and "Biscuit" in addition
    assert res["estimatedTokens"] > 0
    assert res["messages"] == []
    assert "embedMs" in res["timings"]


def test_assemble_tail_exact_and_in_order(conn: RawConnection) -> None:
    messages = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"}
        for i in range(6)
    ]
    messages[-1] = {"id": "m5", "role": "user", "content": "Where does my sister live?"}
    res = _ok(
        conn.call(
            "assemble",
            {
                "sessionId": "fresh-2",
                "namespace": NS,
                "messages": messages,
                "tokenBudget": 4000,
                "tailPlacement": "addition",
            },
        )
    )
    tail = [i for i in res["selected"] if i["reason"].startswith("tail")]
    tail_ids = [i["id"] for i in tail]
    assert tail_ids, res["selected"]
    # the tail moved from the host's messages into the addition
    assert res["messages"] == messages[: len(messages) - len(tail_ids)]
    # the tail is a suffix of the messages, exact; base and extension each chronological
    assert sorted(tail_ids) == [m["id"] for m in messages[-len(tail_ids) :]]
    base = [i["id"] for i in tail if i["reason"] == "tail base"]
    assert base == [m["id"] for m in messages[-len(base) :]]
    addition = res["systemPromptAddition"]
    rendered = [addition.index(m["content"]) for m in messages[-len(tail_ids) :]]
    assert rendered == sorted(rendered)  # rendered in order
    assert "s2-1" in _turn_ids(res)  # the query comes from the last message
    ids = _turn_ids(res)
    assert len(ids) == len(set(ids))
    assert res["budget"]["used"] <= res["budget"]["total"]


def test_budget_never_exceeded_across_budgets(conn: RawConnection) -> None:
    for budget in (200, 400, 800, 1600, 6400):
        res = _ok(
            conn.call(
                "assemble",
                {
                    "sessionId": "fresh-3",
                    "namespace": NS,
                    "prompt": "cello teacher practice bowing",
                    "tokenBudget": budget,
                },
            )
        )
        b = res["budget"]
        if "degraded" not in res:
            assert b["used"] <= b["total"], (budget, b)
            # what is actually injected (preambles included) fits the memory budget too
            injected = estimate_tokens(res["systemPromptAddition"])
            assert injected <= b["total"], (budget, injected, b)
        assert any(i["collection"] == "authored:hard" for i in res["selected"])


def test_degraded_when_hard_rules_exceed(conn: RawConnection) -> None:
    res = _ok(
        conn.call(
            "assemble",
            {"sessionId": "fresh-4", "namespace": NS, "prompt": "dog", "tokenBudget": 20},
        )
    )
    assert res["degraded"]
    assert "<memory_degraded>" in res["systemPromptAddition"]


def test_bad_input(conn: RawConnection) -> None:
    assert _err(conn.call("assemble", {"namespace": NS, "tokenBudget": 100})) in (
        ErrorCode.INVALID_PARAMS,
        ErrorCode.INVALID_INPUT,
    )
    assert _err(conn.call("assemble", {"sessionId": "", "tokenBudget": 100})) in (
        ErrorCode.INVALID_PARAMS,
        ErrorCode.INVALID_INPUT,
    )
    for bad in (0, -5):
        code = _err(conn.call("assemble", {"sessionId": "x", "tokenBudget": bad}))
        assert code in (ErrorCode.INVALID_PARAMS, ErrorCode.INVALID_INPUT)
    code = _err(conn.call("assemble", {"sessionId": "x", "tokenBudget": "many"}))
    assert code == ErrorCode.INVALID_PARAMS
    assert _err(conn.call("search", {"query": "", "namespace": NS})) == ErrorCode.INVALID_INPUT
    assert _err(conn.call("search", {"query": "dog"})) == ErrorCode.INVALID_INPUT
    code = _err(conn.call("search", {"query": "dog", "namespace": NS, "scopes": ["nope"]}))
    assert code == ErrorCode.INVALID_INPUT


def test_search_filters(conn: RawConnection) -> None:
    hits = _ok(conn.call("search", {"query": "Biscuit puppy", "namespace": NS, "k": 5}))["hits"]
    assert hits and hits[0]["turnIds"][0].startswith("s1-")
    assert {
        "kind",
        "collection",
        "id",
        "turnIds",
        "sessionId",
        "role",
        "ts",
        "score",
        "text",
    } <= set(hits[0])
    res = _ok(
        conn.call(
            "search",
            {"query": "Biscuit puppy", "namespace": NS, "filters": {"role": "assistant"}},
        )
    )
    assert res["hits"] and all(h["role"] == "assistant" for h in res["hits"])
    since = T0 + DAY
    until = T0 + 2 * DAY - 1
    res = _ok(
        conn.call(
            "search",
            {"query": "trail", "namespace": NS, "filters": {"since": since, "until": until}},
        )
    )
    assert res["hits"] and all(since <= h["ts"] <= until for h in res["hits"])
    assert all(h["sessionId"] == "s2" for h in res["hits"])
    res = _ok(
        conn.call("search", {"query": "cello", "namespace": NS, "filters": {"kind": "summary"}})
    )
    assert res["hits"] == []
    res = _ok(conn.call("search", {"query": "cello", "namespace": NS, "filters": {"kind": "turn"}}))
    assert res["hits"] and all(h["kind"] == "turn" for h in res["hits"])


def test_caches_invalidated_by_ingest_and_authored_delete(conn: RawConnection) -> None:
    def ask(q: str) -> dict[str, Any]:
        return _ok(
            conn.call(
                "assemble",
                {"sessionId": "fresh-5", "namespace": NS, "prompt": q, "tokenBudget": 4000},
            )
        )

    first = ask("Which volcano did I climb in Iceland?")  # warms the caches
    assert "s4-1" not in _turn_ids(first)
    _ok(
        conn.call(
            "ingest",
            {
                "sessionId": "s4",
                "namespace": NS,
                "messages": [
                    {
                        "id": "s4-1",
                        "role": "user",
                        "content": "I climbed the Hekla volcano in Iceland yesterday.",
                        "ts": T0 + 5 * DAY,
                    }
                ],
            },
        )
    )
    assert "s4-1" in _turn_ids(ask("Which volcano did I climb in Iceland?"))
    hits = _ok(conn.call("search", {"query": "Hekla volcano", "namespace": NS}))["hits"]
    assert hits and hits[0]["turnIds"] == ["s4-1"]

    _ok(conn.call("authored.delete", {"sourceDoc": "core.md"}))
    after = ask("Which volcano did I climb in Iceland?")
    assert not any(i["collection"].startswith("authored:") for i in after["selected"])
    assert "British English" not in after["systemPromptAddition"]
    _ok(conn_call_core(conn))  # restore for other tests
    again = ask("Which volcano did I climb in Iceland?")
    assert "British English" in again["systemPromptAddition"]


def test_namespace_defaults_to_session(conn: RawConnection) -> None:
    _ok(
        conn.call(
            "ingest",
            {
                "sessionId": "solo",
                "messages": [{"id": "x1", "role": "user", "content": "My bike is a red Bianchi."}],
            },
        )
    )
    res = _ok(
        conn.call(
            "assemble",
            {"sessionId": "solo", "prompt": "What colour is my bike?", "tokenBudget": 4000},
        )
    )
    assert "x1" in _turn_ids(res)


def test_messages_without_ids_are_not_injected_twice(conn: RawConnection) -> None:
    # Regression: id-less host messages got made-up ids in assemble while ingest had
    # derived others, so the stored copy of each turn was recalled beside the tail.
    lines = [
        "the blue kayak is stored in the boathouse",
        "noted, the boathouse keeps the kayak",
        "the paddles hang above the workbench",
        "and the life vests are in the red crate",
        "what else is kept in the boathouse?",
        "the kayak, the paddles and the vests",
        "where are the paddles kept?",
    ]
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)
    ]
    _ok(conn.call("ingest", {"sessionId": "noid", "namespace": "noid-ns", "messages": msgs}))
    res = _ok(
        conn.call(
            "assemble",
            {"sessionId": "noid", "namespace": "noid-ns", "messages": msgs, "tokenBudget": 4000},
        )
    )
    addition = res["systemPromptAddition"]
    for text in lines:
        assert addition.count(text) <= 1, text
    ids = _turn_ids(res)
    assert len(ids) == len(set(ids))
    assert not any(i.startswith("msg:") for i in ids)  # the stored turn ids are used
