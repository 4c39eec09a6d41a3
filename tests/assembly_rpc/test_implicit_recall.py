"""Implicit recall through the daemon (issue 33): a request recalls the statement it
bears on though they share no word, a greeting recalls nothing, identical entries are
injected once, and ``explain`` says why a statement was left out.

The history is a few dozen sessions of everyday chat (more than the 64 turns the
densities need before implicit recall answers: ``density.TRUSTED_ROWS``), one of them the
statement that matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import RawConnection, StoreTarget, running_daemon, using_store

# A history shaped like a real one: a user who talks about the same few things again and
# again (so every line has near neighbours, as in the LoCoMo transcripts the densities were
# measured on), plus a few everyday requests.
ACTIVITIES = [
    "went to the park",
    "had dinner at that little place downtown",
    "watched a film at the cinema",
    "went for a long walk by the lake",
    "played board games all evening",
    "tried the new coffee shop",
    "went to a pottery class",
    "visited the art museum",
]
PEOPLE = ["my sister", "Sam", "the kids", "my friend Jo", "my neighbour"]
WHEN = ["yesterday", "last weekend", "on Friday", "this morning"]
LINES = [
    f"I {what} with {who} {when}, it was really nice."
    for k, (what, who, when) in enumerate(
        (a, p, w) for a in ACTIVITIES for p in PEOPLE for w in WHEN
    )
    if k % 6 == 0
] + [
    "Did you catch the match last night? What a finish.",
    "Can you remind me what the capital of Canada is?",
    "Thanks, that was really helpful.",
    "My commute took forever today, the trains were a mess.",
    "What's a good podcast about ancient history?",
    "Haha, fair enough.",
    "I finished the book you suggested, loved the ending.",
    "Summarise the news about the election for me.",
    "Ok, sounds good to me.",
    "How do I parse a date string in Python?",
    "The phone update drained my battery overnight.",
    "What's the weather like in Madrid this week?",
    "Write a birthday card message for my colleague Sam.",
    "Lol, that's a good one.",
    "Is it worth learning Rust this year?",
    "Draft an email to the landlord about the broken heating.",
    "We watched a documentary about octopuses, so clever.",
    "How many ounces are in a pound again?",
    "Cool, thanks!",
    "Which colour would suit a narrow hallway?",
    "Give me a quick stretching routine for my back.",
    "What time does the sun set this evening?",
    "My sister just got engaged, so exciting.",
    "Recommend a board game for four players.",
    "Explain how compound interest works, simply.",
    "The neighbours are doing building work again.",
    "Translate 'see you soon' into Italian.",
    "Can you suggest a name for a goldfish?",
    "I keep forgetting to water the basil on the windowsill.",
    "What's the difference between a latte and a flat white?",
    "Help me write a polite complaint about a late parcel.",
    "That's brilliant, cheers.",
    "How long should I boil an egg for a runny yolk?",
    "Tell me something interesting about Saturn.",
    "My laptop fan has been really loud lately.",
    "Which is bigger, a hectare or an acre?",
    "Pick a playlist for a rainy afternoon.",
    "I think I'll repaint the bathroom next month.",
    "How do I get wax out of a tablecloth?",
    "Summarise the plot of Hamlet in three lines.",
]
CUE = "I'm vegetarian, no meat or fish for me."
TRIGGER = "Plan a barbecue menu for Saturday."
HOME = "We live in Lisbon now, near the river."
WEATHER = [
    "What about the weather tomorrow?",
    "what about the weather tomorrow",
    "What about the weather tomorrow??",
]


@pytest.fixture(scope="module")
def conn(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[RawConnection]:
    tmp = tmp_path_factory.mktemp("implicit")
    with (
        using_store(module_store_target),
        running_daemon(tmp, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint, timeout=120) as connection,
    ):
        ts = 1_700_000_000_000
        sessions = [
            [(LINES[(n * 3 + k) % len(LINES)], "Sure.") for k in range(3)] for n in range(25)
        ]
        sessions.insert(9, [(CUE, "Got it, meat-free it is.")])
        sessions.insert(15, [(HOME, "Lovely part of town.")])
        for n, turns in enumerate(sessions):
            messages: list[dict[str, Any]] = []
            for k, (user, reply) in enumerate(turns):
                ts += 60_000
                messages.append({"id": f"u{k}", "role": "user", "content": user, "ts": ts})
                messages.append({"id": f"a{k}", "role": "assistant", "content": reply, "ts": ts})
            reply = connection.call(
                "ingest", {"sessionId": f"s{n}", "userId": "u", "messages": messages}
            )
            assert "result" in reply, reply
            ts += 86_400_000
        weather = [
            {"id": f"w{i}", "role": "user", "content": WEATHER[i % 3], "ts": ts + i * 60_000}
            for i in range(16)
        ]
        connection.call("ingest", {"sessionId": "sw", "userId": "u", "messages": weather})
        yield connection


def _assemble(conn: RawConnection, prompt: str, **extra: Any) -> dict[str, Any]:
    params = {"sessionId": "fresh", "userId": "u", "prompt": prompt, "tokenBudget": 4000}
    reply = conn.call("assemble", {**params, **extra})
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def test_a_request_ranks_the_statement_it_bears_on_first(conn: RawConnection) -> None:
    """The cue shares no word with the request and its plain cosine (0.31) ties with a
    playlist request's; implicit recall ranks it first of everything the user said. (How
    often that is enough to recall it, in histories the size of a real one, is what
    ``make eval`` measures: too small a history here for a fixed outcome.)"""
    result = _assemble(conn, TRIGGER, explain=True)
    picked = [i for i in result["selected"] if i["reason"].startswith("implicit:")]
    ranked = picked + [c for c in result["considered"] if c["why"].startswith("implicit:")]
    assert ranked, result["considered"]
    best = ranked[0]
    assert best["id"] == "s9:u0", [(c["id"], c["reason"]) for c in ranked[:5]]


def test_a_greeting_recalls_nothing(conn: RawConnection) -> None:
    for prompt in ("hello", "Good morning!"):
        result = _assemble(conn, prompt)
        assert result["selected"] == [], [i["reason"] for i in result["selected"]]
        assert result["budget"]["used"] == 0


def test_identical_entries_are_injected_once_with_a_count(conn: RawConnection) -> None:
    result = _assemble(conn, "Is it going to rain tomorrow, what about the weather?")
    weather = [i for i in result["selected"] if i["sessionId"].endswith("sw")]
    assert len(weather) <= 1
    if weather:  # the newest of the sixteen, with the count
        assert weather[0]["turnIds"] == ["w15"]
        assert "(said 16 times)" in result["systemPromptAddition"]


def test_explain_says_why_a_statement_was_left_out(conn: RawConnection) -> None:
    result = _assemble(conn, "hi there", explain=True)
    whys = [c["why"] for c in result.get("considered", [])]
    assert any(w.startswith("implicit: nothing stands out") for w in whys), whys
