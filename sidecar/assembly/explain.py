"""Why the best-ranked candidates were left out of an assembly (``assemble`` ``explain``).

Computed after the fill from what it left behind, so the fill itself stays as it is: the
first candidates of the ranking that are not in the final selection, each with the first
reason that applies, in the order the fill checks them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sidecar.assembly.candidates import Candidate, features
from sidecar.assembly.implicit import ImplicitPool, Shares
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


def implicit_left_out(
    pool: ImplicitPool,
    split: Shares,
    selected: Sequence[SelectedItem],
    chosen: Chosen,
    cfg: AssemblyConfig,
    k: int = EXPLAIN_K,
) -> tuple[ConsideredItem, ...]:
    """The implicit channel's best candidates that were not injected, with the reason
    (its share and how much stood out), so a statement the user made that a message
    should have recalled can be traced."""
    final = {(i.collection, i.id) for i in selected}
    out: list[ConsideredItem] = []
    icfg = cfg.implicit
    for c, score in zip(pool.candidates, pool.scores, strict=True):
        key = features(c).key
        if key in final:
            continue
        if not chosen.sources.isdisjoint(features(c).sources) and key not in chosen.keys:
            why = "implicit: duplicate: the turns it stands for are already in"
        elif split.implicit <= 0 and split.mode == "implicit":
            why = (
                f"implicit: nothing stands out (best {pool.standout:.3f} < "
                f"{min(icfg.low, icfg.trickle_low) if icfg.trickle_tokens else icfg.low}); "
                "the message recalls nothing"
            )
        elif split.implicit <= 0:
            why = f"implicit: off ({split.mode})"
        else:
            why = (
                f"implicit: not reached: its share ({split.implicit} tokens, {split.mode}) "
                "went to better ones"
            )
        reason = f"free cosine - density {score:.3f}, standout {pool.standout:.3f}"
        out.append(ConsideredItem(c.kind, c.collection, c.id, c.text, score, c.cost, why, reason))
        if len(out) >= k:
            break
    return tuple(out)
