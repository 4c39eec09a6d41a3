"""Pure context assembly: :func:`plan_assembly`.

No I/O: the caller (the daemon's ``assemble`` RPC) loads the session's turns, the
authored nodes and the candidate pool from the store, embeds the query once, and
passes hooks for the few lookups that depend on the ranking (neighbour turns, hop
targets, summary expansion, raw-history recovery). The result carries everything the
wire answer needs (:meth:`AssemblyPlan.to_wire`). Steps 1-4 below need neither the query
vector nor the pool: :func:`plan_head` computes them on their own (the daemon does so
while the query is embedded) and :func:`plan_assembly` takes the result.

Steps, in the budget precedence of :mod:`sidecar.assembly.budget`:

1. **Hard** authored rules, all of them.
2. **Tail base**: the last ``m`` session turns (bundle-safe, :mod:`continuity`). If hard +
   base exceed the memory budget ``M`` (or hard exceeds the optional hard reserve) the
   plan is **degraded**: hard + base only, the reasons reported.
3. **Soft** rules: the longest authored-order prefix within ``min(0.3·M, M - hard -
   base)``.
4. **Tail extension** backward within the tail target and what is left, never splitting a
   coupled bundle; the tail is exact (raw text) and chronological.
5. **Elevated** guidance, ranked, within ``min(0.15·M, left)``.
6. **Retrieval** over the pool: the session's turns outside the tail, the caller's
   candidates (raw history of earlier sessions, durable memories, global, authored
   variant, summaries) and dream entries **only** when :func:`is_dream_query`. Ranking is
   :func:`sidecar.assembly.scoring.rank_table` with the query's temporal plan. Then:

   - *neighbour fetch*: the ``neighbors`` hook supplies the adjacent turns (``seq ± 1``)
     of the best turns that are not in the pool, so the context term can see them;
   - *hop expansion*: targets in ``metadata.hop_targets`` of the best
     ``k2`` candidates, resolved by the ``hops`` hook, scored ``eta·parent`` (eta 0.8) and kept
     at ``≥ theta_hop`` of the best score;
   - *greedy fill with diversity*: repeatedly take the candidate maximising ``score -
     nu * top * max cos(selected)`` (nu 0.15; plus a bonus for covering a comparison side
     not yet covered); an item that does not fit is skipped and the fill goes on; nothing
     below ``min_relative_score`` (0.3) of the best score is injected (no filler noise);
     an item whose source turns are already injected (the tail, or another scope: a
     summary covering a selected raw turn, the same turn in ``turns:`` and ``user:``) is
     dropped;
   - *summary expansion*: a summary scoring at least ``expand_ratio`` (0.75) of the best
     score is replaced by its raw turns (``expand`` hook) when they fit in what is left;
     session turns covered by a summary candidate are represented by it (the active
     view after compaction is the frontier of summaries and uncovered turns).
   Dream entries join the pool only for dream questions; nothing else changes for them
   (the reference dropped the tail and all other recall on any mention of "dream").
   History turns of the current session (``session_id``) are ranked with the session
   scope.
7. **Recovery**, when triggered (the session has no turns outside the tail and the pool
   holds no relevant raw turn of an earlier session, the best results are all
   low-confidence summaries, or nothing matches at all): candidates
   from the ``recover`` hook (raw history), ranked alike, fill a reserve
   (``min(max(32, 0.15·left), 256)``) plus whatever retrieval left unused.

``selected`` lists items in precedence order: hard, tail base, soft, tail extension,
elevated, retrieval, recovery (the tail base and extension are each chronological; the
rendered tail is sorted by ``ts``). Every item's ``tokens`` is
:func:`~sidecar.memory.core.tokens.estimate_tokens` of its text plus
``BudgetConfig.entry_overhead_tokens`` (0 by default: the rendering envelope, about 13
tokens per entry plus the section preambles, is reported in ``estimatedTokens`` but not
charged to the memory budget).

Invariants (property-tested): hard rules are always present; the tail is exact and in
order; no record and no source turn appears twice (across parts or scopes); the total
never exceeds ``M`` unless degraded.

Cost: the caller reuses its candidates across calls, so what does not depend on the query
is kept on them (:func:`sidecar.assembly.scoring.features`: source turns, the tail's
``Turn``, the session-scoped copy, a summary's coverage of the newest session turns); the
ranking is columnar (:class:`~sidecar.assembly.scoring.Ranking`), and a scored item is
materialised only for what is injected. The greedy fill's redundancy term reads the rows
the dense channel already stacked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any

import numpy as np

from sidecar.assembly.budget import (
    BudgetConfig,
    BudgetLedger,
    degraded_reasons,
    elevated_budget,
    fit_prefix,
    memory_budget,
    recovery_reserve,
    soft_budget,
    tail_allowance,
)
from sidecar.assembly.candidates import Candidate, features, with_scope
from sidecar.assembly.dream_query import is_dream_query
from sidecar.assembly.explain import implicit_left_out, left_out
from sidecar.assembly.fill import fill, fill_implicit, finish
from sidecar.assembly.implicit import ImplicitPool, Shares, shares
from sidecar.assembly.render import render_addition
from sidecar.assembly.scoring import (
    F32,
    Channels,
    LexicalScorer,
    QueryContext,
    Ranking,
    is_relevant,
    preliminary,
    rank_table,
)
from sidecar.assembly.selection import (
    DEFAULT_ASSEMBLY,
    NO_FILTER,
    AssemblyConfig,
    AssemblyPlan,
    AuthoredNode,
    Chosen,
    ExpandHook,
    HitFilter,
    HopsHook,
    NeighborsHook,
    RecoverHook,
    SelectedItem,
    authored_item,
    candidate_item,
    dedupe,
    reason_text,
)
from sidecar.memory.compaction.continuity import bundle_safe_start, select_recent_tail
from sidecar.memory.core.lexical import BM25Index
from sidecar.memory.core.lexical_index import LexicalIndex
from sidecar.memory.core.temporal import TemporalPlan, plan_temporal
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.memory.core.turns import Turn

# ----------------------------------------------------------------------------- helpers


def _to_turn(c: Candidate) -> Turn:
    """``c`` as a continuity :class:`Turn` (cached on the candidate's features)."""
    f = features(c)
    turn: Turn | None = f.turn
    if turn is None:
        bundle = c.metadata.get("continuity_bundle_id")
        turn = Turn(
            id=c.id,
            role=c.role,
            text=c.text,
            ts=c.ts or 0,
            seq=c.seq or 0,
            bundle_id=bundle if isinstance(bundle, str) else "",
        )
        f.turn = turn
    return turn


def _select_tail(
    as_turns: Sequence[Turn], costs: Sequence[int], cfg: BudgetConfig
) -> tuple[int, int]:
    """``(base_start, base_tokens)``: the bundle-safe base of the last ``m`` turns."""
    if not as_turns or cfg.min_turns <= 0:
        return len(as_turns), 0
    cost_of = {id(t): c for t, c in zip(as_turns, costs, strict=True)}
    split = select_recent_tail(
        as_turns, min_turns=cfg.min_turns, tail_tokens=0, cost=lambda t: cost_of[id(t)]
    )
    return split.start, sum(costs[split.start :])


def _extend_tail(
    as_turns: Sequence[Turn], costs: Sequence[int], base_start: int, allowance: int
) -> int:
    """Start of the tail: extended backward from ``base_start`` within ``allowance``
    (base included), then pulled forward until no coupled bundle is split."""
    used = sum(costs[base_start:])
    start = base_start
    while start > 0 and used + costs[start - 1] <= allowance:
        start -= 1
        used += costs[start]
    while start < base_start:
        safe, _ = bundle_safe_start(as_turns, start)
        if sum(costs[safe:]) <= allowance:
            return safe
        start += 1
    return base_start


# ----------------------------------------------------------------------------- the plan


@dataclass
class PlanHead:
    """Steps 1-4 of a plan (hard rules, the tail base, the soft prefix, the tail
    extension), which depend on neither the query vector nor the retrieval: the daemon
    computes them while the query is embedded (:func:`plan_head`) and hands them to
    :func:`plan_assembly`, which consumes them (one plan per head)."""

    total: int
    ledger: BudgetLedger
    chosen: Chosen
    all_turns: list[Candidate]
    turns: list[Candidate]  # the newest turns, the only ones the tail can take
    start: int  # first tail turn in ``turns``
    reasons: list[str]  # degraded reasons (then nothing else is planned)
    plan: TemporalPlan
    dream: bool
    elapsed_ms: float
    used: bool = False
    # The host's messages as turns, in message order ("present": never recalled again).
    message_ids: tuple[str, ...] = ()
    tail_in_addition: bool = True


def plan_head(  # noqa: PLR0913 - keyword-only planner inputs, each optional
    *,
    query: str,
    token_budget: float,
    memory_fraction: float | None = None,
    session_turns: Sequence[Candidate] = (),
    hard: Sequence[AuthoredNode] = (),
    soft: Sequence[AuthoredNode] = (),
    now_ms: int | None = None,
    config: AssemblyConfig = DEFAULT_ASSEMBLY,
    present: Sequence[Candidate] = (),
    tail_in_addition: bool = True,
) -> PlanHead:
    """Steps 1-4 of :func:`plan_assembly` (arguments as there).

    ``present``: the host's messages as turns, in message order. They are in the host's
    context already, so retrieval never picks them (nor a summary or shard of them).
    ``tail_in_addition``: False when the tail stays in the host's messages; then no tail
    is planned and the whole memory budget serves rules, guidance and retrieval.
    """
    t0 = time.perf_counter()
    bcfg = config.budget
    fraction = bcfg.memory_fraction if memory_fraction is None else memory_fraction
    total = memory_budget(token_budget, fraction)
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    overhead = max(0, bcfg.entry_overhead_tokens)

    def cost(c: Candidate) -> int:
        return c.cost + overhead

    def node_cost(n: AuthoredNode) -> int:
        return n.cost + overhead

    ledger = BudgetLedger(total)
    chosen = Chosen()
    for c in present:
        chosen.sources.update(features(c).sources)

    # 1-2. hard rules and the tail base. Only the newest turns can be in the tail (each
    # costs at least one token), so older ones are never looked at.
    window = max(2 * bcfg.min_turns, bcfg.tail_tokens) + 16
    all_turns = list(session_turns)
    turns = all_turns[-window:]
    as_turns = [_to_turn(t) for t in turns]
    turn_costs = [cost(t) for t in turns]
    hard_cost = sum(node_cost(n) for n in hard)
    if tail_in_addition:
        base_start, base_cost = _select_tail(as_turns, turn_costs, bcfg)
    else:
        base_start, base_cost = len(turns), 0
    reasons = degraded_reasons(total, hard_cost, base_cost, bcfg)
    for n in hard:
        ledger.charge("hard", node_cost(n), force=True)
        chosen.add(authored_item(n, "hard", node_cost(n)))
    for c in turns[base_start:]:
        ledger.charge("tail", cost(c), force=True)  # within the budget unless degraded
        chosen.add(candidate_item(c, "tail", 1.0, cost(c), "tail base"), c.sources)
    dream = bool(query.strip()) and is_dream_query(query)
    plan = plan_temporal(query, now, mention_slack_days=config.mention_slack_days)
    start = base_start
    if not reasons:
        # 3. soft prefix
        soft_fit = fit_prefix(
            [n for n in soft if n.key not in chosen.keys],
            soft_budget(total, hard_cost, base_cost, bcfg),
            node_cost,
        )
        for n in soft_fit.items:
            ledger.charge("soft", node_cost(n))
            chosen.add(authored_item(n, "soft", node_cost(n)))

        # 4. tail extension (the base is already charged)
        allowance = tail_allowance(ledger.remaining, base_cost, bcfg) if tail_in_addition else 0
        start = _extend_tail(as_turns, turn_costs, base_start, allowance)
        for c in turns[start:base_start]:
            ledger.charge("tail", cost(c))
            chosen.add(candidate_item(c, "tail", 1.0, cost(c), "tail extension"), c.sources)
    return PlanHead(
        total=total,
        ledger=ledger,
        chosen=chosen,
        all_turns=all_turns,
        turns=turns,
        start=start,
        reasons=list(reasons),
        plan=plan,
        dream=dream,
        elapsed_ms=(time.perf_counter() - t0) * 1000,
        message_ids=tuple(c.id for c in present),
        tail_in_addition=tail_in_addition,
    )


def plan_assembly(  # noqa: PLR0913 - keyword-only planner inputs, each optional
    *,
    query: str,
    query_vector: F32 | None,
    token_budget: float | None = None,
    memory_fraction: float | None = None,
    session_id: str = "",
    session_turns: Sequence[Candidate] = (),
    hard: Sequence[AuthoredNode] = (),
    soft: Sequence[AuthoredNode] = (),
    head: PlanHead | None = None,
    elevated: Sequence[Candidate] = (),
    candidates: Sequence[Candidate] = (),
    original_messages: Sequence[Any] = (),
    now_ms: int | None = None,
    lexical: BM25Index | LexicalIndex | LexicalScorer | None = None,
    terms_of: Callable[[Candidate], Iterable[str]] | None = None,
    neighbors: NeighborsHook | None = None,
    hops: HopsHook | None = None,
    expand: ExpandHook | None = None,
    recover: RecoverHook | None = None,
    config: AssemblyConfig = DEFAULT_ASSEMBLY,
    implicit: ImplicitPool | None = None,
) -> AssemblyPlan:
    """Plan one ``assemble`` (module doc).

    ``session_turns``: the current session's raw turns in chronological order (kind
    ``turn``). The tail comes from the newest of them; the newest
    ``session_pool_limit`` (64) outside the tail join the retrieval pool with scope
    ``session``, except those a summary candidate covers. For long sessions the caller
    passes older session turns found by the store's search as ``candidates`` with scope
    ``session``. ``hard``/``soft``: authored rules in authored order. ``elevated``:
    guidance shard candidates. ``candidates``: the retrieval pool of the other scopes
    (raw history of earlier sessions, durable, global, authored variant, summaries,
    dream). ``now_ms``: the query's event time (default: the wall clock). The hooks are
    described in the module doc: ``neighbors``, ``hops`` and ``recover`` are called at
    most once, ``expand`` once per summary it expands. ``head``: steps 1-4 computed
    ahead by :func:`plan_head` (then ``token_budget``, ``memory_fraction``,
    ``session_turns``, ``hard`` and ``soft`` are not read); without it, ``token_budget``
    is required. ``implicit``: the implicit-recall channel's candidates
    (:mod:`sidecar.assembly.implicit`); None leaves the budget to the hybrid ranking.
    """
    t0 = time.perf_counter()
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    if head is None:
        if token_budget is None:
            raise TypeError("plan_assembly needs token_budget or a head")
        head = plan_head(
            query=query,
            token_budget=token_budget,
            memory_fraction=memory_fraction,
            session_turns=session_turns,
            hard=hard,
            soft=soft,
            now_ms=now,
            config=config,
        )
        tail_ms = (time.perf_counter() - t0) * 1000
    else:
        tail_ms = head.elapsed_ms  # spent ahead, outside this call
    return _plan_rest(
        _Inputs(query, query_vector, session_id, elevated, candidates, now, config, implicit),
        head,
        list(original_messages),
        _Hooks(lexical, terms_of, neighbors, hops, expand, recover),
        t0,
        tail_ms,
    )


@dataclass(frozen=True, slots=True)
class _Inputs:
    query: str
    query_vector: F32 | None
    session_id: str
    elevated: Sequence[Candidate]
    candidates: Sequence[Candidate]
    now: int
    config: AssemblyConfig
    implicit: ImplicitPool | None = None


@dataclass(frozen=True, slots=True)
class _Hooks:
    lexical: BM25Index | LexicalIndex | LexicalScorer | None
    terms_of: Callable[[Candidate], Iterable[str]] | None
    neighbors: NeighborsHook | None
    hops: HopsHook | None
    expand: ExpandHook | None
    recover: RecoverHook | None


def _plan_rest(
    inp: _Inputs,
    head: PlanHead,
    original_messages: list[Any],
    hooks: _Hooks,
    t0: float,
    tail_ms: float,
) -> AssemblyPlan:
    """Steps 5-9 of :func:`plan_assembly`, after the head (rules and the tail)."""
    query, config = inp.query, inp.config
    bcfg, scfg = config.budget, config.scoring
    lexical, terms_of = hooks.lexical, hooks.terms_of
    overhead = max(0, bcfg.entry_overhead_tokens)

    def cost(c: Candidate) -> int:
        return c.cost + overhead

    if head.used:
        raise ValueError("a PlanHead plans one assembly")
    head.used = True
    ledger, chosen, plan, dream = head.ledger, head.chosen, head.plan, head.dream
    all_turns, turns, start = head.all_turns, head.turns, head.start
    if head.message_ids and head.tail_in_addition:
        # the tail moves from the host's messages into the addition: never both
        tail_ids = {i.id for i in chosen.items if i.part == "tail"}
        original_messages = [
            m
            for m, mid in zip(original_messages, head.message_ids, strict=False)
            if mid not in tail_ids
        ]
    if head.reasons:
        return finish(chosen, ledger, head.reasons, original_messages, config, plan, dream, (), t0)

    t_tail = time.perf_counter()
    qctx = QueryContext.build(query, inp.query_vector, plan=plan, now_ms=inp.now)
    if not query.strip():
        return finish(chosen, ledger, [], original_messages, config, plan, dream, (), t0)

    # 5. elevated guidance
    e_budget = elevated_budget(head.total, ledger.remaining, bcfg)
    if inp.elevated and e_budget > 0:
        _take_elevated(qctx, inp.elevated, e_budget, chosen, ledger, cost, hooks, config)

    # 6. retrieval pool
    # the session outside the tail: the turns no summary candidate stands for (after
    # compaction the active view is the frontier of summaries and uncovered turns)
    older = all_turns[: len(all_turns) - len(turns) + start]
    limit = max(0, config.session_pool_limit)
    newest = [c for c in (older[-limit:] if limit else []) if c.text.strip()]
    summarized = _summarized(inp.candidates, newest)
    pool_in: list[Candidate] = [
        replace_scope(c, "session") for c in newest if summarized.isdisjoint(features(c).sources)
    ]
    pool_in += [
        replace_scope(c, "session")
        if inp.session_id
        and c.session_id == inp.session_id
        and c.kind == "turn"
        and c.scope == "history"
        else c
        for c in inp.candidates
        if dream or c.scope != "dream"
    ]
    known: set[tuple[str, str]] = set()
    pool = dedupe(pool_in, chosen, known)
    channels = Channels.compute(qctx, pool, lexical)
    if hooks.neighbors is not None and pool and config.neighbor_fetch > 0:
        pool, channels = _with_neighbours(
            qctx, pool, channels, known, chosen, hooks.neighbors, lexical, config
        )
    t_pool = time.perf_counter()
    ranked = rank_table(qctx, pool, lexical=lexical, cfg=scfg, terms_of=terms_of, channels=channels)
    t_rank = time.perf_counter()
    if hooks.hops is not None and len(ranked):
        ranked = _with_hops(ranked, hooks.hops, chosen, config)

    # the implicit channel's share and the hybrid ranking's (implicit module doc)
    cosmax = float(ranked.dense.max()) if len(ranked) else -1.0
    split = shares(config.implicit, inp.implicit, cosmax, head.total)

    # 7. recovery trigger and reserve
    triggers = _recovery_triggers(ranked, len(older), config) if split.main != 0 else []
    recovery_pool: Ranking | None = None
    if triggers and hooks.recover is not None:
        known = {features(c).key for c in pool}
        rec = [c for c in dedupe(hooks.recover(), chosen) if features(c).key not in known]
        recovery_pool = rank_table(qctx, rec, lexical=lexical, cfg=scfg, terms_of=terms_of)
        if not len(recovery_pool):
            recovery_pool = None
    reserve = recovery_reserve(ledger.remaining, bcfg) if recovery_pool else 0
    # Section preambles are not charged per item; keep room for them (and the recalled
    # section's own) so retrieval does not overfill what finish must then trim.
    uncharged = 0
    if config.placement == "prompt":
        probe = SelectedItem(part="retrieval", kind="turn", collection="", id="", text="")
        rendered = estimate_tokens(render_addition([*chosen.items, probe], style=config.render))
        uncharged = max(0, rendered - ledger.used - overhead)
    _fill_channels(
        split, inp.implicit, ranked, recovery_pool, reserve, uncharged, chosen, ledger, cost,
        plan, config, hooks,
    )  # fmt: skip
    t_end = time.perf_counter()
    timings = {
        "tailMs": tail_ms,
        "poolMs": (t_pool - t_tail) * 1000,
        "rankMs": (t_rank - t_pool) * 1000,
        "fillMs": (t_end - t_rank) * 1000,
    }
    done = finish(
        chosen,
        ledger,
        [],
        original_messages,
        config,
        plan,
        dream,
        tuple(triggers) if recovery_pool else (),
        t0,
        timings,
        implicit_leads=split.mode == "implicit",
    )
    if not config.explain:
        return done
    considered = left_out(ranked, done.selected, chosen, ledger.remaining, cost, config)
    if inp.implicit is not None:
        considered += implicit_left_out(inp.implicit, split, done.selected, chosen, config)
    return replace(done, considered=considered)


def _fill_channels(  # noqa: PLR0913 - the plan's running state and both channels
    split: Shares,
    implicit: ImplicitPool | None,
    ranked: Ranking,
    recovery_pool: Ranking | None,
    reserve: int,
    uncharged: int,
    chosen: Chosen,
    ledger: BudgetLedger,
    cost: Callable[[Candidate], int],
    plan: TemporalPlan,
    config: AssemblyConfig,
    hooks: _Hooks,
) -> None:
    """Retrieval and recovery in their shares (:func:`~sidecar.assembly.implicit.shares`).
    The channel that leads fills first, so an item both would take belongs to it, and the
    end-of-plan check, which drops the other channel's items first, keeps it."""
    leads = split.mode == "implicit"

    def take_implicit() -> None:
        if split.implicit > 0 and implicit is not None:
            room = max(0, ledger.remaining - reserve - uncharged)
            fill_implicit(
                implicit, min(split.implicit, room), chosen, ledger, cost, config.implicit.depth
            )

    if leads:
        take_implicit()
    held = 0 if leads else split.implicit  # kept for implicit recall after the ranking
    main_left = ledger.remaining - held if split.main is None else split.main
    r_budget = max(0, min(main_left, ledger.remaining - held) - reserve - uncharged)
    spent = ledger.used
    fill(ranked, r_budget, "retrieval", chosen, ledger, cost, plan, config, hooks.expand,
         hooks.terms_of)  # fmt: skip
    main_left -= ledger.used - spent
    if not leads:
        take_implicit()
    if recovery_pool is not None:
        fill(
            recovery_pool,
            max(0, min(main_left, ledger.remaining) - uncharged),
            "recovery",
            chosen,
            ledger,
            cost,
            plan,
            config,
            None,
            hooks.terms_of,
        )


def _take_elevated(
    qctx: QueryContext,
    elevated: Sequence[Candidate],
    budget: int,
    chosen: Chosen,
    ledger: BudgetLedger,
    cost: Callable[[Candidate], int],
    hooks: _Hooks,
    config: AssemblyConfig,
) -> None:
    """Guidance shards that bear on the query, best first, within their budget."""
    ranked = rank_table(
        qctx,
        dedupe(elevated, chosen),
        lexical=hooks.lexical,
        cfg=config.scoring,
        terms_of=hooks.terms_of,
    )
    used = 0
    relevant = ranked.relevant(config.relevance_floor, config.scoring)
    for i, c in enumerate(ranked.candidates):
        if chosen.blocked(c) or not relevant[i]:
            continue
        k = cost(c)
        if used + k <= budget:
            used += k
            ledger.charge("elevated", k)
            s = ranked.item(i)
            chosen.add(
                candidate_item(c, "elevated", s.score, k, reason_text("elevated", s)),
                features(c).sources,
            )


def _with_neighbours(
    qctx: QueryContext,
    pool: list[Candidate],
    channels: Channels,
    known: set[tuple[str, str]],
    chosen: Chosen,
    neighbors: NeighborsHook,
    lexical: BM25Index | LexicalIndex | LexicalScorer | None,
    config: AssemblyConfig,
) -> tuple[list[Candidate], Channels]:
    """The pool with the neighbour turns (the answer to a question) of its best turns."""
    rel = preliminary(channels, config.scoring)
    order = np.argsort(-rel, kind="stable")
    top_turns = list(
        islice((pool[i] for i in order.tolist() if pool[i].kind == "turn"), config.neighbor_fetch)
    )
    extra = [c for c in dedupe(neighbors(top_turns), chosen) if features(c).key not in known]
    if not extra:
        return pool, channels
    return pool + extra, channels.extend(Channels.compute(qctx, extra, lexical))


def replace_scope(c: Candidate, scope: str) -> Candidate:
    """``c`` with ``scope``; the session copy of a candidate is made once and kept with
    it (the caller reuses its candidates across calls)."""
    if c.scope == scope:
        return c
    if scope != "session":
        return replace(c, scope=scope)
    f = features(c)
    if f.session_copy is None:
        f.session_copy = with_scope(c, scope)
    return f.session_copy


def _summarized(
    candidates: Sequence[Candidate], turns: Sequence[Candidate]
) -> set[tuple[str, str]]:
    """The sources of ``turns`` that a summary among ``candidates`` covers.

    A summary covers up to thousands of turns, so each one's sources are intersected with
    those of ``turns`` only, and the answer is kept on the summary's features for the same
    turns (the session's newest turns outside the tail, the same objects from call to call
    until the session grows)."""
    out: set[tuple[str, str]] = set()
    if not turns:
        return out
    key = tuple(turns)
    theirs: frozenset[tuple[str, str]] | None = None
    for c in candidates:
        f = c._features or features(c)
        if not f.is_summary:
            continue
        memo = f.covers
        if memo is None or memo[0] != key:
            if theirs is None:
                theirs = frozenset().union(*[features(t).sources for t in turns])
            memo = (key, f.sources & theirs)
            f.covers = memo
        out |= memo[1]
    return out


def _with_hops(ranked: Ranking, hops: HopsHook, chosen: Chosen, cfg: AssemblyConfig) -> Ranking:
    """Hop expansion merged into the ranking."""
    best: dict[str, float] = {}
    known = {c.id for c in ranked.candidates}
    top_k = max(0, cfg.hop_k)
    for c, score in zip(ranked.candidates[:top_k], ranked.score[:top_k].tolist(), strict=True):
        raw = c.metadata.get("hop_targets")
        targets = (
            [t.strip() for t in raw.split(",")]
            if isinstance(raw, str)
            else [str(t) for t in raw]
            if isinstance(raw, list | tuple)
            else []
        )
        for t in targets:
            if t and t not in known:
                best[t] = max(best.get(t, 0.0), cfg.hop_decay * score)
    if not best:
        return ranked
    top = float(ranked.score[0])
    extra: list[Candidate] = []
    extra_scores: list[float] = []
    seen: set[tuple[str, str]] = {features(c).key for c in ranked.candidates}
    for c in hops(sorted(best)):
        hop = best.get(c.id)
        key = features(c).key
        if hop is None or key in seen or chosen.blocked(c):
            continue
        if hop >= cfg.hop_floor * top:
            seen.add(key)
            extra.append(c)
            extra_scores.append(hop)
    return ranked.with_hops(extra, extra_scores) if extra else ranked


def _recovery_triggers(ranked: Ranking, older_turns: int, cfg: AssemblyConfig) -> list[str]:
    out: list[str] = []
    if older_turns == 0 and not _recalls_history(ranked, cfg):
        out.append("new session")
    top = ranked.candidates[:4]
    if len(top) >= 4 and all(features(c).is_summary for c in top):
        confs = [c.metadata.get("confidence") for c in top]
        mean = sum(float(c) if isinstance(c, int | float) else 0.0 for c in confs) / len(top)
        if mean < cfg.recovery_summary_confidence:
            out.append("weak summaries")
    if not len(ranked) or (
        max(ranked.dense.tolist()) < cfg.recovery_cosine_floor and max(ranked.lexical.tolist()) <= 0
    ):
        out.append("no match")
    return out


def _recalls_history(ranked: Ranking, cfg: AssemblyConfig) -> bool:
    """Whether the ranking already holds a raw turn of an earlier session that bears on
    the query. Then a new session needs no recovery: the caller's pool came from the same
    raw history, and a deeper search ranked on its own scale (its best hit at the top of
    that scale) only took the reserve from better items (docs/memory.md, issue 18)."""
    history = np.array([c.kind == "turn" and c.scope == "history" for c in ranked.candidates])
    if not history.any():
        return False
    if (history & (ranked.dense >= cfg.relevance_floor)).any():  # the usual case, at once
        return True
    return bool((history & ranked.relevant(cfg.relevance_floor, cfg.scoring)).any())


# ------------------------------------------------------------------------------ search


# A hit is the item assembly would select for it in the retrieval part (its wire form,
# ``SearchHitOut``, takes the fields it names).
SearchHit = SelectedItem


def plan_search(  # noqa: PLR0913 - keyword-only planner inputs, each optional
    *,
    query: str,
    query_vector: F32 | None,
    candidates: Sequence[Candidate],
    k: int = 8,
    filters: HitFilter = NO_FILTER,
    now_ms: int | None = None,
    lexical: BM25Index | LexicalIndex | LexicalScorer | None = None,
    terms_of: Callable[[Candidate], Iterable[str]] | None = None,
    neighbors: NeighborsHook | None = None,
    config: AssemblyConfig = DEFAULT_ASSEMBLY,
    dreams: bool | None = None,
) -> list[SearchHit]:
    """The ``search`` RPC's ranking: the same scoring as assembly, the candidates
    ``filters`` passes, one hit per source turn, ``k`` hits best first. Dream entries
    count when ``dreams`` is true (the caller asked for the dream scope by name), and
    when it is None only for dream questions."""
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    plan = plan_temporal(query, now, mention_slack_days=config.mention_slack_days)
    qctx = QueryContext.build(query, query_vector, plan=plan, now_ms=now)
    dream = is_dream_query(query) if dreams is None else dreams

    def ok(c: Candidate) -> bool:
        return filters.passes(c) and (dream or c.scope != "dream")

    pool = dedupe([c for c in candidates if ok(c)], Chosen())
    channels = Channels.compute(qctx, pool, lexical)
    if neighbors is not None and pool and config.neighbor_fetch > 0:
        hook = neighbors

        def allowed_neighbours(turns: Sequence[Candidate]) -> list[Candidate]:
            return [c for c in hook(turns) if ok(c)]

        pool, channels = _with_neighbours(
            qctx, pool, channels, {c.key for c in pool}, Chosen(), allowed_neighbours,
            lexical, config,
        )  # fmt: skip
    ranked = rank_table(
        qctx, pool, lexical=lexical, cfg=config.scoring, terms_of=terms_of, channels=channels
    ).items()
    seen = Chosen()
    hits: list[SearchHit] = []
    for s in ranked:
        c = s.candidate
        if len(hits) >= max(0, k):
            break
        if seen.blocked(c) or not is_relevant(s, config.relevance_floor, config.scoring):
            continue
        hit = candidate_item(c, "retrieval", s.score, c.cost, "")
        seen.add(hit, c.sources)
        hits.append(hit)
    return hits
