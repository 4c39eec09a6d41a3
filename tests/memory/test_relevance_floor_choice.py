"""The relevance floor is the one its labelled set chooses, and that set is separated."""

from __future__ import annotations

from scripts.choose_relevance_floor import DEFAULT_SET, choose, pair_signals
from sidecar.assembly.selection import DEFAULT_ASSEMBLY


def test_configured_floor_is_the_chosen_one() -> None:
    choice = choose(*pair_signals(DEFAULT_SET))
    assert choice.pairs >= 100
    assert choice.accuracy >= 0.9
    assert DEFAULT_ASSEMBLY.relevance_floor == choice.floor
    assert choice.low <= DEFAULT_ASSEMBLY.relevance_floor <= choice.high
