from __future__ import annotations

import pytest

from sidecar.memory.core.turns import (
    Turn,
    chronological,
    derive_turn_id,
    normalize_role,
    stability_weight,
)


def test_order_and_roles() -> None:
    a = Turn("b", "user", "x", ts=5, seq=2)
    b = Turn("a", "assistant", "y", ts=5, seq=1)
    c = Turn("c", "user", "z", ts=1, seq=3)
    assert [t.id for t in chronological([a, b, c])] == ["c", "a", "b"]
    assert normalize_role(" User ") == "user"
    with pytest.raises(ValueError):
        normalize_role("robot")
    assert (stability_weight("user"), stability_weight("assistant"), stability_weight("tool")) == (
        0.5,
        0.25,
        0.2,
    )


def test_derived_ids_are_stable_and_distinct() -> None:
    one = derive_turn_id("s1", 3, "user", "hello")
    assert one == derive_turn_id("s1", 3, "user", "hello")
    assert one != derive_turn_id("s2", 3, "user", "hello")
    assert one != derive_turn_id("s1", 4, "user", "hello")
    assert one != derive_turn_id("s1", 3, "user", "hello!")
    assert one.startswith("turn:000003:")
