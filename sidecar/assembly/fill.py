"""Filling the budget from a ranking, and the plan's last step: render, trim to what the
budget allows, and report."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from sidecar.assembly.budget import REASON_RENDERED, BudgetLedger, Part, check_partition
from sidecar.assembly.candidates import Candidate, features
from sidecar.assembly.duplicates import collapse
from sidecar.assembly.implicit import ImplicitPool
from sidecar.assembly.render import render_output, repeats_cost
from sidecar.assembly.scoring import Ranking
from sidecar.assembly.selection import (
    AssemblyConfig,
    AssemblyPlan,
    Chosen,
    ExpandHook,
    SelectedItem,
    candidate_item,
    dedupe,
    reason_text,
)
from sidecar.memory.core.analyzer import analyze
from sidecar.memory.core.temporal import TemporalPlan
from sidecar.memory.core.tokens import count_message_tokens, estimate_tokens


def fill(  # noqa: PLR0913 - the plan's running state, shared by two fills
    ranked: Ranking,
    budget: int,
    part: Part,
    chosen: Chosen,
    ledger: BudgetLedger,
    cost: Callable[[Candidate], int],
    plan: TemporalPlan,
    cfg: AssemblyConfig,
    expand: ExpandHook | None,
    terms_of: Callable[[Candidate], Iterable[str]] | None = None,
) -> None:
    """Greedy fill with diversity, slot coverage, dedupe and summary expansion."""
    n = len(ranked)
    if budget <= 0 or not n:
        return
    cands = ranked.candidates
    scores = ranked.score
    top = max(float(scores[0]), 1e-9)
    mat = _vector_matrix(ranked) if cfg.diversity > 0 else None
    slots = [set(t) for t in plan.slots] if len(plan.slots) >= 2 else []
    covered_slots: set[int] = set()
    slot_hits: list[set[int]] = []
    for c in cands if slots else ():
        words = set(terms_of(c) if terms_of is not None else analyze(c.text))
        slot_hits.append({k for k, t in enumerate(slots) if 2 * len(t & words) >= len(t)})
    costs = np.array([cost(c) for c in cands], dtype=np.int64)
    if expand is not None:
        expandable = (scores >= cfg.expand_ratio * top) & np.array(
            [features(c).is_summary for c in cands], dtype=bool
        )
    else:
        expandable = np.zeros(n, dtype=bool)
    alive = (scores >= cfg.min_relative_score * top) & ranked.relevant(
        cfg.relevance_floor, cfg.scoring
    )
    scores = scores.copy()  # a group of identical texts takes its best score
    repeats = collapse(cands, alive, scores)
    redundancy = np.zeros(n)
    penalty = cfg.diversity * top
    slot_scale = cfg.slot_bonus * top / len(slots) if slots else 0.0
    used = 0
    masked = scores
    changed = True  # what is spent, the redundancy or the covered slots changed
    while used < budget:
        if changed:
            # what cannot fit is dropped for good: what is left only shrinks (an
            # expandable summary may still fit as its turns)
            alive &= (costs <= budget - used) | expandable
            value = scores - penalty * redundancy if mat is not None else scores
            if slots:
                value = value + slot_scale * np.fromiter(
                    (len(h - covered_slots) for h in slot_hits), dtype=np.float64, count=n
                )
            masked = np.where(alive, value, -np.inf)
            changed = False
        if not alive.any():
            break
        i = int(np.argmax(masked))
        alive[i] = False
        masked[i] = -np.inf  # a skipped item leaves everything else as it was
        c = cands[i]
        took = 0
        if expandable[i] and expand is not None:
            took = _expand_into(
                c, float(scores[i]), budget - used, part, chosen, ledger, cost, expand
            )
        if not took:
            k = int(costs[i])
            if chosen.blocked(c) or used + k > budget:
                continue
            s = ranked.item(i)
            item = candidate_item(c, part, s.score, k, reason_text(part, s), repeats.get(i, 1))
            k += repeats_cost(item)
            if used + k > budget:
                continue
            ledger.charge(part, k)
            chosen.add(replace(item, tokens=k), features(c).sources)
            took = k
        used += took
        changed = True
        if mat is not None:
            np.maximum(redundancy, mat @ mat[i], out=redundancy)
        if slot_hits:
            covered_slots.update(slot_hits[i])


def fill_implicit(
    pool: ImplicitPool,
    budget: int,
    chosen: Chosen,
    ledger: BudgetLedger,
    cost: Callable[[Candidate], int],
    depth: float = math.inf,
) -> None:
    """Implicit recall's candidates, best first, within ``budget``: one that is already
    injected (or whose turns are) or does not fit is skipped and the fill goes on, and
    identical texts are injected once (:mod:`sidecar.assembly.duplicates`); nothing more
    than ``depth`` below the best score (the standout) is taken. No relevance
    floor: the channel's share already says how much stands out
    (:func:`sidecar.assembly.implicit.shares`), and a statement's cosine with a message it
    bears on is often below the hybrid ranking's floor."""
    cands = pool.candidates
    scores = np.asarray(pool.scores, dtype=np.float64)
    alive = np.ones(len(cands), dtype=bool)
    repeats = collapse(cands, alive, scores)
    used = 0
    bottom = pool.standout - depth
    for i in np.argsort(-scores, kind="stable").tolist():
        c = cands[i]
        if used >= budget or scores[i] < bottom:
            break
        if not alive[i] or chosen.blocked(c):
            continue
        score = float(pool.scores[i])
        reason = (
            f"{IMPLICIT_REASON} free cosine - density {score:.3f} (standout {pool.standout:.3f})"
        )
        item = candidate_item(c, "retrieval", score, cost(c), reason, repeats.get(i, 1))
        k = item.tokens + repeats_cost(item)
        if used + k > budget:
            continue
        ledger.charge("retrieval", k)
        chosen.add(replace(item, tokens=k), features(c).sources)
        used += k


