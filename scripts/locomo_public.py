"""The retrieval metrics other LoCoMo systems print, beside our evidence share at a token
budget: session-level any@5 (a question counts when any of its evidence sessions is among
the first five distinct sessions retrieved) and turn-level any@K / all@K (any / every
evidence turn among the first K turns), K = 5 and 10, over categories 1-4 and 1-5 (with
the adversarial questions). Nobody else's granularity or protocol is exactly this one, so
these place us next to published tables; they do not make a leaderboard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

METRICS = ("session any@5", "turn any@5", "turn all@5", "turn any@10", "turn all@10")
ADVERSARIAL = 5


def session_of(turn_id: str) -> str:
    """``D3:12`` -> ``D3`` (LoCoMo dialogue ids name their session)."""
    return turn_id.split(":", 1)[0]


def hits(ranked: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
    """The metrics of one question: ``ranked`` turn ids best first (duplicates ignored)."""
    order = list(dict.fromkeys(ranked))
    wanted = set(evidence)
    sessions = list(dict.fromkeys(session_of(t) for t in order))[:5]
    out = {"session any@5": float(bool({session_of(e) for e in wanted} & set(sessions)))}
    for k in (5, 10):
        top = set(order[:k])
        out[f"turn any@{k}"] = float(bool(wanted & top))
        out[f"turn all@{k}"] = float(wanted <= top)
    return out


@dataclass
class PublicScores:
    rows: dict[str, list[tuple[int, dict[str, float]]]] = field(default_factory=dict)

    def add(
        self, method: str, category: int, ranked: Sequence[str], evidence: Sequence[str]
    ) -> None:
        self.rows.setdefault(method, []).append((category, hits(ranked, evidence)))

    def value(self, method: str, metric: str, *, adversarial: bool) -> tuple[float, int]:
        vals = [
            m[metric] for cat, m in self.rows.get(method, []) if adversarial or cat != ADVERSARIAL
        ]
        return (sum(vals) / len(vals) if vals else float("nan"), len(vals))


def render_public(scores: PublicScores, methods: Sequence[str]) -> str:
    cols = [(m, adv) for m in methods for adv in (False, True)]
    head = "| metric | " + " | ".join(f"{m} ({'1-5' if adv else '1-4'})" for m, adv in cols)
    lines = [head + " |", "|---|" + "---|" * len(cols)]
    for metric in METRICS:
        cells = [f"{scores.value(m, metric, adversarial=adv)[0]:.3f}" for m, adv in cols]
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    counts = [str(scores.value(m, METRICS[0], adversarial=adv)[1]) for m, adv in cols]
    lines.append("| questions | " + " | ".join(counts) + " |")
    return "\n".join(lines)
