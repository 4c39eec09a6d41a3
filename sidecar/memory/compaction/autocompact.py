"""Auto-compaction pressure and the compaction barrier (pure bookkeeping, no I/O).

:class:`TokenAccumulator` counts, per session, the tokens ingested since the last
compaction. Crossing ``soft_fraction`` (default 0.70) of the session budget reports
:attr:`Pressure.SOFT` once; crossing ``emergency_fraction`` (0.85) reports
:attr:`Pressure.EMERGENCY` once. Reports are edge-triggered: a level is reported again
only after :meth:`TokenAccumulator.compacted` lowers the count. A disabled policy never
reports. The integration runs the compaction in the background under a per-session
lock; ingest only calls :meth:`TokenAccumulator.add`, which never blocks.

:class:`CompactionBarrier` holds a per-session compaction epoch. Every compaction that
changes the active view advances it; anything derived from the session (recall caches,
assembled context) records the epoch it was built at and is stale when
:meth:`CompactionBarrier.is_current` says so (compaction-barrier-plan).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_SESSION_BUDGET_TOKENS = 2000
DEFAULT_SOFT_FRACTION = 0.70
DEFAULT_EMERGENCY_FRACTION = 0.85


class Pressure(enum.IntEnum):
    NONE = 0
    SOFT = 1
    EMERGENCY = 2


@dataclass(frozen=True, slots=True)
class AutoCompactPolicy:
    session_budget_tokens: int = DEFAULT_SESSION_BUDGET_TOKENS
    soft_fraction: float = DEFAULT_SOFT_FRACTION
    emergency_fraction: float = DEFAULT_EMERGENCY_FRACTION
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.session_budget_tokens <= 0:
            raise ValueError("session_budget_tokens must be positive")
        if not 0.0 < self.soft_fraction <= self.emergency_fraction <= 1.0:
            raise ValueError("need 0 < soft_fraction <= emergency_fraction <= 1")

    def level(self, tokens: int) -> Pressure:
        if not self.enabled:
            return Pressure.NONE
        if tokens >= self.emergency_fraction * self.session_budget_tokens:
            return Pressure.EMERGENCY
        if tokens >= self.soft_fraction * self.session_budget_tokens:
            return Pressure.SOFT
        return Pressure.NONE


class TokenAccumulator:
    def __init__(self, policy: AutoCompactPolicy | None = None) -> None:
        self.policy = policy or AutoCompactPolicy()
        self._tokens: dict[str, int] = {}
        self._reported: dict[str, Pressure] = {}

    def tokens(self, session_id: str) -> int:
        return self._tokens.get(session_id, 0)

    def add(self, session_id: str, tokens: int) -> Pressure:
        """Count ``tokens``; return a newly reached pressure level, else NONE."""
        total = self._tokens.get(session_id, 0) + max(0, tokens)
        self._tokens[session_id] = total
        level = self.policy.level(total)
        if level > self._reported.get(session_id, Pressure.NONE):
            self._reported[session_id] = level
            return level
        return Pressure.NONE

    def compacted(self, session_id: str, remaining_tokens: int = 0) -> None:
        """After a compaction: the session now holds ``remaining_tokens`` uncompacted."""
        total = max(0, remaining_tokens)
        self._tokens[session_id] = total
        self._reported[session_id] = self.policy.level(total)

    def forget(self, session_id: str) -> None:
        self._tokens.pop(session_id, None)
        self._reported.pop(session_id, None)


class CompactionBarrier:
    def __init__(self) -> None:
        self._epochs: dict[str, int] = {}

    def epoch(self, session_id: str) -> int:
        return self._epochs.get(session_id, 0)

    def advance(self, session_id: str) -> int:
        epoch = self._epochs.get(session_id, 0) + 1
        self._epochs[session_id] = epoch
        return epoch

    def set(self, session_id: str, epoch: int) -> None:
        """Restore a persisted epoch (e.g. the session's compaction generation)."""
        self._epochs[session_id] = max(self._epochs.get(session_id, 0), epoch)

    def is_current(self, session_id: str, epoch: int) -> bool:
        return epoch == self._epochs.get(session_id, 0)

    def forget(self, session_id: str) -> None:
        """Drop an idle session's epoch (compaction restores it from the stored generation)."""
        self._epochs.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._epochs)


class IdleSessions:
    """When each session was last active, so per-session bookkeeping can be dropped once a
    session has been idle for ``idle_s`` (one entry per session ever seen is a slow leak).

    :meth:`sweep` returns the sessions idle longer than that, at most once per
    ``min(idle_s, 60)`` seconds so that calling it on every ingest costs nothing."""

    def __init__(self, idle_s: float, clock: Callable[[], float]) -> None:
        self.idle_s = idle_s
        self._clock = clock
        self._seen: dict[str, float] = {}
        self._next_sweep = clock() + min(idle_s, 60.0)

    def touch(self, session_id: str) -> None:
        self._seen.pop(session_id, None)  # re-insert: the dict stays in activity order
        self._seen[session_id] = self._clock()

    def sweep(self) -> list[str]:
        now = self._clock()
        if self.idle_s <= 0 or now < self._next_sweep:
            return []
        self._next_sweep = now + min(self.idle_s, 60.0)
        idle: list[str] = []
        for sid, seen in self._seen.items():
            if now - seen < self.idle_s:
                break  # the rest were active later
            idle.append(sid)
        for sid in idle:
            del self._seen[sid]
        return idle

    def __len__(self) -> int:
        return len(self._seen)
