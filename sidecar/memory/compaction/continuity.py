"""Continuity policy: recent tail, compaction clusters, strict progress, the escalation
ladder, prior-summary context and guidance-shard protection. Everything is pure; models
are injected as callables.

Recent tail (:func:`select_recent_tail`), for turns in chronological order:

1. ``base`` = the last ``min_turns`` turns (m, default 4). If they cost more than
   ``tail_tokens`` (default 128) they are the tail: m wins over the budget.
2. Otherwise the tail grows backward while the total stays within ``tail_tokens``.
3. Bundle safety: if the boundary splits a coupled unit, it moves back to keep the unit
   whole in the tail. Units are (a) turns sharing a non-empty ``bundle_id``, (b) tool
   results and the assistant turn that called the tool, and (c) **the one**
   request/response pair the boundary splits (a user turn just before the boundary and
   the assistant turn just after it). (c) is applied at most once, so it cannot chain.
   The reference coupled every adjacent user/assistant pair in both directions, so in an
   alternating chat the boundary walked back to turn 0 and nothing was ever compacted.

``min_turns <= 0`` gives a token-only tail (no mandatory suffix); it does **not** disable
tail protection as in the reference; the RPC layer should default it to 4.

Strict progress: a summary is accepted only if
``estimate_tokens(summary) < Σ estimate_tokens(text)`` over the texts it replaces (the
compressible turns only, not the protected ones, and the raw stored texts), in the one
unit of :mod:`sidecar.memory.core.tokens`. Clusters with fewer than two replaced items are
declined (singletons make no meaningful progress).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from sidecar.memory.authored.deontic import DeonticResult, evaluate_text
from sidecar.memory.compaction.sanitize import is_tool_role, sanitize_for_summary
from sidecar.memory.core.tokens import estimate_tokens, sum_tokens, truncate_to_tokens
from sidecar.memory.core.turns import Turn

DEFAULT_MIN_TURNS = 4
DEFAULT_TAIL_TOKENS = 128
DEFAULT_PRIOR_CONTEXT_TOKENS = 96
DEFAULT_TARGET_SIZE = 20
DEFAULT_MAX_OUTPUT_TOKENS = 64
AGGRESSIVE_MIN_OUTPUT_TOKENS = 16
FALLBACK_MAX_OUTPUT_TOKENS = 16
DEFAULT_DENSITY = 0.4
AGGRESSIVE_DENSITY = 0.25
ABSTRACTIVE_ROUTING_THRESHOLD = 0.60
GUIDANCE_MIN_STABILITY = 0.35
GUIDANCE_BOOSTER_FLOOR = 0.78
PRIOR_CONTEXT_HEADER = "Prior compacted context:\n"
PRIOR_CONTEXT_ID = "__continuity_prior__"

CouplingKind = Literal["bundle", "tool", "request_response"]


# --------------------------------------------------------------------------------- tail


@dataclass(frozen=True, slots=True)
class TailSplit:
    """``older`` + ``recent`` is the input; ``base`` is the mandatory suffix."""

    older: tuple[Turn, ...]
    recent: tuple[Turn, ...]
    base: tuple[Turn, ...]
    start: int
    base_tokens: int
    recent_tokens: int
    couplings: tuple[CouplingKind, ...] = ()


def _turn_cost(turn: Turn) -> int:
    return estimate_tokens(turn.text)


def coupling(left: Turn, right: Turn, *, allow_pair: bool = True) -> CouplingKind | None:
    """Why ``left`` and ``right`` (adjacent, in order) must not be separated, if at all."""
    if left.bundle_id and left.bundle_id == right.bundle_id:
        return "bundle"
    if is_tool_role(right.role) and (left.role == "assistant" or is_tool_role(left.role)):
        return "tool"
    if allow_pair and left.role == "user" and right.role == "assistant":
        return "request_response"
    return None


def bundle_safe_start(turns: Sequence[Turn], start: int) -> tuple[int, tuple[CouplingKind, ...]]:
    """Move a tail start back so that it splits no coupled unit (module doc)."""
    kinds: list[CouplingKind] = []
    pair_used = False
    while 0 < start < len(turns):
        kind = coupling(turns[start - 1], turns[start], allow_pair=not pair_used)
        if kind is None:
            break
        if kind == "request_response":
            pair_used = True
        kinds.append(kind)
        start -= 1
    return start, tuple(kinds)


def select_recent_tail(
    turns: Sequence[Turn],
    *,
    min_turns: int = DEFAULT_MIN_TURNS,
    tail_tokens: int = DEFAULT_TAIL_TOKENS,
    cost: Callable[[Turn], int] = _turn_cost,
) -> TailSplit:
    """Split chronological ``turns`` into compactable ``older`` and protected ``recent``."""
    n = len(turns)
    m = max(0, min(min_turns, n))
    budget = max(0, tail_tokens)
    base_start = n - m
    costs = [cost(t) for t in turns]
    base_tokens = sum(costs[base_start:])
    start = base_start
    used = base_tokens
    if base_tokens <= budget:
        while start > 0 and used + costs[start - 1] <= budget:
            start -= 1
            used += costs[start]
    start, kinds = bundle_safe_start(turns, start)
    return TailSplit(
        older=tuple(turns[:start]),
        recent=tuple(turns[start:]),
        base=tuple(turns[base_start:]),
        start=start,
        base_tokens=base_tokens,
        recent_tokens=sum(costs[start:]),
        couplings=kinds,
    )


# ----------------------------------------------------------------------------- clusters


def partition(n: int, target_size: int = DEFAULT_TARGET_SIZE) -> list[range]:
    """Contiguous near-equal buckets: ``c = ceil(n / k)``, item ``i`` → ``floor(i*c/n)``.

    ``target_size <= 0`` means the default 20. ``partition(5, 2)`` → sizes [2, 2, 1].
    """
    if n <= 0:
        return []
    k = target_size if target_size > 0 else DEFAULT_TARGET_SIZE
    c = -(-n // k)
    bounds: list[int] = []
    for i in range(n):
        idx = (i * c) // n
        if idx == len(bounds):
            bounds.append(i)
    bounds.append(n)
    return [range(bounds[j], bounds[j + 1]) for j in range(len(bounds) - 1)]


def cluster_turns(
    turns: Sequence[Turn], target_size: int = DEFAULT_TARGET_SIZE
) -> list[tuple[Turn, ...]]:
    """Chronological clusters of ``turns`` (already in order) by :func:`partition`."""
    return [tuple(turns[r.start : r.stop]) for r in partition(len(turns), target_size)]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    tail: TailSplit
    clusters: tuple[tuple[Turn, ...], ...]  # two or more turns each: to summarize
    singletons: tuple[Turn, ...]  # declined: a lone uncovered turn makes no progress

    @property
    def clusters_formed(self) -> int:
        return len(self.clusters) + len(self.singletons)


def plan_compaction(
    turns: Sequence[Turn],
    covered: Container[str] = frozenset(),
    *,
    min_turns: int = DEFAULT_MIN_TURNS,
    tail_tokens: int = DEFAULT_TAIL_TOKENS,
    target_size: int = DEFAULT_TARGET_SIZE,
) -> CompactionPlan:
    """Clusters of the compactable prefix that no summary covers yet (incremental).

    ``turns``: the session's raw turns in chronological order. ``covered``: ids of turns
    already covered by a summary. Each maximal run of consecutive uncovered turns before
    the tail is partitioned on its own, so a summary always covers consecutive turns
    and repeated compaction never re-summarizes a covered turn.
    """
    tail = select_recent_tail(turns, min_turns=min_turns, tail_tokens=tail_tokens)
    runs: list[list[Turn]] = [[]]
    for t in tail.older:
        if t.id in covered:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(t)
    clusters: list[tuple[Turn, ...]] = []
    singletons: list[Turn] = []
    for run in runs:
        for cluster in cluster_turns(run, target_size):
            if len(cluster) >= 2:
                clusters.append(cluster)
            else:
                singletons.extend(cluster)
    return CompactionPlan(tail, tuple(clusters), tuple(singletons))


# ----------------------------------------------------------------------- strict progress


@dataclass(frozen=True, slots=True)
class ProgressCheck:
    source_tokens: int
    summary_tokens: int

    @property
    def ok(self) -> bool:
        return self.summary_tokens < self.source_tokens

    @property
    def delta(self) -> int:
        return self.source_tokens - self.summary_tokens


def check_progress(replaced_texts: Iterable[str], summary_text: str) -> ProgressCheck:
    """Token mass of the replaced texts against the summary, in one unit."""
    return ProgressCheck(sum_tokens(replaced_texts), estimate_tokens(summary_text))


def strict_progress(replaced_texts: Iterable[str], summary_text: str) -> bool:
    return check_progress(replaced_texts, summary_text).ok


# ---------------------------------------------------------------------- escalation ladder


class SummarizerRole(enum.StrEnum):
    PRIMARY = "primary"
    EXTRACTIVE = "extractive"


class Route(enum.StrEnum):
    """Which summarizer is the primary for a cluster."""

    ABSTRACTIVE = "abstractive"
    EXTRACTIVE = "extractive"


@dataclass(frozen=True, slots=True)
class LadderStep:
    """One attempt of the escalation ladder.

    ``bounded`` steps are hard-truncated to ``max_output_tokens`` (and to one token less
    than the source), so they always make progress on a cluster of two or more tokens.
    ``uses_prior_context`` is true only where an abstractive summarizer reads the prior
    context; lineage records support ids only for such steps.
    """

    name: str
    summarizer: SummarizerRole
    max_output_tokens: int
    target_density: float
    min_input_turns: int = 1
    bounded: bool = False
    uses_prior_context: bool = False

    def output_limit(self, source_tokens: int) -> int:
        if self.bounded:
            return max(0, min(self.max_output_tokens, source_tokens - 1))
        return self.max_output_tokens


def escalation_ladder(
    *, primary_is_abstractive: bool, max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
) -> tuple[LadderStep, ...]:
    """normal → aggressive → deterministic bounded fallback.

    The fallback is the extractive summarizer with its output truncated; unlike the
    reference it also exists when the primary is extractive (whose output length is
    otherwise unbounded), so a cluster is declined only when even it cannot shrink.
    """
    primary = max(1, max_output_tokens)
    return (
        LadderStep(
            "primary",
            SummarizerRole.PRIMARY,
            primary,
            DEFAULT_DENSITY,
            uses_prior_context=primary_is_abstractive,
        ),
        LadderStep(
            "aggressive",
            SummarizerRole.PRIMARY,
            max(primary // 2, AGGRESSIVE_MIN_OUTPUT_TOKENS),
            AGGRESSIVE_DENSITY,
            uses_prior_context=primary_is_abstractive,
        ),
        LadderStep(
            "deterministic-fallback",
            SummarizerRole.EXTRACTIVE,
            FALLBACK_MAX_OUTPUT_TOKENS,
            AGGRESSIVE_DENSITY,
            bounded=True,
        ),
    )


@dataclass(frozen=True, slots=True)
class Draft:
    """A summarizer's output for one attempt."""

    text: str
    confidence: float
    method: str


