"""The evaluation's tables: recall per conversation, category and method, timings, and
the verdict against the target."""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


# ------------------------------------------------------------------------------- table


@dataclass
class Scores:
    per_conv: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    per_cat: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    timings: dict[str, list[float]] = field(default_factory=dict)
    precision: dict[str, list[int]] = field(default_factory=dict)  # [evidence items, items]
    # (method, category) -> [tokens of items holding evidence, tokens injected, questions]
    token_share: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    def add(self, conv: str, cat: int, method: str, value: float) -> None:
        self.per_conv.setdefault(conv, {}).setdefault(method, []).append(value)
        self.per_cat.setdefault(cat, {}).setdefault(method, []).append(value)

    def time(self, method: str, seconds: float) -> None:
        self.timings.setdefault(method, []).append(seconds)

    def injected(
        self, method: str, items: Iterable[Sequence[str]], evidence: Sequence[str]
    ) -> None:
        """Count the injected items (each a list of the turn ids it covers) and those
        holding evidence, for the precision row."""
        wanted = set(evidence)
        counts = self.precision.setdefault(method, [0, 0])
        for turn_ids in items:
            counts[1] += 1
            counts[0] += bool(wanted.intersection(turn_ids))

    def spent(
        self,
        method: str,
        category: int,
        items: Iterable[tuple[Sequence[str], int]],
        evidence: Sequence[str],
    ) -> None:
        """Count the memory tokens injected for one question (``(turn ids, tokens)`` per
        item) and those of the items holding evidence, per category."""
        wanted = set(evidence)
        counts = self.token_share.setdefault((method, category), [0, 0, 0])
        counts[2] += 1
        for turn_ids, tokens in items:
            counts[1] += tokens
            counts[0] += tokens if wanted.intersection(turn_ids) else 0


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def render_table(scores: Scores, methods: Sequence[str]) -> str:
    head = "| conversation | questions | " + " | ".join(methods) + " |"
    lines = [head, "|---|---|" + "---|" * len(methods)]
    overall: dict[str, list[float]] = {m: [] for m in methods}
    for conv, by_method in scores.per_conv.items():
        n = len(next(iter(by_method.values())))
        cells = []
        for m in methods:
            vals = by_method.get(m, [])
            overall[m].extend(vals)
            cells.append(f"{mean(vals):.3f}" if vals else "-")
        lines.append(f"| {conv} | {n} | " + " | ".join(cells) + " |")
    n_all = max((len(v) for v in overall.values()), default=0)
    cells = [f"**{mean(overall[m]):.3f}**" if overall[m] else "-" for m in methods]
    lines.append(f"| **overall** | {n_all} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| category | questions | " + " | ".join(methods) + " |")
    lines.append("|---|---|" + "---|" * len(methods))
    for cat in sorted(scores.per_cat):
        by_method = scores.per_cat[cat]
        n = len(next(iter(by_method.values())))
        cells = [f"{mean(by_method[m]):.3f}" if by_method.get(m) else "-" for m in methods]
        lines.append(f"| {cat} {CATEGORY_NAMES.get(cat, '')} | {n} | " + " | ".join(cells) + " |")
    if scores.precision:
        lines.append("")
        lines.append("| precision | items | " + " | ".join(methods) + " |")
        lines.append("|---|---|" + "---|" * len(methods))
        cells = []
        for m in methods:
            hit, total = scores.precision.get(m, (0, 0))
            cells.append(f"{hit / total:.3f}" if total else "-")
        n_items = "/".join(str(scores.precision.get(m, (0, 0))[1]) for m in methods)
        lines.append(
            f"| evidence share of injected items | {n_items} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def render_token_share(scores: Scores, methods: Sequence[str]) -> str:
    """Per category and method: the share of the injected memory tokens that hold
    evidence, and the tokens injected per question (what the recall figure costs)."""
    have = [m for m in methods if any(k[0] == m for k in scores.token_share)]
    if not have:
        return ""
    head = "| category | " + " | ".join(f"{m} evidence share | {m} tokens/question" for m in have)
    lines = [head + " |", "|---|" + "---|---|" * len(have)]
    for cat in CATEGORIES:
        cells = []
        for m in have:
            hit, total, n = scores.token_share.get((m, cat), [0, 0, 0])
            cells.append(f"{hit / total:.3f} | {total / n:.0f}" if total and n else "- | -")
        lines.append(f"| {cat} {CATEGORY_NAMES[cat]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_timings(scores: Scores) -> str:
    lines = ["| method | p50 ms/query | p95 ms/query |", "|---|---|---|"]
    for m, ts in scores.timings.items():
        if not ts:
            continue
        q = sorted(ts)
        p50 = statistics.median(q) * 1000
        p95 = q[min(len(q) - 1, math.ceil(0.95 * len(q)) - 1)] * 1000
        lines.append(f"| {m} | {p50:.2f} | {p95:.2f} |")
    return "\n".join(lines)


def target_verdict(scores: Scores, method: str = "inprocess") -> str:
    """The issue's target: >= 0.77 and >= 8 points above the best plain baseline."""
    overall: dict[str, list[float]] = {}
    for by_method in scores.per_conv.values():
        for m, vals in by_method.items():
            overall.setdefault(m, []).extend(vals)
    if not overall.get(method):
        return ""
    value = mean(overall[method])
    plain = max(("cosine", "bm25", "rrf"), key=lambda m: mean(overall.get(m, [])))
    best = mean(overall[plain])
    star = mean(overall.get("rrf*", []))
    met = value >= 0.77 and value - best >= 0.08
    return (
        f"Target (>= 0.77 and >= 8 points above the best baseline): `{method}` {value:.3f} "
        f"vs `{plain}` {best:.3f} ({100 * (value - best):+.1f} points; vs `rrf*` {star:.3f}, "
        f"{100 * (value - star):+.1f}): **{'met' if met else 'missed'}**."
    )
