"""sessions.list: a namespace's sessions, most recently active first, with counts taken
from what is stored (turns, summaries), paged by a stable cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import ErrorCode
from tests.memory_rpc.conftest import Harness, make_harness

INVALID_INPUT = int(ErrorCode.INVALID_INPUT)
INVALID_PARAMS = int(ErrorCode.INVALID_PARAMS)

USER = "lia"
T0 = 1_700_000_000_000


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    flags: dict[str, Any] = {"compaction.auto": False}
    harness, close = await make_harness(tmp_path, **flags)
    try:
        yield harness
    finally:
        await close()


def _turns(sid: str, count: int, start_ts: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{sid}-{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i} of {sid}: the greenhouse tomatoes need water on day {i}",
            "ts": start_ts + i * 1000,
        }
        for i in range(count)
    ]


async def _ingest(h: Harness, sid: str, count: int, start_ts: int, ns: str = USER) -> None:
    await h.call(
        "ingest", {"sessionId": sid, "userId": ns, "messages": _turns(sid, count, start_ts)}
    )


async def test_sessions_are_listed_newest_first_with_their_counts_and_times(h: Harness) -> None:
    await _ingest(h, "old", 3, T0)
    await _ingest(h, "new", 2, T0 + 100_000)
    await _ingest(h, "bobs", 4, T0 + 200_000, ns="bob")
    out = await h.call("sessions.list", {"userId": USER})
    assert out == {
        "namespace": USER,
        "sessions": [
            {
                "sessionId": "new",
                "turnCount": 2,
                "firstTs": T0 + 100_000,
                "lastTs": T0 + 101_000,
                "summaryCount": 0,
            },
            {
                "sessionId": "old",
                "turnCount": 3,
                "firstTs": T0,
                "lastTs": T0 + 2000,
                "summaryCount": 0,
            },
        ],
        "total": 2,
        "nextCursor": "",
    }
    bob = await h.call("sessions.list", {"namespace": "bob"})
    assert [s["sessionId"] for s in bob["sessions"]] == ["bobs"]
    assert (await h.call("sessions.list", {"namespace": "nobody"}))["sessions"] == []


async def test_a_later_turn_moves_a_session_to_the_front(h: Harness) -> None:
    await _ingest(h, "a", 1, T0)
    await _ingest(h, "b", 1, T0 + 10_000)
    late = {"id": "a-late", "role": "user", "content": "one more thing", "ts": T0 + 50_000}
    await h.call("ingest", {"sessionId": "a", "messages": [late]})
    out = await h.call("sessions.list", {"userId": USER})
    assert [(s["sessionId"], s["turnCount"], s["lastTs"]) for s in out["sessions"]] == [
        ("a", 2, T0 + 50_000),
        ("b", 1, T0 + 10_000),
    ]


async def test_pages_follow_the_cursor_and_since_filters_by_last_turn(h: Harness) -> None:
    for i in range(5):
        await _ingest(h, f"s{i}", 1, T0 + i * 10_000)
    seen: list[str] = []
    cursor = ""
    while True:
        params: dict[str, Any] = {"userId": USER, "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = await h.call("sessions.list", params)
        assert page["total"] == 5
        seen += [s["sessionId"] for s in page["sessions"]]
        cursor = page["nextCursor"]
        if not cursor:
            break
    assert seen == ["s4", "s3", "s2", "s1", "s0"]
    recent = await h.call("sessions.list", {"userId": USER, "since": T0 + 30_000})
    assert [s["sessionId"] for s in recent["sessions"]] == ["s4", "s3"]
    assert recent["total"] == 2


async def test_summaries_are_counted_and_forgotten_turns_are_not(h: Harness) -> None:
    await _ingest(h, "long", 24, T0)
    compacted = await h.call("compact", {"sessionId": "long", "force": True})
    assert compacted["didCompact"] is True
    stored = await h.call(
        "memory.list", {"userId": USER, "scope": "summary", "sessionId": "long", "limit": 500}
    )
    listed = (await h.call("sessions.list", {"userId": USER}))["sessions"][0]
    assert listed["summaryCount"] == stored["total"] > 0
    assert listed["turnCount"] == 24
    await h.call("forget", {"userId": USER, "messageIds": ["long-0", "long-1"]})
    after = (await h.call("sessions.list", {"userId": USER}))["sessions"][0]
    assert (after["turnCount"], after["firstTs"]) == (22, T0 + 2000)


async def test_a_session_whose_turns_are_all_forgotten_is_not_listed(h: Harness) -> None:
    await _ingest(h, "gone", 2, T0)
    await _ingest(h, "kept", 1, T0)
    await h.call("forget", {"userId": USER, "messageIds": ["gone-0", "gone-1"]})
    out = await h.call("sessions.list", {"userId": USER})
    assert [s["sessionId"] for s in out["sessions"]] == ["kept"]


async def test_a_v1_session_of_the_user_is_listed(h: Harness) -> None:
    turn = {
        "sessionId": "v1s",
        "id": "v1s:t1",
        "text": "remember the blue door",
        "metadata": {"userId": USER, "role": "user", "ts": T0 + 5},
    }
    await h.call("insert_session_turn", turn)
    out = await h.call("sessions.list", {"userId": USER})
    assert [(s["sessionId"], s["turnCount"]) for s in out["sessions"]] == [("v1s", 1)]


@pytest.mark.parametrize(
    ("params", "code", "words"),
    [
        ({}, INVALID_INPUT, "namespace or userId is required"),
        ({"namespace": "  "}, INVALID_INPUT, "namespace or userId is required"),
        ({"userId": USER, "cursor": "not-a-cursor"}, INVALID_INPUT, "sessions.list"),
        ({"userId": USER, "limit": 0}, INVALID_INPUT, "$.limit"),
        ({"userId": USER, "limit": 501}, INVALID_INPUT, "$.limit"),
        ({"userId": USER, "sessionId": "x"}, INVALID_PARAMS, "sessionId"),
        ({"namespace": "a/b"}, INVALID_INPUT, "namespace"),
    ],
)
async def test_bad_params_are_refused_with_a_clear_message(
    h: Harness, params: dict[str, Any], code: int, words: str
) -> None:
    err = await h.call("sessions.list", params, error=True)
    assert err["code"] == code, err
    assert words in err["message"], err