def _vector_matrix(ranked: Ranking) -> np.ndarray[Any, np.dtype[np.float32]] | None:
    """Unit vectors of the ranked candidates (zero rows where a vector is missing); the
    rows the dense channel stacked when it has them (hop targets added here)."""
    cands = ranked.candidates
    dims = next((np.asarray(c.vector).size for c in cands if c.vector is not None), 0)
    if dims == 0:
        return None
    zero = np.zeros(dims, dtype=np.float32)
    mat = ranked.rows(dims)
    if mat is not None:
        for j in np.flatnonzero(ranked.index < 0).tolist():
            mat[j] = _unit_row(cands[j], dims, zero)
        return mat
    rows = [_unit_row(c, dims, zero) for c in cands]
    return np.concatenate(rows).reshape(len(rows), dims)


def _unit_row(
    c: Candidate, dims: int, zero: np.ndarray[Any, np.dtype[np.float32]]
) -> np.ndarray[Any, np.dtype[np.float32]]:
    """``c``'s vector as a float32 row of ``dims``, else ``zero``."""
    v = features(c).vector
    if v is None and c.vector is not None and np.asarray(c.vector).size == dims:
        v = np.asarray(c.vector, dtype=np.float32).ravel()
    return v if v is not None and v.shape[0] == dims else zero


def _expand_into(
    summary: Candidate,
    score: float,
    budget: int,
    part: Part,
    chosen: Chosen,
    ledger: BudgetLedger,
    cost: Callable[[Candidate], int],
    expand: ExpandHook,
) -> int:
    """Replace summary ``s`` by its raw turns not yet injected, if they all fit."""
    raw = [c for c in dedupe(expand(summary.id), chosen) if c.text.strip()]
    if not raw:
        return 0
    total = sum(cost(c) for c in raw)
    if total > budget:
        return 0
    for c in raw:
        k = cost(c)
        ledger.charge(part, k)
        reason = f"{part}: expanded from summary {summary.id}"
        chosen.add(candidate_item(c, part, score, k, reason), c.sources)
    chosen.keys.add(summary.key)
    return total


def injected_tokens(addition: str, messages: Sequence[Any], original: Sequence[Any]) -> int:
    """Tokens the assembly adds to the prompt: the addition, or the injected messages."""
    if addition:
        return estimate_tokens(addition)
    return count_message_tokens(list(messages)[: len(messages) - len(original)])


IMPLICIT_REASON = "implicit:"  # how an item of implicit recall's reason starts


def _next_to_drop(items: Sequence[SelectedItem], implicit_leads: bool) -> SelectedItem | None:
    """The item that gives way first when the rendered memory is over budget: retrieved
    items of the channel that does not lead first (the two channels' scores are on
    different scales), the lowest score first."""
    retrieved = [i for i in items if i.part in ("retrieval", "recovery")]
    if retrieved:
        led = [i for i in retrieved if i.reason.startswith(IMPLICIT_REASON) == implicit_leads]
        rest = [i for i in retrieved if i not in led]
        return min(rest or led, key=lambda i: (i.score, i.id))
    elevated = [i for i in items if i.part == "elevated"]
    if elevated:
        return min(elevated, key=lambda i: (i.score, i.id))
    extension = [i for i in items if i.part == "tail" and i.reason == "tail extension"]
    if extension:  # the oldest first, so the tail stays contiguous
        return min(extension, key=lambda i: (i.ts if i.ts is not None else -1, i.id))
    soft = [i for i in items if i.part == "soft"]
    return soft[-1] if soft else None  # the soft prefix shrinks from its end


def finish(  # noqa: PLR0913 - the plan's running state at every exit
    chosen: Chosen,
    ledger: BudgetLedger,
    degraded: Sequence[str],
    original_messages: Sequence[Any],
    cfg: AssemblyConfig,
    plan: TemporalPlan,
    dream: bool,
    recovery: tuple[str, ...],
    t0: float,
    timings: Mapping[str, float] | None = None,
    implicit_leads: bool = False,
) -> AssemblyPlan:
    partition = ledger.partition()
    check_partition(partition, degraded)
    items = tuple(chosen.items)
    messages, addition, estimated = render_output(
        items, original_messages, degraded=degraded, placement=cfg.placement, style=cfg.render
    )
    # The ledger charges item text plus a per-entry envelope but not the section
    # preambles. The rendered memory must still fit the budget, so items give way in
    # reverse precedence (retrieval and recovery, elevated guidance, the tail extension,
    # the soft prefix); when only hard rules and the tail base are left and they still do
    # not fit, that is the degraded case, reported as such.
    while not degraded and injected_tokens(addition, messages, original_messages) > ledger.total:
        weakest = _next_to_drop(items, implicit_leads)
        if weakest is None:
            degraded = [REASON_RENDERED]
        else:
            items = tuple(i for i in items if i is not weakest)
            ledger.refund(weakest.part, weakest.tokens)
            partition = ledger.partition()
        messages, addition, estimated = render_output(
            items, original_messages, degraded=degraded, placement=cfg.placement, style=cfg.render
        )
    times = dict(timings or {})
    times["totalMs"] = (time.perf_counter() - t0) * 1000
    if not math.isfinite(times["totalMs"]):
        times["totalMs"] = 0.0
    return AssemblyPlan(
        selected=items,
        messages=messages,
        system_prompt_addition=addition,
        estimated_tokens=estimated,
        budget=partition,
        degraded=tuple(degraded),
        temporal=plan,
        dream=dream,
        recovery=recovery,
        timings=times,
    )
