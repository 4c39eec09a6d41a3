"""The raw turn as the pure memory logic sees it, its order and its derived id."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from sidecar.memory.core.errors import MemoryInputError

ROLES = ("user", "assistant", "system", "tool")
ROLE_STABILITY = {"user": 0.5, "assistant": 0.25}
DEFAULT_STABILITY = 0.2

SortKey = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class Turn:
    """One immutable raw turn.

    ``ts`` is the event time in epoch milliseconds; ``seq`` the ingest position within the
    session (breaks ties between turns with the same ``ts``); ``bundle_id`` an explicit
    ``continuity_bundle_id`` (turns sharing one stay together at the tail boundary).
    ``gating_score`` is the turn's gating ``G`` when known.
    """

    id: str
    role: str
    text: str
    ts: int = 0
    seq: int = 0
    bundle_id: str = ""
    stability: float = 0.0
    gating_score: float | None = None
    user_id: str = ""

    @property
    def sort_key(self) -> SortKey:
        return (self.ts, self.seq, self.id)


def chronological(turns: Iterable[Turn]) -> list[Turn]:
    """Turns sorted by ``(ts, seq, id)``."""
    return sorted(turns, key=lambda t: t.sort_key)


def normalize_role(role: str) -> str:
    """Lowercased, trimmed role; ``ValueError`` unless user / assistant / system / tool."""
    r = role.strip().lower()
    if r not in ROLES:
        raise MemoryInputError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    return r


def stability_weight(role: str) -> float:
    """Host stability weights: user 0.5, assistant 0.25, any other role 0.2."""
    return ROLE_STABILITY.get(role.strip().lower(), DEFAULT_STABILITY)


def derive_turn_id(session_id: str, position: int, role: str, text: str) -> str:
    """A stable id for a message without a client id: session, position and content hash.

    Never wall-clock based; re-sending the same message at the same
    position gives the same id, so the ingest is a no-op.
    """
    h = hashlib.sha256()
    for part in (session_id, str(position), role, text):
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return f"turn:{position:06d}:{h.hexdigest()[:16]}"
