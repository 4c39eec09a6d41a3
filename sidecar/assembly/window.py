"""Which of a host's messages an owning host keeps in the prompt (``assemble``'s
``windowMessages``).

A host that lets the engine own compaction (OpenClaw ``ownsCompaction``) sends its whole
transcript every turn; the daemon then decides how much of it stays. The newest messages
that fit what the memory budget leaves of the token budget stay, starting at a user
message so that a tool call is never cut from its result and the window opens with the
user's turn. Everything older is in the store (raw history, summaries, durable memory),
where retrieval can bring back what the turn needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.assembly.budget import memory_budget
from sidecar.memory.core.tokens import count_message_tokens


def window_start(
    messages: Sequence[Mapping[str, Any]], token_budget: float, memory_fraction: float
) -> int:
    """Index of the first message kept: the earliest user message from which the rest fits
    ``token_budget - memory_budget``; the last user message when even that turn does not
    fit (a turn is never split); 0 when there is no user message."""
    allowance = max(0, int(token_budget) - memory_budget(token_budget, memory_fraction))
    user_at = [i for i, m in enumerate(messages) if str(m.get("role", "")).lower() == "user"]
    if not user_at:
        return 0
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + count_message_tokens([messages[i]])
    for i in user_at:
        if suffix[i] <= allowance:
            return i
    return user_at[-1]
