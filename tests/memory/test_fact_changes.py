"""A later turn that says a fact changed supersedes the earlier statement of that fact."""

from __future__ import annotations

import pytest

from sidecar.memory.core.temporal import asks_history
from sidecar.memory.ingest.changes import is_change, kinds_of, superseded
from sidecar.store.types import Hit


def hit(text: str, score: float, **meta: object) -> Hit:
    return Hit("turns:u", text[:10], text, dict(meta), 1, score)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("I live in Lisbon near the river.", {"home"}),
        ("We moved to Porto last month.", {"home"}),
        ("I work at the bank downtown.", {"work"}),
        ("I started a new job at Lumen.", {"work"}),
        ("My wife Eva is a nurse.", {"partner"}),
        ("I'm studying physics at Utrecht.", {"study"}),
        ("I'm vegetarian these days.", {"diet"}),
        ("My sister lives in Berlin.", set()),  # not the user's own home
        ("The weather is nice.", set()),
    ],
)
def test_kinds(text: str, kinds: set[str]) -> None:
    assert kinds_of(text) == kinds


def test_a_change_supersedes_the_same_kind_of_fact() -> None:
    old = [
        hit("My sister lives in Berlin.", 0.6),
        hit("I live in Lisbon near the river.", 0.5),
        hit("I work at the bank downtown.", 0.55),
    ]
    got = superseded("I moved to Porto last month, loving it.", old)
    assert got is not None and got.text == "I live in Lisbon near the river."
    assert superseded("I started a new job at Lumen.", old) == old[2]
    # no change cue: a second statement is not a change
    assert superseded("I live in Lisbon, by the way.", old) is None
    # too far apart, or already superseded
    assert superseded("I moved to Porto.", [hit("I live in Lisbon.", 0.2)]) is None
    assert (
        superseded("I moved to Porto.", [hit("I live in Lisbon.", 0.8, superseded_by="x")]) is None
    )
    assert is_change("We moved to Porto.") and not is_change("Porto is lovely.")


def test_history_questions() -> None:
    assert asks_history("Where did I live before Porto?")
    assert asks_history("What was my old job?")
    assert asks_history("Where did I use to work?")
    assert asks_history("When did Caroline move from Sweden?")  # past tense
    assert not asks_history("Where do I live?")
    assert not asks_history("What is my job now?")
    assert not asks_history("Where does Melanie work?")
