"""Why the best-ranked candidates were left out of an assembly (``assemble`` ``explain``).

Computed after the fill from what it left behind, so the fill itself stays as it is: the
first candidates of the ranking that are not in the final selection, each with the first
reason that applies, in the order the fill checks them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sidecar.assembly.candidates import Candidate, features
from sidecar.assembly.scoring import Ranking
from sidecar.assembly.selection import AssemblyConfig, Chosen, ConsideredItem, SelectedItem

EXPLAIN_K = 10  # candidates listed


def left_out(
    ranked: Ranking,
    selected: Sequence[SelectedItem],
    chosen: Chosen,
    remaining: int,
    cost: Callable[[Candidate], int],
    cfg: AssemblyConfig,
    k: int = EXPLAIN_K,
) -> tuple[ConsideredItem, ...]:
    n = len(ranked)
    if not n or k <= 0:
        return ()
    final = {(i.collection, i.id) for i in selected}
    top = max(float(ranked.score[0]), 1e-9)
    relevant = ranked.relevant(cfg.relevance_floor, cfg.scoring)
    out: list[ConsideredItem] = []
    for i, c in enumerate(ranked.candidates):
        key = features(c).key
        if key in final:
            continue
        score = float(ranked.score[i])
        tokens = cost(c)
        why = _why(c, key, score, top, bool(relevant[i]), tokens, remaining, chosen, cfg)
        s = ranked.item(i)
        out.append(
            ConsideredItem(c.kind, c.collection, c.id, c.text, score, tokens, why, s.reason())
        )
        if len(out) >= k:
            break
    return tuple(out)


def _why(  # noqa: PLR0913 - one candidate against the finished fill
    c: Candidate,
    key: tuple[str, str],
    score: float,
    top: float,
    relevant: bool,
    tokens: int,
    remaining: int,
    chosen: Chosen,
    cfg: AssemblyConfig,
) -> str:
    if key in chosen.keys:
        return "trimmed: the rendered memory went over the budget"
    if not chosen.sources.isdisjoint(features(c).sources):
        return "duplicate: the turns it stands for are already in"
    if score < cfg.min_relative_score * top:
        return f"score below {cfg.min_relative_score:.0%} of the best ({top:.3f})"
    if not relevant:
        return f"below the relevance floor ({cfg.relevance_floor})"
    if tokens > remaining:
        return f"did not fit: {tokens} tokens, {remaining} left"
    return "not reached: the budget went to better or less redundant items"