class StepSummarizer(Protocol):
    """Summarize ``texts`` (the sanitized views) for ``step``; ``prior`` is the prior
    context prompt (empty when the step does not use it)."""

    def __call__(self, texts: Sequence[str], step: LadderStep, prior: str) -> Draft: ...


@dataclass(frozen=True, slots=True)
class Attempt:
    step: str
    summary_tokens: int
    accepted: bool
    error: str = ""


@dataclass(frozen=True, slots=True)
class LadderOutcome:
    draft: Draft | None
    step: LadderStep | None
    source_tokens: int
    attempts: tuple[Attempt, ...] = field(default_factory=tuple)

    @property
    def accepted(self) -> bool:
        return self.draft is not None


def run_ladder(
    replaced_texts: Sequence[str],
    view_texts: Sequence[str],
    *,
    primary: StepSummarizer,
    extractive: StepSummarizer,
    ladder: Sequence[LadderStep],
    prior: str = "",
) -> LadderOutcome:
    """Try each step until one makes strict progress over ``replaced_texts``.

    An exception from the *primary* summarizer (a failing seq2seq model) is recorded, and
    that step and every later primary step run with the extractive summarizer instead (at
    the step's own density and length), so a model failure costs the normal extractive
    summary, not a jump to the truncated fallback. Exceptions from the
    extractive summarizer propagate.
    """
    source_tokens = sum_tokens(replaced_texts)
    attempts: list[Attempt] = []
    primary_failed = False
    for step in ladder:
        use_primary = step.summarizer == SummarizerRole.PRIMARY and not primary_failed
        try:
            if use_primary:
                draft = primary(view_texts, step, prior if step.uses_prior_context else "")
            else:
                draft = extractive(view_texts, step, "")
        except Exception as exc:
            if not use_primary:
                raise
            primary_failed = True
            attempts.append(Attempt(step.name, 0, False, f"{type(exc).__name__}: {exc}"))
            draft = extractive(view_texts, step, "")
        text = draft.text.strip()
        if step.bounded:
            text = truncate_to_tokens(text, step.output_limit(source_tokens))
        tokens = estimate_tokens(text)
        ok = bool(text) and tokens < source_tokens
        attempts.append(Attempt(step.name, tokens, ok))
        if ok:
            return LadderOutcome(
                Draft(text, draft.confidence, draft.method), step, source_tokens, tuple(attempts)
            )
    return LadderOutcome(None, None, source_tokens, tuple(attempts))


