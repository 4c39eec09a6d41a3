from __future__ import annotations

import pytest

from sidecar.memory.compaction.autocompact import (
    AutoCompactPolicy,
    CompactionBarrier,
    Pressure,
    TokenAccumulator,
)


def test_soft_then_emergency_edge_triggered() -> None:
    acc = TokenAccumulator(AutoCompactPolicy(session_budget_tokens=100))
    assert acc.add("s", 60) == Pressure.NONE
    assert acc.add("s", 10) == Pressure.SOFT
    assert acc.add("s", 5) == Pressure.NONE  # already reported
    assert acc.add("s", 10) == Pressure.EMERGENCY
    assert acc.add("s", 50) == Pressure.NONE
    assert acc.add("other", 10) == Pressure.NONE
    acc.compacted("s", remaining_tokens=20)
    assert acc.tokens("s") == 20
    assert acc.add("s", 50) == Pressure.SOFT
    acc.forget("s")
    assert acc.tokens("s") == 0


def test_disabled_and_validation() -> None:
    acc = TokenAccumulator(AutoCompactPolicy(session_budget_tokens=10, enabled=False))
    assert acc.add("s", 1000) == Pressure.NONE
    with pytest.raises(ValueError):
        AutoCompactPolicy(session_budget_tokens=0)
    with pytest.raises(ValueError):
        AutoCompactPolicy(soft_fraction=0.9, emergency_fraction=0.8)


def test_barrier() -> None:
    b = CompactionBarrier()
    e0 = b.epoch("s")
    assert b.is_current("s", e0)
    assert b.advance("s") == e0 + 1
    assert not b.is_current("s", e0)
    b.set("s", 10)
    b.set("s", 3)
    assert b.epoch("s") == 10
