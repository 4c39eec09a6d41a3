"""Each piece of context appears once in what `assemble` returns.

Regression: with `messages` passed, `assemble` returned them unchanged and repeated the
same turns in `<recent_session_tail>`, so a host that sends both sent the conversation
twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import RawConnection, StoreTarget, running_daemon, using_store

TURNS = [
    ("user", "I am planning a trip to Kyoto in April with my sister Ana."),
    ("assistant", "Kyoto in April means cherry blossoms; book the ryokan early."),
    ("user", "Ana is allergic to shellfish, so skip the seafood markets."),
    ("assistant", "Noted: no seafood markets because of the shellfish allergy."),
    ("user", "We also want one day trip to Nara to see the deer park."),
    ("assistant", "Nara is forty minutes from Kyoto by the Kintetsu line."),
    ("user", "Our budget for the ryokan is about two hundred euros a night."),
    ("assistant", "Two hundred euros a night gets a good ryokan near Gion."),
    ("user", "Please remind me to exchange yen before the flight."),
    ("assistant", "I will remind you to exchange yen before you fly."),
]
PROMPT = "Which day trip did we plan, and what must we avoid because of Ana?"


@pytest.fixture(scope="module")
def conn(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[RawConnection]:
    tmp = tmp_path_factory.mktemp("tail-once")
    with (
        using_store(module_store_target),
        running_daemon(tmp, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as connection,
    ):
        messages = [
            {"id": f"m{i}", "role": role, "content": text} for i, (role, text) in enumerate(TURNS)
        ]
        reply = connection.call("ingest", {"sessionId": "s", "userId": "u", "messages": messages})
        assert reply["result"]["ingested"] == len(TURNS)
        yield connection


def _host_messages(with_ids: bool) -> list[dict[str, Any]]:
    return [
        {**({"id": f"m{i}"} if with_ids else {}), "role": role, "content": text}
        for i, (role, text) in enumerate(TURNS)
    ]


def _occurrences(result: dict[str, Any]) -> dict[str, int]:
    whole = json.dumps(result["messages"]) + "\n" + result["systemPromptAddition"]
    return {text: whole.count(text) for _role, text in TURNS}


@pytest.mark.parametrize("with_ids", [True, False])
@pytest.mark.parametrize("placement", [None, "messages", "addition"])
def test_every_turn_appears_exactly_once(
    conn: RawConnection, placement: str | None, with_ids: bool
) -> None:
    params: dict[str, Any] = {
        "sessionId": "s",
        "userId": "u",
        "prompt": PROMPT,
        "tokenBudget": 8000,
        "messages": _host_messages(with_ids),
    }
    if placement is not None:
        params["tailPlacement"] = placement
    result = conn.call("assemble", params)["result"]
    assert _occurrences(result) == {text: 1 for _role, text in TURNS}, result
    addition = result["systemPromptAddition"]
    tail_items = [s for s in result["selected"] if s["kind"] == "turn" and "tail" in s["reason"]]
    if placement == "addition":
        assert "<recent_session_tail>" in addition and tail_items
        assert len(result["messages"]) < len(TURNS)
        assert result["budget"]["tail"] > 0
    else:  # default with messages: the tail stays in the messages
        assert "<recent_session_tail>" not in addition and not tail_items
        assert result["messages"] == _host_messages(with_ids)
        assert result["budget"]["tail"] == 0


def test_without_messages_the_stored_tail_is_in_the_addition(conn: RawConnection) -> None:
    result = conn.call(
        "assemble", {"sessionId": "s", "userId": "u", "prompt": PROMPT, "tokenBudget": 8000}
    )["result"]
    assert "<recent_session_tail>" in result["systemPromptAddition"]
    assert result["messages"] == []
    assert all(n <= 1 for n in _occurrences(result).values())


def test_tail_in_messages_without_messages_is_refused(conn: RawConnection) -> None:
    reply = conn.call(
        "assemble",
        {"sessionId": "s", "prompt": PROMPT, "tokenBudget": 8000, "tailPlacement": "messages"},
    )
    assert reply["error"]["code"] == -32009
