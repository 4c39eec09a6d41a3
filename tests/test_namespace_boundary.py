"""A session belongs to the namespace that created it; names never look like paths.

Regressions: `assemble {namespace: "bob", sessionId: "alice-s1"}` returned alice's
session tail while `search` with the same params returned nothing; `search_text` and
`list_collection` answered a missing or empty `collection` with an empty result while
`insert_text` refused it with -32009.
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
        yield connection


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
