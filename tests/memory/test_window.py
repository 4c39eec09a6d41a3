"""window_start: the newest messages that fit, from a user message on."""

from __future__ import annotations

from sidecar.assembly.window import window_start


def _msgs(n: int, words: int = 40) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        out.append({"role": "user", "content": f"question {i} " + "word " * words})
        out.append({"role": "assistant", "content": [{"type": "toolCall", "name": "f"}]})
        out.append({"role": "toolResult", "content": [{"type": "text", "text": "x " * words}]})
        out.append({"role": "assistant", "content": "answer " * words})
    return out


def test_keeps_everything_that_fits() -> None:
    msgs = _msgs(3)
    assert window_start(msgs, 100_000, 0.25) == 0


def test_starts_at_a_user_message_and_fits() -> None:
    msgs = _msgs(30)
    start = window_start(msgs, 2_000, 0.25)
    assert 0 < start < len(msgs)
    assert msgs[start]["role"] == "user"
    earlier_user = max(i for i in range(start) if msgs[i]["role"] == "user")
    from sidecar.memory.core.tokens import count_message_tokens

    assert count_message_tokens(msgs[start:]) <= 1_500
    assert count_message_tokens(msgs[earlier_user:]) > 1_500  # the longest suffix that fits


def test_an_oversized_last_turn_is_kept_whole() -> None:
    msgs = _msgs(5, words=2_000)
    assert window_start(msgs, 1_000, 0.25) == len(msgs) - 4


def test_no_user_message_keeps_all() -> None:
    msgs = [{"role": "assistant", "content": "hello " * 5_000}]
    assert window_start(msgs, 500, 0.25) == 0