def route_summarizer(
    gating_scores: Iterable[float | None],
    *,
    abstractive_available: bool,
    threshold: float = ABSTRACTIVE_ROUTING_THRESHOLD,
) -> tuple[Route, float]:
    """``(ABSTRACTIVE, mean)`` when a seq2seq summarizer is available and the mean known
    gating score of the cluster reaches ``threshold``, else ``(EXTRACTIVE, mean)``.

    Turns without a score are left out of the mean (the reference counted them as 0 and,
    since host-written session turns never had one, never routed to T5).
    """
    known = [min(max(float(s), 0.0), 1.0) for s in gating_scores if s is not None]
    mean = sum(known) / len(known) if known else 0.0
    if abstractive_available and known and mean >= threshold:
        return Route.ABSTRACTIVE, mean
    return Route.EXTRACTIVE, mean


# -------------------------------------------------------------------------- prior context


@dataclass(frozen=True, slots=True)
class PriorSummary:
    id: str
    text: str
    ts_max: int  # latest event time the summary covers


@dataclass(frozen=True, slots=True)
class PriorContext:
    ids: tuple[str, ...]
    tokens: int
    text: str  # the selected sanitized texts, chronological, joined by a blank line

    @property
    def prompt(self) -> str:
        return PRIOR_CONTEXT_HEADER + self.text if self.text else ""


