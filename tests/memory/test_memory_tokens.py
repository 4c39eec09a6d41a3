from __future__ import annotations

import pytest

from sidecar.memory.core.tokens import (
    count_message_tokens,
    estimate_tokens,
    message_text,
    sum_tokens,
    truncate_to_tokens,
)


def test_reference_estimator_cases() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2  # ceil, not floor
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("東京大学") == 1  # code points, like Go runes


def test_sum_and_messages() -> None:
    assert sum_tokens(["abcd", "abcde", ""]) == 3
    msgs = [
        {"role": "user", "content": "abcdefgh"},
        {"role": "assistant", "content": [{"type": "text", "text": "abcd"}, "efgh"]},
        {"role": "tool", "content": [{"type": "image", "url": "x"}]},
        "plain",
    ]
    assert count_message_tokens(msgs) == 2 + estimate_tokens("abcd\nefgh") + 0 + 2
    assert count_message_tokens(msgs, per_message_overhead=3) == count_message_tokens(msgs) + 12


def test_message_text() -> None:
    assert message_text(None) == ""
    assert message_text([{"text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    with pytest.raises(TypeError):
        message_text(42)
    with pytest.raises(TypeError):
        message_text([object()])


@pytest.mark.parametrize("limit", [0, 1, 2, 5, 10, 100])
def test_truncate_respects_limit(limit: int) -> None:
    text = "word " * 60
    out = truncate_to_tokens(text, limit)
    assert estimate_tokens(out) <= limit
    if limit >= 100:
        assert out == text
    elif limit > 1:
        assert out.endswith("…")
        assert text.startswith(out[:-1].rstrip())
