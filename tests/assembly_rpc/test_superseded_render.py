"""A corrected fact never shows its old text as if it were current (issue 34, item 9).

Regression: after the README's own example (ingest "I moved to Lisbon in May.", then
``memory update`` it to "I moved to Porto in May."), "Where do I live?" recalled both
statements under the same day with nothing saying which one is current. The old one is
now marked ``(corrected on DAY)``; a statement a later turn says has changed is marked
``(earlier; since changed)``; a history question still sees the old one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import RawConnection, StoreTarget, running_daemon, using_store

# Another session of the same user: with the corrected fact alone in the store the pool's
# min-max normalisation leaves the old version at relevance 0, and nothing else is
# recalled; a user's daemon holds more than one memory.
EARLIER = [
    ("e1", "user", "I work as a nurse at the children's hospital."),
    ("e2", "assistant", "That sounds demanding."),
    ("e3", "user", "My sister Ana has a dog called Rex."),
]
# compact: "user: TEXT (corrected on DAY)"; tagged: "<entry ...>TEXT</entry> (corrected ...)"
CORRECTED = re.compile(
    r"I moved to Lisbon in May\.(?:</entry>)? \(corrected on (\d{4}-\d{2}-\d{2})\)"
)


@pytest.fixture(scope="module")
def conn(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[RawConnection]:
    tmp = tmp_path_factory.mktemp("superseded")
    with (
        using_store(module_store_target),
        running_daemon(tmp, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint, timeout=60) as connection,
    ):
        earlier = [{"id": i, "role": r, "content": t} for i, r, t in EARLIER]
        _ok(connection.call("ingest", {"sessionId": "s0", "userId": "me", "messages": earlier}))
        # the README's example, verbatim
        lisbon = {"id": "m1", "role": "user", "content": "I moved to Lisbon in May."}
        _ok(connection.call("ingest", {"sessionId": "s1", "userId": "me", "messages": [lisbon]}))
        update = {"userId": "me", "collection": "turns:me", "id": "s1:m1"}
        _ok(connection.call("memory.update", {**update, "text": "I moved to Porto in May."}))
        yield connection


def _ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def _addition(conn: RawConnection, prompt: str, session: str = "s2", **extra: Any) -> str:
    params = {"sessionId": session, "userId": "me", "prompt": prompt, "tokenBudget": 4000}
    text: str = _ok(conn.call("assemble", {**params, **extra}))["systemPromptAddition"]
    return text


def _lines_with(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


def test_the_corrected_statement_is_marked_as_earlier(conn: RawConnection) -> None:
    today = time.strftime("%Y-%m-%d", time.gmtime())
    for style in ("compact", "dated", "reference"):
        addition = _addition(conn, "Where do I live?", render=style)
        assert _lines_with(addition, "Porto in May."), addition  # the current fact
        for line in _lines_with(addition, "Porto"):
            assert "corrected" not in line and "changed" not in line, line
        lisbon = _lines_with(addition, "Lisbon")
        assert lisbon, addition  # recalled (before: as if it were current)
        for line in lisbon:
            found = CORRECTED.search(line)
            assert found and found.group(1) == today, line


def test_a_history_question_still_sees_the_old_statement(conn: RawConnection) -> None:
    addition = _addition(conn, "Where did I live before?")
    assert [line for line in _lines_with(addition, "Lisbon") if CORRECTED.search(line)]
    assert _lines_with(addition, "Porto in May.")


def test_the_session_tail_marks_it_too(conn: RawConnection) -> None:
    """The session that said it: its exact tail keeps the words, and says they were
    corrected, next to the recalled correction."""
    addition = _addition(conn, "Where do I live?", session="s1")
    tail = addition.split("</recent_session_tail>")[0]
    assert [line for line in _lines_with(tail, "Lisbon") if CORRECTED.search(line)], addition


def test_a_statement_said_to_have_changed_is_marked_earlier(conn: RawConnection) -> None:
    said = [
        ("c1", "user", "I live in a flat in Leeds."),
        ("c2", "user", "I moved to York in March."),
    ]
    for mid, role, text in said:
        message = {"id": mid, "role": role, "content": text}
        _ok(conn.call("ingest", {"sessionId": "s3", "userId": "me", "messages": [message]}))
    addition = _addition(conn, "Where was my flat?", session="s4")
    leeds = _lines_with(addition, "Leeds")
    assert leeds and all(line.endswith("(earlier; since changed)") for line in leeds), addition
    for line in _lines_with(addition, "York"):
        assert "earlier" not in line, line
