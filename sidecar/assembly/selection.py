"""What an assembly plan is made of: the authored rules and selected items it holds, its
configuration, the hooks through which the planner reaches the store, and the plan itself
(with its wire form)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sidecar.assembly.budget import BudgetConfig, BudgetPartition, Part
from sidecar.assembly.candidates import Candidate, features
from sidecar.assembly.implicit import DEFAULT_IMPLICIT, ImplicitConfig
from sidecar.assembly.render import Placement, RenderStyle, Supersession, supersession
from sidecar.assembly.scoring import DEFAULT_SCORING, Scored, ScoringConfig
from sidecar.memory.core.temporal import TemporalPlan
from sidecar.memory.core.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class AuthoredNode:
    """A hard (tier 1) or soft (tier 2) authored rule, in authored order."""

    id: str
    text: str
    tier: int = 1
    collection: str = ""
    tokens: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def cost(self) -> int:
        return self.tokens if self.tokens is not None else estimate_tokens(self.text)

    @property
    def key(self) -> tuple[str, str]:
        return (
            self.collection or ("authored:hard" if self.tier == 1 else "authored:soft"),
            self.id,
        )


@dataclass(frozen=True, slots=True)
class SelectedItem:
    part: Part
    kind: str
    collection: str
    id: str
    text: str
    turn_ids: tuple[str, ...] = ()
    session_id: str = ""
    role: str = ""
    ts: int | None = None
    score: float = 0.0
    tokens: int = 0
    reason: str = ""
    scope: str = ""
    source: str = ""  # an authored node's document
    # set when a later statement replaced this one: rendered as earlier (render module doc)
    superseded: Supersession | None = None
    # how many identical entries this one stands for (duplicates module doc)
    repeats: int = 1


@dataclass(frozen=True, slots=True)
class AssemblyConfig:
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    scoring: ScoringConfig = DEFAULT_SCORING
    placement: Placement = "prompt"
    # how entries are written (render module doc): "reference" (the reference's bytes),
    # "dated" (the same under one line per day) or "compact" (the daemon's default)
    render: RenderStyle = "reference"
    # list the best-ranked candidates left out (``AssemblyPlan.considered``)
    explain: bool = False
    diversity: float = 0.15  # nu: redundancy penalty (x best score x max cosine to selected)
    slot_bonus: float = 0.25  # comparison-side coverage bonus (x best score)
    neighbor_fetch: int = 12  # best turns whose missing neighbours are fetched
    hop_k: int = 8  # k2: parents whose hop targets are followed
    hop_decay: float = 0.8  # eta
    hop_floor: float = 0.15  # theta_hop, relative to the best score
    expand_ratio: float = 0.75  # summaries at >= this share of the best score expand
    min_relative_score: float = 0.3  # never inject below this share of the best score
    # Nothing is recalled just because budget is left: a retrieved item (and a guidance
    # shard, and a search hit) needs a cosine with the query of at least this, or one of
    # the query's keywords, or a hop from such an item. Chosen on labelled pairs written
    # for the project (scripts/choose_relevance_floor.py), not on the evaluation data.
    relevance_floor: float = 0.145
    session_pool_limit: int = 64  # newest session turns outside the tail added to the pool
    recovery_cosine_floor: float = 0.2  # "nothing matches": best cosine below, no lexical hit
    recovery_summary_confidence: float = 0.5  # S3: top-4 all summaries below this
    mention_slack_days: float = 3.0
    # the share of a named speaker's label direction taken out of the query vector before
    # the dense search (speaker_focus module doc); 0 leaves the vector as embedded
    speaker_label_weight: float = 0.5
    # A query ``forget`` deletes a memory only when ``cosine + forget_weight * keyword
    # coverage >= forget_bar`` (forget_match module doc; the embedder's profile sets both).
    forget_weight: float = 0.4
    forget_bar: float = 0.859
    # the implicit-recall channel and how the budget is shared with the hybrid ranking
    # (implicit module doc; the embedder's profile may turn it off)
    implicit: ImplicitConfig = DEFAULT_IMPLICIT


DEFAULT_ASSEMBLY = AssemblyConfig()

NeighborsHook = Callable[[Sequence[Candidate]], Sequence[Candidate]]
HopsHook = Callable[[Sequence[str]], Sequence[Candidate]]
ExpandHook = Callable[[str], Sequence[Candidate]]
RecoverHook = Callable[[], Sequence[Candidate]]


@dataclass(frozen=True, slots=True)
class ConsideredItem:
    """A ranked candidate that was not injected, and why (``assemble`` with ``explain``)."""

    kind: str
    collection: str
    id: str
    text: str
    score: float
    tokens: int
    why: str  # the reason it was left out
    reason: str  # how it scored (the parts, as a selected item's reason)


@dataclass(frozen=True, slots=True)
class AssemblyPlan:
    selected: tuple[SelectedItem, ...]
    messages: list[Any]
    system_prompt_addition: str
    estimated_tokens: int
    budget: BudgetPartition
    degraded: tuple[str, ...] = ()
    temporal: TemporalPlan | None = None
    dream: bool = False
    recovery: tuple[str, ...] = ()  # why recovery ran (empty: it did not)
    timings: Mapping[str, float] = field(default_factory=dict)
    # the best-ranked candidates left out, with the reason (a few, best first)
    considered: tuple[ConsideredItem, ...] = ()


class Chosen:
    """Keys and source turns already injected (no record, no source turn twice)."""

    def __init__(self) -> None:
        self.items: list[SelectedItem] = []
        self.keys: set[tuple[str, str]] = set()
        self.sources: set[tuple[str, str]] = set()

    def blocked(self, c: Candidate) -> bool:
        f = features(c)
        return f.key in self.keys or not self.sources.isdisjoint(f.sources)

    def add(self, item: SelectedItem, sources: Iterable[tuple[str, str]] = ()) -> None:
        self.items.append(item)
        self.keys.add((item.collection, item.id))
        self.sources.update(sources)


@dataclass(frozen=True, slots=True)
class HitFilter:
    """``search``'s filters: role and kind equal, ``ts`` within ``since``..``until``
    (inclusive, epoch ms; a candidate without ``ts`` fails a time filter)."""

    role: str | None = None
    since: int | None = None
    until: int | None = None
    kind: str | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.role, self.since, self.until, self.kind))

    def passes(self, c: Candidate) -> bool:
        if self.role is not None and c.role != self.role:
            return False
        if self.kind is not None and c.kind != self.kind:
            return False
        if self.since is not None and (c.ts is None or c.ts < self.since):
            return False
        return not (self.until is not None and (c.ts is None or c.ts > self.until))


NO_FILTER = HitFilter()


def authored_item(node: AuthoredNode, part: Part, tokens: int) -> SelectedItem:
    coll, _ = node.key
    return SelectedItem(
        part=part,
        kind="authored",
        collection=coll,
        id=node.id,
        text=node.text,
        score=1.0,
        tokens=tokens,
        reason="hard rule" if part == "hard" else "soft rule prefix",
        scope="authored",
    )


def candidate_item(
    c: Candidate, part: Part, score: float, tokens: int, reason: str, repeats: int = 1
) -> SelectedItem:
    return SelectedItem(
        part=part,
        kind=c.kind,
        collection=c.collection,
        id=c.id,
        text=c.text,
        turn_ids=c.covered,
        session_id=c.session_id,
        role=c.role,
        ts=c.ts,
        score=score,
        tokens=tokens,
        reason=reason if repeats <= 1 else f"{reason} (the newest of {repeats} identical)",
        scope=c.scope,
        source=source_doc(c),
        superseded=supersession(c.id, c.session_id, c.metadata),
        repeats=repeats,
    )


def source_doc(c: Candidate) -> str:
    if not c.collection.startswith("authored:"):
        return ""
    doc = c.metadata.get("source_doc")
    return doc if isinstance(doc, str) else ""


def reason_text(part: str, s: Scored, extra: str = "") -> str:
    text = f"{part}: {s.reason()}"
    return f"{text} {extra}".strip()


def dedupe(
    cands: Iterable[Candidate], chosen: Chosen, seen: set[tuple[str, str]] | None = None
) -> list[Candidate]:
    """Distinct keys, not already injected; the first occurrence of a key wins. ``seen``:
    filled with the keys returned (an empty set to start with)."""
    if seen is None:
        seen = set()
    out: list[Candidate] = []
    keys, sources = chosen.keys, chosen.sources
    for c in cands:
        f = c._features or features(c)
        key = f.key
        if key in seen or key in keys or not sources.isdisjoint(f.sources):
            continue
        seen.add(key)
        out.append(c)
    return out
