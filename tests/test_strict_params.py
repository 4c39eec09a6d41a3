"""v2 params refuse unknown fields, naming the field and the one probably meant; v1 params
keep the reference daemon's tolerance.

Regressions: `ingest` with `user_id` answered `ingested: 1` and stored the turn under
`session:s5`; `assemble` with `query` instead of `prompt` silently retrieved nothing;
`search` with `user_id` searched another namespace.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import RawConnection, StoreTarget, running_daemon, using_store

pytestmark = pytest.mark.usefixtures("store_target")  # both store backends


@pytest.fixture(scope="module")
def conn(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[RawConnection]:
    tmp = tmp_path_factory.mktemp("strict")
    with (
        using_store(module_store_target),
        running_daemon(tmp, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as connection,
    ):
        yield connection


def test_ingest_with_user_id_is_refused_and_nothing_is_stored(conn: RawConnection) -> None:
    error = conn.error(
        "ingest",
        {
            "sessionId": "s5",
            "user_id": "me",
            "messages": [{"role": "user", "text": "I prefer tea"}],
        },
    )
    assert error["code"] == -32602
    assert error["message"] == (
        "invalid params for ingest: unknown field `user_id`; did you mean `userId`?"
    )
    listed = conn.call("list_collection", {"collection": "session_raw:s5"})["result"]
    assert listed["results"] == []


def test_message_with_text_instead_of_content_is_refused(conn: RawConnection) -> None:
    error = conn.error(
        "ingest", {"sessionId": "s5", "messages": [{"role": "user", "text": "I prefer tea"}]}
    )
    assert error["code"] == -32602
    assert "unknown field `text` at `$.messages[0]`; did you mean `content`?" in error["message"]


def test_assemble_with_query_is_refused(conn: RawConnection) -> None:
    error = conn.error("assemble", {"sessionId": "s", "tokenBudget": 4000, "query": "tea?"})
    assert error["code"] == -32602
    assert error["message"].endswith("unknown field `query`; did you mean `prompt`?")


def test_search_with_user_id_is_refused(conn: RawConnection) -> None:
    error = conn.error("search", {"query": "tea", "user_id": "me"})
    assert error["code"] == -32602
    assert "did you mean `userId`?" in error["message"]


def test_nested_filter_typo_is_refused(conn: RawConnection) -> None:
    error = conn.error("search", {"query": "tea", "filters": {"rol": "user"}})
    assert "unknown field `rol` at `$.filters`; did you mean `role`?" in error["message"]


def test_unknown_field_far_from_every_name_lists_the_known_ones(conn: RawConnection) -> None:
    error = conn.error("compact", {"sessionId": "s", "zzz": 1})
    assert "unknown field `zzz` (known fields: sessionId, force, targetSize)" in error["message"]


def test_v1_methods_keep_ignoring_unknown_fields(conn: RawConnection) -> None:
    reply = conn.call(
        "insert_text",
        {"collection": "user:v1", "id": "a", "text": "hello", "metadata": {}, "extra": True},
    )
    assert reply["result"] == {"ok": True}
    reply = conn.call("search_text", {"collection": "user:v1", "text": "hello", "k": 1, "x": 1})
    assert reply["result"]["results"][0]["id"] == "a"


def test_health_and_status_stay_tolerant(conn: RawConnection) -> None:
    assert conn.call("health", {"verbose": True})["result"]["ok"] is True


def test_assemble_messages_are_the_hosts_own_objects(conn: RawConnection) -> None:
    """Messages passed to assemble are returned unchanged, so their extra fields stay."""
    messages = [{"role": "user", "content": "hi", "toolCallId": "t1", "timestamp": 5}]
    reply = conn.call(
        "assemble", {"sessionId": "s", "tokenBudget": 4000, "prompt": "hi", "messages": messages}
    )
    assert reply["result"]["messages"] == messages


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("memory.list", {"namespace": "me", "sesion_id": "s"}),
        ("memory.get", {"namespace": "me", "collection": "user:me", "id": "x", "sesion_id": "s"}),
        ("memory.update", {"namespace": "me", "collection": "user:me", "id": "x", "tex": "y"}),
        ("memory.stats", {"namespace": "me", "buckett": "day"}),
        ("sessions.list", {"namespace": "me", "sessionId": "s"}),
    ],
)
def test_memory_and_sessions_methods_refuse_unknown_fields(
    conn: RawConnection, method: str, params: dict[str, object]
) -> None:
    unknown = next(k for k in params if k not in ("namespace", "collection", "id"))
    error = conn.error(method, params)
    assert error["code"] == -32602
    assert f"unknown field `{unknown}`" in error["message"]