def select_prior_context(
    summaries: Iterable[PriorSummary],
    before_ts: int,
    budget_tokens: int = DEFAULT_PRIOR_CONTEXT_TOKENS,
) -> PriorContext:
    """Bounded delta-conditioning context for a cluster starting at ``before_ts``.

    Candidates are summaries (the caller passes the active ones) whose covered turns all
    precede the cluster (``ts_max < before_ts``; the reference compared the summary's
    creation time, which is later than the turns it covers). Walking from newest to
    oldest, each candidate's sanitized text is taken if it fits the remaining budget and
    skipped otherwise (the walk continues). The selection is returned in chronological
    order; its token count never exceeds ``budget_tokens``.
    """
    if budget_tokens <= 0:
        return PriorContext((), 0, "")
    candidates = sorted(
        (s for s in summaries if s.ts_max < before_ts), key=lambda s: (s.ts_max, s.id)
    )
    chosen: list[tuple[PriorSummary, str]] = []
    used = 0
    for s in reversed(candidates):
        text = sanitize_for_summary(s.text)
        cost = estimate_tokens(text)
        if used + cost <= budget_tokens:
            chosen.append((s, text))
            used += cost
    chosen.reverse()
    return PriorContext(
        tuple(s.id for s, _ in chosen), used, "\n\n".join(text for _, text in chosen)
    )


# ---------------------------------------------------------------------- guidance shards

SURFACE_HINT_RE = re.compile(
    r"(?i)\b(?:prefer|prioriti[sz]e|focus|avoid|reject|keep|ensure|consider|should|must"
    r"|never|do not|don't|use)\b"
)
GUIDANCE_PROTOTYPES = (
    "Prefer deterministic operational guidance over generic defaults.",
    "Avoid unsafe or undesired implementation choices in hot paths.",
    "Use the specified approach when implementing core project logic.",
    "Keep the implementation aligned with project-specific engineering rules.",
)

SimilarityFn = Callable[[str], float]
"""Maximum cosine of a text to :data:`GUIDANCE_PROTOTYPES` (injected; uses an embedder)."""


@dataclass(frozen=True, slots=True)
class ProtectionDecision:
    protected: bool
    path: Literal["deontic", "booster", ""]
    stability: float
    similarity: float | None = None
    reason: str = ""


def _clamp01(x: float) -> float:
    return 0.0 if x < 0.0 or x != x else 1.0 if x > 1.0 else x


def protection_decision(
    text: str,
    stability: float,
    *,
    similarity: SimilarityFn | None = None,
    deontic: DeonticResult | None = None,
    min_stability: float = GUIDANCE_MIN_STABILITY,
    booster_floor: float = GUIDANCE_BOOSTER_FLOOR,
) -> ProtectionDecision:
    """Whether a compactable turn is kept verbatim as a guidance shard.

    Protected when the text is non-empty, ``clamp01(stability) >= min_stability`` and
    either the deontic classifier promotes it (path ``"deontic"``), or it carries a
    surface hint (prefer, avoid, must, use, ...) and ``similarity(text) >=
    booster_floor`` (path ``"booster"``). ``similarity`` is called only when needed.
    """
    s = _clamp01(stability)
    if not text.strip():
        return ProtectionDecision(False, "", s, reason="empty")
    if s < min_stability:
        return ProtectionDecision(False, "", s, reason="low stability")
    result = deontic if deontic is not None else evaluate_text(text)
    if result.promoted:
        return ProtectionDecision(True, "deontic", s, reason=result.label.value)
    if similarity is None or SURFACE_HINT_RE.search(text) is None:
        return ProtectionDecision(False, "", s, reason="not a rule")
    sim = _clamp01(float(similarity(text)))
    if sim >= booster_floor:
        return ProtectionDecision(True, "booster", s, sim, reason="prototype similarity")
    return ProtectionDecision(False, "", s, sim, reason="below booster floor")
