"""No irrelevant filler: nothing is recalled just because budget is left.

Regressions: for "planning dinner at a seafood place" the assembled memory recalled "The
staging database lives at db-staging.internal"; for "hello" it recalled a bare heading
"Project memory"; after `forget`, a search for "dog" returned "Project memory" at 0.68.
Authored notes rendered as `role="unknown" source="recalled"`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import RawConnection, StoreTarget, running_daemon, using_store

NOTES = "# Project memory\n\nThe staging database lives at db-staging.internal on port 5433.\n"
TURNS = [
    ("m1", "user", "My sister Ana moved to Porto last spring."),
    ("m2", "assistant", "Porto is a lovely city; is she enjoying it?"),
    ("m3", "user", "I am learning the cello with Ms. Varga on Saturdays."),
    ("m4", "assistant", "Saturday lessons are a good rhythm for practice."),
]


@pytest.fixture(scope="module")
def conn(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[RawConnection]:
    tmp = tmp_path_factory.mktemp("floor")
    with (
        using_store(module_store_target),
        running_daemon(tmp, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as connection,
    ):
        ok = connection.call("authored.ingest", {"sourceDoc": "notes.md", "text": NOTES})
        assert ok["result"]["variant"] >= 1, ok
        messages = [{"id": i, "role": r, "content": t} for i, r, t in TURNS]
        reply = connection.call("ingest", {"sessionId": "s1", "userId": "u", "messages": messages})
        assert reply["result"]["ingested"] == len(TURNS)
        yield connection


def _assemble(conn: RawConnection, prompt: str, **extra: Any) -> dict[str, Any]:
    params = {"sessionId": "fresh", "userId": "u", "prompt": prompt, "tokenBudget": 8000}
    reply = conn.call("assemble", {**params, **extra})
    result: dict[str, Any] = reply["result"]
    return result


def test_unrelated_question_does_not_recall_the_unrelated_note(conn: RawConnection) -> None:
    result = _assemble(conn, "planning dinner at a seafood place")
    assert "db-staging" not in result["systemPromptAddition"]
    assert "Project memory" not in result["systemPromptAddition"]
    for item in result["selected"]:  # what is recalled passed the floor (or is its neighbour)
        assert item["collection"] != "authored:variant", item


def test_greeting_recalls_nothing(conn: RawConnection) -> None:
    result = _assemble(conn, "hello")
    assert "Project memory" not in result["systemPromptAddition"]
    assert "<recalled_memories>" not in result["systemPromptAddition"]


def test_related_question_still_recalls_and_names_the_document(conn: RawConnection) -> None:
    result = _assemble(conn, "Which database does staging use?")
    addition = result["systemPromptAddition"]
    assert "db-staging.internal" in addition
    assert "] authored (notes.md): The staging database" in addition
    tagged = _assemble(conn, "Which database does staging use?", render="dated")
    assert '<entry role="authored" source="notes.md">' in tagged["systemPromptAddition"]
    assert 'role="unknown" source="recalled"' not in tagged["systemPromptAddition"]
    sister = _assemble(conn, "Where does my sister live now?")
    assert "Porto" in sister["systemPromptAddition"]


def test_search_after_forget_finds_nothing_irrelevant(conn: RawConnection) -> None:
    assert conn.call("forget", {"userId": "u", "includeSessions": True})["result"]["deleted"] > 0
    hits = conn.call("search", {"query": "dog", "userId": "u"})["result"]["hits"]
    assert hits == []
