"""The implicit-recall tables: cue cover per split, kind, conversation and method, and the
memory tokens injected for prompts no memory bears on."""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.cue_set import KINDS, PROMPT_KINDS  # noqa: E402
from scripts.locomo_report import mean  # noqa: E402


def covered(selected_ids: Iterable[str], cue_ids: Sequence[str]) -> float:
    """1.0 when the assembled memory holds a turn of the cue (by turn id), else 0.0."""
    got = set(selected_ids)
    return 1.0 if any(c in got for c in cue_ids) else 0.0


@dataclass
class CueScores:
    # (split, method, kind) and (split, method, conversation) -> cover of each trigger
    by_kind: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    by_conv: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    # (split, method, prompt kind) -> memory tokens injected for each no-memory prompt, and
    # those of them the recovery part spent (the plan's last resort when nothing ranks)
    tokens: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    recovery: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)

    def add(self, split: str, method: str, conv: str, kind: str, value: float) -> None:
        self.by_kind.setdefault((split, method, kind), []).append(value)
        self.by_conv.setdefault((split, method, conv), []).append(value)

    def spent(self, split: str, method: str, kind: str, tokens: int, recovery: int = 0) -> None:
        self.tokens.setdefault((split, method, kind), []).append(tokens)
        self.recovery.setdefault((split, method, kind), []).append(recovery)

    def overall(self, split: str, method: str) -> list[float]:
        return [x for k in KINDS for x in self.by_kind.get((split, method, k), [])]

    def methods(self, split: str) -> list[str]:
        return list(dict.fromkeys(m for s, m, _ in self.by_kind if s == split))


def _cell(values: Sequence[float]) -> str:
    return f"{mean(values):.3f}" if values else "-"


def render_cover(scores: CueScores, split: str, methods: Sequence[str]) -> str:
    """One table per split: a row per kind, per conversation and overall."""
    lines = [
        "| " + split + " | triggers | " + " | ".join(methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for kind in KINDS:
        vals = {m: scores.by_kind.get((split, m, kind), []) for m in methods}
        n = max((len(v) for v in vals.values()), default=0)
        if n:
            lines.append(f"| {kind} | {n} | " + " | ".join(_cell(vals[m]) for m in methods) + " |")
    convs = sorted({c for s, _, c in scores.by_conv if s == split})
    for conv in convs:
        vals = {m: scores.by_conv.get((split, m, conv), []) for m in methods}
        n = max(len(v) for v in vals.values())
        lines.append(f"| {conv} | {n} | " + " | ".join(_cell(vals[m]) for m in methods) + " |")
    every = {m: scores.overall(split, m) for m in methods}
    n = max((len(v) for v in every.values()), default=0)
    lines.append(
        f"| **overall** | {n} | " + " | ".join(f"**{_cell(every[m])}**" for m in methods) + " |"
    )
    return "\n".join(lines)


def _pct(values: Sequence[int], q: float) -> float:
    s = sorted(values)
    return float(s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))])


def render_tokens(scores: CueScores, splits: Sequence[str], methods: Sequence[str]) -> str:
    """Memory tokens injected for the no-memory prompts: p50, p90, the share of prompts
    given none, per split and method, the mean spent by recovery, and p50 per kind."""
    lines = [
        "| split | method | prompts | p50 tokens | p90 | mean | mean by recovery | "
        "nothing injected | " + " | ".join(f"{k} p50" for k in PROMPT_KINDS) + " |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(PROMPT_KINDS),
    ]
    for split in splits:
        for m in methods:
            per = {k: scores.tokens.get((split, m, k), []) for k in PROMPT_KINDS}
            every = [x for v in per.values() for x in v]
            if not every:
                continue
            kinds = " | ".join(f"{statistics.median(v):g}" if v else "-" for v in per.values())
            zero = sum(1 for x in every if x == 0) / len(every)
            rec = [x for k in PROMPT_KINDS for x in scores.recovery.get((split, m, k), [])]
            lines.append(
                f"| {split} | {m} | {len(every)} | {statistics.median(every):g} | "
                f"{_pct(every, 0.9):g} | {mean(every):.0f} | {mean(rec):.0f} | {zero:.3f} | "
                f"{kinds} |"
            )
    return "\n".join(lines)
