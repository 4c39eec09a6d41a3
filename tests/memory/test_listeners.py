"""The callback registry behind the memory, write and authored change notices."""

from __future__ import annotations

from sidecar.memory.core.callbacks import Listeners


def test_notify_reaches_every_listener_even_after_one_fails() -> None:
    got: list[tuple[str, int]] = []
    listeners: Listeners[int] = Listeners("test.listener_failed")

    def broken(_: int) -> None:
        raise RuntimeError("listener bug")

    remove_a = listeners.add(lambda v: got.append(("a", v)))
    listeners.add(broken)
    listeners.add(lambda v: got.append(("b", v)))
    listeners.notify(1, reason="x")
    assert got == [("a", 1), ("b", 1)]
    remove_a()
    remove_a()  # removing twice is harmless
    listeners.notify(2)
    assert got == [("a", 1), ("b", 1), ("b", 2)]
