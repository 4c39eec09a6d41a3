"""The one token estimator of the memory core.

Every token count the memory core produces or compares (tail budgets, cluster mass,
strict progress, prior-context budgets, authored ``token_estimate``, tool-output masks,
the ``P`` specificity normaliser of the gating scalar) goes through
:func:`estimate_tokens`. The reference used two units (``floor(runes/4)`` with a minimum
of 1 in compaction, ``ceil(runes/4)`` in the authored parser) and compared a summary's
model-token or word count against the source's rune estimate.

Unit: ``ceil(chars / 4)``, at least 1 for a non-empty string, 0 for ``""``. ``chars`` is
the number of Unicode code points (Python ``len``, the same as Go's rune count).

Why this unit:

* it is deterministic, model-free and O(1) per call, so the daemon can count while
  holding a session lock and without an engine;
* ``ceil`` never estimates a non-empty text below its share of the budget (``floor``
  made every 1-7 character text cost the same), and it equals the reference's authored
  ``token_estimate``, so stored ``token_estimate`` values keep their meaning;
* it agrees with the reference tests (``"abcd"`` = 1, 8 characters = 2, 4 CJK runes = 1).

It is an estimate, not a tokenizer: it undercounts CJK text (about one model token per
character). Budgets are therefore soft in the same way for every caller, which is what
matters for comparisons such as strict progress, where both sides use this function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

CHARS_PER_TOKEN = 4
ELLIPSIS = "…"


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``; 0 for the empty string, at least 1 otherwise."""
    n = len(text)
    if n == 0:
        return 0
    return (n + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def sum_tokens(texts: Iterable[str]) -> int:
    """Sum of :func:`estimate_tokens` over ``texts`` (each text is counted on its own)."""
    return sum(estimate_tokens(t) for t in texts)


def message_text(content: Any) -> str:
    """The text of a message ``content``: a string, or a list of text parts.

    A part is a string, or a mapping with a string ``text`` (``{"type": "text", "text":
    ...}``; parts whose ``type`` is set to something other than ``"text"`` are ignored,
    so image or tool-call parts carry no text). Parts are joined with ``"\\n"``.
    ``None`` gives ``""``. Any other type raises ``TypeError``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                kind = part.get("type", "text")
                text = part.get("text")
                if kind == "text" and isinstance(text, str):
                    parts.append(text)
            else:
                raise TypeError(f"unsupported content part: {type(part).__name__}")
        return "\n".join(parts)
    raise TypeError(f"unsupported message content: {type(content).__name__}")


def count_message_tokens(messages: Iterable[Any], *, per_message_overhead: int = 0) -> int:
    """Sum of the token estimates of the messages' contents.

    A message is a mapping with a ``content`` key, an object with a ``content`` or
    ``text`` attribute, or a plain string. ``per_message_overhead`` is added once per
    message (default 0: the daemon budgets content only).
    """
    total = 0
    for msg in messages:
        if isinstance(msg, str):
            text = msg
        elif isinstance(msg, Mapping):
            text = message_text(msg.get("content"))
        elif hasattr(msg, "content"):
            text = message_text(msg.content)
        elif hasattr(msg, "text"):
            text = message_text(msg.text)
        else:
            raise TypeError(f"unsupported message: {type(msg).__name__}")
        total += estimate_tokens(text) + per_message_overhead
    return total


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` (cut at a word boundary when possible, with ``…``
    appended when anything was cut) whose estimate is at most ``max_tokens``."""
    if max_tokens <= 0:
        return ""
    if estimate_tokens(text) <= max_tokens:
        return text
    limit = max_tokens * CHARS_PER_TOKEN - len(ELLIPSIS)
    if limit <= 0:
        return ELLIPSIS if max_tokens >= 1 else ""
    cut = text[:limit]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
