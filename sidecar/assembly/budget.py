"""The continuity budget law and the fit functions.

Memory budget ``M = floor(tokenBudget · memoryBudgetFraction)`` (default fraction 0.25).
It is spent in this precedence, each part taking only what is left by the earlier ones:

1. **hard** authored rules, all of them, never truncated;
2. the mandatory **tail base**: the last ``m`` raw turns of the session (m = 4, plus the
   one request turn a boundary would split; :func:`sidecar.memory.compaction.continuity`);
3. the **soft**-rule prefix, within ``min(softFraction·M, M - hard - base)``
   (softFraction 0.3), longest prefix in authored order (position-preserving);
4. the **tail extension**, backward from the base while the tail stays within its
   target (``tail_tokens``, default 128, never below the base) and what is left;
5. **elevated** guidance, within ``min(elevatedFraction·M, left)`` (0.15);
6. **retrieval**, in what is left minus the recovery reserve;
7. **recovery**, in the reserve plus what retrieval left unused.

If hard + base alone exceed ``M`` (or hard exceeds an optional hard reserve
``hardFraction·M``), assembly is **degraded**: only hard + base are injected, the
output may exceed ``M``, and the reason is reported (the only case where it may).

Every part counts tokens in one unit: :func:`sidecar.memory.core.tokens.estimate_tokens` of
the item's text (plus an optional per-item envelope overhead), for hard, tail, soft and
recalled items alike (the reference mixed rendered-wrapper and raw-text costs, B13).

Fits: :func:`fit_greedy` walks a ranked list and **skips** an item that does not fit,
continuing with the next (a stop-at-first-miss prefix wastes budget
whenever one long item ranks early; the ranking order is still preserved among the
chosen items). :func:`fit_prefix` is the position-preserving prefix used for soft rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from protocol.assemble import AssembleBudget
from sidecar.memory.core.errors import MemoryInputError

DEFAULT_MEMORY_FRACTION = 0.25
DEFAULT_SOFT_FRACTION = 0.30
DEFAULT_ELEVATED_FRACTION = 0.15
DEFAULT_RECOVERY_FRACTION = 0.15
DEFAULT_RECOVERY_MIN_TOKENS = 32
DEFAULT_RECOVERY_MAX_TOKENS = 256

REASON_HARD_RESERVE = "hard authored invariants exceed configured hard budget reserve"
REASON_HARD_PLUS_TAIL = (
    "hard authored invariants plus mandatory recent-tail base exceed available memory budget"
)
REASON_RENDERED = (
    "hard authored invariants plus mandatory recent-tail base exceed available memory budget "
    "once rendered with their section headers"
)

Part = Literal["hard", "tail", "soft", "elevated", "retrieval", "recovery"]
PARTS: tuple[Part, ...] = ("hard", "tail", "soft", "elevated", "retrieval", "recovery")

T = TypeVar("T")


class BudgetError(MemoryInputError):
    pass


def memory_budget(token_budget: float, fraction: float = DEFAULT_MEMORY_FRACTION) -> int:
    """``floor(token_budget · fraction)``; rejects NaN, infinities, negatives and a
    fraction outside (0, 1] (the reference compared against NaN and selected
    everything, B13)."""
    if not isinstance(token_budget, int | float) or isinstance(token_budget, bool):
        raise BudgetError("tokenBudget must be a number")
    if not isinstance(fraction, int | float) or isinstance(fraction, bool):
        raise BudgetError("memoryBudgetFraction must be a number")
    if not math.isfinite(token_budget) or token_budget < 0:
        raise BudgetError("tokenBudget must be a finite number >= 0")
    if not math.isfinite(fraction) or not 0.0 < fraction <= 1.0:
        raise BudgetError("memoryBudgetFraction must be in (0, 1]")
    return math.floor(token_budget * fraction + 1e-9)


# --------------------------------------------------------------------------------- fits


@dataclass(frozen=True, slots=True)
class Fit(Generic[T]):
    items: tuple[T, ...]
    used: int
    skipped: tuple[T, ...] = ()


def fit_greedy(items: Iterable[T], budget: int, cost: Callable[[T], int]) -> Fit[T]:
    """Take items in order; skip one that does not fit and go on (first-fit packing in
    ranking order)."""
    chosen: list[T] = []
    skipped: list[T] = []
    used = 0
    for item in items:
        c = max(0, int(cost(item)))
        if used + c <= budget:
            chosen.append(item)
            used += c
        else:
            skipped.append(item)
    return Fit(tuple(chosen), used, tuple(skipped))


def fit_prefix(items: Iterable[T], budget: int, cost: Callable[[T], int]) -> Fit[T]:
    """The longest prefix whose total fits (position-preserving; soft rules)."""
    chosen: list[T] = []
    used = 0
    rest: list[T] = []
    stopped = False
    for item in items:
        if stopped:
            rest.append(item)
            continue
        c = max(0, int(cost(item)))
        if used + c <= budget:
            chosen.append(item)
            used += c
        else:
            stopped = True
            rest.append(item)
    return Fit(tuple(chosen), used, tuple(rest))


# ------------------------------------------------------------------------------- ledger


# Tokens used per part (``total`` is ``M``, ``used`` their sum): the type ``assemble``
# answers, so the plan's figures reach the wire as they are.
BudgetPartition = AssembleBudget


class BudgetLedger:
    """Running account of the memory budget in precedence order."""

    def __init__(self, total: int) -> None:
        if total < 0:
            raise BudgetError("the memory budget must be >= 0")
        self.total = int(total)
        self._used: dict[Part, int] = dict.fromkeys(PARTS, 0)
        self.degraded: list[str] = []

    @property
    def used(self) -> int:
        return sum(self._used.values())

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.used)

    def spent(self, part: Part) -> int:
        return self._used[part]

    def charge(self, part: Part, tokens: int, *, force: bool = False) -> None:
        """Record ``tokens`` for ``part``; beyond the remaining budget only with
        ``force`` (hard rules and the tail base)."""
        if tokens < 0:
            raise BudgetError("negative charge")
        if not force and tokens > self.remaining:
            raise BudgetError(f"{part}: {tokens} tokens exceed the remaining {self.remaining}")
        self._used[part] += tokens

    def refund(self, part: Part, tokens: int) -> None:
        """Give back what a dropped item was charged (never below nothing)."""
        self._used[part] = max(0, self._used[part] - tokens)

    def partition(self) -> BudgetPartition:
        u = self._used
        return BudgetPartition(
            total=self.total,
            hard=u["hard"],
            tail=u["tail"],
            soft=u["soft"],
            elevated=u["elevated"],
            retrieval=u["retrieval"],
            recovery=u["recovery"],
            used=self.used,
        )


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    soft_fraction: float = DEFAULT_SOFT_FRACTION
    hard_fraction: float | None = None  # optional hard reserve (authoredHardBudgetFraction)
    elevated_fraction: float = DEFAULT_ELEVATED_FRACTION
    tail_tokens: int = 128  # the tail target tau_tail
    min_turns: int = 4  # m
    recovery_fraction: float = DEFAULT_RECOVERY_FRACTION
    recovery_min_tokens: int = DEFAULT_RECOVERY_MIN_TOKENS
    recovery_max_tokens: int = DEFAULT_RECOVERY_MAX_TOKENS
    entry_overhead_tokens: int = 0  # per injected item (rendering envelope), 0 = content only


def degraded_reasons(total: int, hard: int, base: int, cfg: BudgetConfig) -> list[str]:
    """Why hard + base cannot be honoured inside ``total`` (empty when they can)."""
    reasons: list[str] = []
    reserve = cfg.hard_fraction
    if reserve is not None and reserve > 0 and hard > total * min(reserve, 1.0) + 1e-9:
        reasons.append(REASON_HARD_RESERVE)
    if hard + base > total:
        reasons.append(REASON_HARD_PLUS_TAIL)
    return reasons


def soft_budget(total: int, hard: int, base: int, cfg: BudgetConfig) -> int:
    """``tau_I2^eff = min(alpha2·M, M - hard - base)``, at least 0."""
    return max(0, min(math.floor(cfg.soft_fraction * total), total - hard - base))


def tail_allowance(remaining: int, base: int, cfg: BudgetConfig) -> int:
    """Total tail tokens allowed (base included): ``min(max(tau_tail, base), base + left)``."""
    return min(max(cfg.tail_tokens, base), base + max(0, remaining))


def elevated_budget(total: int, remaining: int, cfg: BudgetConfig) -> int:
    return max(0, min(math.floor(cfg.elevated_fraction * total), remaining))


def recovery_reserve(remaining: int, cfg: BudgetConfig) -> int:
    """The part of what is left kept for recovery when it is triggered."""
    want = max(cfg.recovery_min_tokens, math.ceil(cfg.recovery_fraction * remaining))
    return max(0, min(remaining, want, cfg.recovery_max_tokens))


def check_partition(p: BudgetPartition, degraded: Sequence[str]) -> None:
    """Raise unless ``used <= total`` or the plan is degraded."""
    if p.used > p.total and not degraded:
        raise BudgetError(f"memory budget exceeded: {p.used} > {p.total}")
