"""Summary ids, lineage metadata and the pure summary-DAG helpers.

Raw turns are immutable leaves. A summary node covers an ordered set of children, each a
raw turn or a lower summary. :class:`LineageGraph` keeps the coverage relation and
answers the questions compaction and ``expand`` ask:

* the **active frontier**: summaries that no higher summary covers, plus the raw turns
  no summary covers, in chronological order. Expanding every active summary and adding
  the uncovered turns reproduces the raw history exactly (the lossless property; see
  the hypothesis test);
* ``expand(summary_id, max_depth)``: the children in chronological order (by their
  earliest leaf), recursing into child summaries while depth remains; unexpanded
  summaries stay as references (the reference returned edge-id order);
* ``leaves(summary_id)``: all raw turns under a summary, chronological.

By default :meth:`LineageGraph.add_summary` keeps the coverage a forest — every child
must be currently uncovered (a turn) or active (a summary) — which is what makes the
frontier a partition of the history. Reading arbitrary stored data, ``strict=False``
accepts any acyclic input; the helpers deduplicate leaves.

Summary ids are deterministic: ``sum:`` + the first 32 hex digits of sha256 over the
session id and the *sorted set* of typed child ids. The same source set always gives
the same id (idempotent re-runs); different partitions give different ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sidecar.memory.compaction.continuity import partition
from sidecar.memory.core.turns import SortKey

ChildKind = Literal["turn", "summary"]


@dataclass(frozen=True, slots=True, order=True)
class ChildRef:
    kind: ChildKind
    id: str


def turn_ref(turn_id: str) -> ChildRef:
    return ChildRef("turn", turn_id)


def summary_ref(summary_id: str) -> ChildRef:
    return ChildRef("summary", summary_id)


def summary_id(session_id: str, children: Iterable[ChildRef]) -> str:
    """Deterministic id of the summary of ``children`` in ``session_id`` (module doc)."""
    typed = sorted({f"{c.kind[0]}:{c.id}" for c in children})
    if not typed:
        raise ValueError("a summary needs at least one child")
    h = hashlib.sha256()
    h.update(session_id.encode("utf-8"))
    for t in typed:
        h.update(b"\x1f")
        h.update(t.encode("utf-8"))
    return f"sum:{h.hexdigest()[:32]}"


def guidance_shard_id(session_id: str, turn_id: str) -> str:
    """Deterministic id of the guidance shard of a protected turn (insert-if-absent)."""
    return f"guidance:{session_id}:{turn_id}"


def edge_id(summary: str, child: ChildRef) -> str:
    return f"{summary}>{child.kind[0]}:{child.id}"


class LineageError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SummaryNode:
    id: str
    children: tuple[ChildRef, ...]
    level: int  # 1 for a summary of raw turns, 1 + max child level otherwise


class LineageGraph:
    """In-memory coverage DAG over one session (pure; rebuilt from stored edges)."""

    def __init__(self, turns: Mapping[str, SortKey] | None = None) -> None:
        self._turn_keys: dict[str, SortKey] = dict(turns or {})
        self._nodes: dict[str, SummaryNode] = {}
        self._parents: dict[ChildRef, list[str]] = {}
        self._first: dict[str, SortKey] = {}
        self._leaves: dict[str, tuple[str, ...]] = {}

    # ---------------------------------------------------------------- building
    def add_turn(self, turn_id: str, key: SortKey) -> None:
        if turn_id in self._turn_keys and self._turn_keys[turn_id] != key:
            raise LineageError(f"turn {turn_id!r} already exists with another key")
        self._turn_keys[turn_id] = key

    def add_summary(
        self, summary: str, children: Sequence[ChildRef], *, strict: bool = True
    ) -> SummaryNode:
        """Add ``summary`` covering ``children``; idempotent for an identical node."""
        if summary in self._nodes:
            node = self._nodes[summary]
            if set(node.children) != set(children):
                raise LineageError(f"summary {summary!r} already exists with other children")
            return node
        if not children:
            raise LineageError("a summary needs at least one child")
        if len(set(children)) != len(children):
            raise LineageError("duplicate child")
        for c in children:
            if c.kind == "turn":
                if c.id not in self._turn_keys:
                    raise LineageError(f"unknown turn {c.id!r}")
            elif c.id not in self._nodes:
                raise LineageError(f"unknown summary {c.id!r}")  # also rules out cycles
            if strict and self._parents.get(c):
                raise LineageError(f"{c.kind} {c.id!r} is already covered")
        level = 1 + max(
            (self._nodes[c.id].level for c in children if c.kind == "summary"), default=0
        )
        ordered = tuple(sorted(children, key=self.first_key))
        node = SummaryNode(summary, ordered, level)
        self._nodes[summary] = node
        for c in ordered:
            self._parents.setdefault(c, []).append(summary)
        leaves: list[str] = []
        seen: set[str] = set()
        for c in ordered:
            for leaf in self._leaves_of(c):
                if leaf not in seen:
                    seen.add(leaf)
                    leaves.append(leaf)
        leaves.sort(key=self._turn_keys.__getitem__)
        self._leaves[summary] = tuple(leaves)
        self._first[summary] = self._turn_keys[leaves[0]]
        return node

    # ---------------------------------------------------------------- queries
    def __contains__(self, summary: object) -> bool:
        return summary in self._nodes

    def node(self, summary: str) -> SummaryNode:
        try:
            return self._nodes[summary]
        except KeyError:
            raise LineageError(f"unknown summary {summary!r}") from None

    @property
    def summaries(self) -> list[str]:
        return list(self._nodes)

    @property
    def turns(self) -> list[str]:
        return sorted(self._turn_keys, key=self._turn_keys.__getitem__)

    def turn_key(self, turn_id: str) -> SortKey:
        return self._turn_keys[turn_id]

    def first_key(self, ref: ChildRef) -> SortKey:
        if ref.kind == "turn":
            return self._turn_keys[ref.id]
        return self._first[ref.id]

    def last_key(self, ref: ChildRef) -> SortKey:
        if ref.kind == "turn":
            return self._turn_keys[ref.id]
        return self._turn_keys[self._leaves[ref.id][-1]]

    def parents(self, ref: ChildRef) -> tuple[str, ...]:
        return tuple(self._parents.get(ref, ()))

    def is_covered(self, ref: ChildRef) -> bool:
        return bool(self._parents.get(ref))

    def covered_turns(self) -> frozenset[str]:
        return frozenset(c.id for c, ps in self._parents.items() if ps and c.kind == "turn")

    def _leaves_of(self, ref: ChildRef) -> tuple[str, ...]:
        return (ref.id,) if ref.kind == "turn" else self._leaves[ref.id]

    def leaves(self, summary: str) -> list[str]:
        """Every raw turn under ``summary``, chronological (``Expand*``)."""
        self.node(summary)
        return list(self._leaves[summary])

    def active_summaries(self) -> list[str]:
        """Summaries no other summary covers, by their earliest leaf."""
        active = [s for s in self._nodes if not self._parents.get(summary_ref(s))]
        return sorted(active, key=lambda s: (self._first[s], s))

    def uncovered_turns(self) -> list[str]:
        return [t for t in self.turns if not self._parents.get(turn_ref(t))]

    def frontier(self) -> list[ChildRef]:
        """Active summaries and uncovered turns, ordered by earliest leaf."""
        items = [summary_ref(s) for s in self.active_summaries()]
        items += [turn_ref(t) for t in self.uncovered_turns()]
        return sorted(items, key=lambda r: (self.first_key(r), r.kind, r.id))

    def expand(self, summary: str, max_depth: int = 3) -> list[ChildRef]:
        """Children of ``summary`` in chronological order, expanding child summaries
        while ``max_depth`` allows (1 = direct children only). Raw turns are deduplicated.
        """
        node = self.node(summary)
        depth = max(1, max_depth)
        out: list[ChildRef] = []
        seen: set[ChildRef] = set()
        for child in node.children:
            refs = [child]
            if child.kind == "summary" and depth > 1:
                refs = self.expand(child.id, depth - 1)
            for r in refs:
                if r not in seen:
                    seen.add(r)
                    out.append(r)
        return sorted(out, key=lambda r: (self.first_key(r), r.kind, r.id))

    def validate(self) -> None:
        """Raise :class:`LineageError` unless every summary expands to >= 1 known turn."""
        for s, node in self._nodes.items():
            if not node.children or not self._leaves.get(s):
                raise LineageError(f"summary {s!r} covers nothing")
            for leaf in self._leaves[s]:
                if leaf not in self._turn_keys:
                    raise LineageError(f"summary {s!r} covers unknown turn {leaf!r}")


def reproduce_history(graph: LineageGraph) -> list[str]:
    """The raw history rebuilt from the frontier: each active summary expanded to its
    leaves, plus the uncovered turns, merged chronologically."""
    leaves: list[str] = []
    for ref in graph.frontier():
        leaves.extend(graph.leaves(ref.id) if ref.kind == "summary" else [ref.id])
    return sorted(leaves, key=graph.turn_key)


def plan_condensation(
    graph: LineageGraph,
    *,
    max_active: int = 8,
    fanout: int = 4,
    before: SortKey | None = None,
) -> list[tuple[ChildRef, ...]]:
    """Groups of consecutive active summaries to summarize into a higher level.

    Nothing is planned while the number of active summaries (before ``before``, the tail
    start key) is at most ``max_active``. Otherwise every maximal run of consecutive
    active summaries in the frontier (an uncovered turn between two summaries breaks
    the run) is partitioned into groups of about ``fanout`` (:func:`continuity.partition`);
    groups of one are left alone.
    """
    frontier = [r for r in graph.frontier() if before is None or graph.last_key(r) < before]
    active = [r for r in frontier if r.kind == "summary"]
    if len(active) <= max(max_active, 1):
        return []
    runs: list[list[ChildRef]] = [[]]
    for r in frontier:
        if r.kind == "summary":
            runs[-1].append(r)
        elif runs[-1]:
            runs.append([])
    groups: list[tuple[ChildRef, ...]] = []
    for run in runs:
        for rng in partition(len(run), max(fanout, 2)):
            group = tuple(run[rng.start : rng.stop])
            if len(group) >= 2:
                groups.append(group)
    return groups


# ------------------------------------------------------------------------------ metadata


@dataclass(frozen=True, slots=True)
class SourceItem:
    """A child as lineage metadata needs it."""

    ref: ChildRef
    ts_min: int
    ts_max: int
    input_tokens: int  # tokens of the text it stands for in the active view
    original_tokens: int  # tokens of the raw turns under it
    user_id: str = ""


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _clamp01(x: float) -> float:
    return 0.0 if x < 0.0 or x != x else 1.0 if x > 1.0 else x


def build_summary_record(  # noqa: PLR0913 - keyword-only record fields
    session_id: str,
    children: Sequence[SourceItem],
    *,
    text: str,
    summary_tokens: int,
    method: str,
    confidence: float,
    generation: int,
    compacted_at: int,
    level: int = 1,
    support_summary_ids: Sequence[str] = (),
    support_tokens: int = 0,
    quality: Mapping[str, float] | None = None,
) -> SummaryRecord:
    """The stored summary record: reference keys plus token counts and generation.

    Pass ``support_summary_ids`` only when the summarizer actually read the prior
    context (``LadderStep.uses_prior_context``), not when it was selected and ignored.
    """
    if not children:
        raise ValueError("a summary needs at least one source")
    conf = _clamp01(confidence)
    refs = [c.ref for c in children]
    sid = summary_id(session_id, refs)
    ts_min = min(c.ts_min for c in children)
    ts_max = max(c.ts_max for c in children)
    lineage: dict[str, Any] = {
        "source_ids": [r.id for r in refs],
        "source_turn_ids": [r.id for r in refs if r.kind == "turn"],
        "parent_summary_ids": [r.id for r in refs if r.kind == "summary"],
        "source_ts_min": ts_min,
        "source_ts_max": ts_max,
        "compacted_at": compacted_at,
        "method": method,
        "confidence": conf,
    }
    meta: dict[str, Any] = {
        "type": "summary",
        "ts": compacted_at,
        "sessionId": session_id,
        "source_ids": [r.id for r in refs],
        "method": method,
        "token_count": summary_tokens,
        "summary_tokens": summary_tokens,
        "input_tokens": sum(c.input_tokens for c in children),
        "original_tokens": sum(c.original_tokens for c in children),
        "confidence": conf,
        "decay_rate": _clamp01(1.0 - conf),
        "compacted_at": compacted_at,
        "generation": generation,
        "level": level,
        "source_ts_min": ts_min,
        "source_ts_max": ts_max,
        "continuity_lineage": lineage,
    }
    if support_summary_ids:
        lineage["support_summary_ids"] = list(support_summary_ids)
        lineage["support_tokens"] = support_tokens
        meta["continuity_support_summary_ids"] = list(support_summary_ids)
        meta["continuity_support_tokens"] = support_tokens
    if quality:
        meta.update({k: float(v) for k, v in quality.items()})
    user = next((c.user_id for c in children if c.user_id), "")
    if user:
        meta["userId"] = user
    return SummaryRecord(sid, text, meta)


def coverage_edges(
    session_id: str,
    summary: str,
    children: Sequence[SourceItem],
    *,
    compacted_at: int,
    raw_collection: str | None = None,
    summary_collection: str | None = None,
) -> list[dict[str, Any]]:
    """One edge record per child; ``children`` in chronological order, which
    ``edge_order`` records (``expand`` may also order by the graph's keys)."""
    raw_coll = raw_collection or f"session_raw:{session_id}"
    sum_coll = summary_collection or f"session_summary:{session_id}"
    edges: list[dict[str, Any]] = []
    for order, c in enumerate(children):
        edge: dict[str, Any] = {
            "id": edge_id(summary, c.ref),
            "type": "coverage_edge",
            "ts": compacted_at,
            "sessionId": session_id,
            "parent_summary_id": summary,
            "child_id": c.ref.id,
            "child_type": c.ref.kind,
            "child_collection": raw_coll if c.ref.kind == "turn" else sum_coll,
            "child_ts": c.ts_min,
            "edge_order": order,
            "compacted_at": compacted_at,
        }
        if c.user_id:
            edge["userId"] = c.user_id
        edges.append(edge)
    return edges
