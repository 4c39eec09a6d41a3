from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.api.wire import assemble_result, search_hit_out
from sidecar.assembly.budget import REASON_HARD_PLUS_TAIL, BudgetConfig
from sidecar.assembly.candidates import Candidate, features
from sidecar.assembly.plan import plan_assembly, plan_head, plan_search
from sidecar.assembly.render import escape_text, repeats_cost
from sidecar.assembly.selection import AssemblyConfig, AssemblyPlan, AuthoredNode, HitFilter
from sidecar.memory.core.analyzer import analyze
from sidecar.memory.core.tokens import estimate_tokens

NOW = 1_700_000_000_000
DAY = 86_400_000
DIMS = 8


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIMS).astype(np.float32)
    return v / np.linalg.norm(v)


QV = vec(0)


def sturn(i: int, text: str | None = None, role: str | None = None, sid: str = "cur") -> Candidate:
    return Candidate(
        kind="turn",
        collection=f"session:{sid}",
        id=f"{sid}-m{i}",
        text=text if text is not None else f"session message number {i} " + "x" * (i % 5 * 8),
        scope="session",
        session_id=sid,
        role=role or ("user" if i % 2 == 0 else "assistant"),
        ts=NOW - 1000 * (100 - i),
        seq=i,
        vector=vec(1000 + i),
    )


def hturn(
    i: int, text: str, *, sid: str = "old", seq: int | None = None, v: int | None = None
) -> Candidate:
    return Candidate(
        kind="turn",
        collection="turns:ns",
        id=f"h{i}",
        text=text,
        scope="history",
        session_id=sid,
        role="user" if i % 2 == 0 else "assistant",
        ts=NOW - 30 * DAY + i * 1000,
        seq=i if seq is None else seq,
        vector=vec(v if v is not None else 2000 + i),
    )


def node(i: int, text: str, tier: int = 1) -> AuthoredNode:
    return AuthoredNode(f"doc#{i:06d}", text, tier)


def plan(**kw: object) -> AssemblyPlan:
    args: dict[str, object] = {
        "query": "what about kickboxing",
        "query_vector": QV,
        "token_budget": 4000,
        "session_id": "cur",
        "now_ms": NOW,
    }
    args.update(kw)
    return plan_assembly(**args)  # type: ignore[arg-type]


def parts(p: AssemblyPlan, part: str) -> list[str]:
    return [s.id for s in p.selected if s.part == part]


def tail_in_order(p: AssemblyPlan) -> list[str]:
    """The tail chronologically: ``selected`` lists it in precedence order (the base,
    then after the soft rules the extension, each chronological)."""
    base = [s.id for s in p.selected if s.part == "tail" and s.reason == "tail base"]
    ext = [s.id for s in p.selected if s.part == "tail" and s.reason == "tail extension"]
    return ext + base


def test_fresh_session_retrieval_under_budget() -> None:
    cands = [hturn(i, f"We talked about kickboxing {i} " + "y" * 40) for i in range(60)]
    p = plan(candidates=cands)
    assert p.budget.total == 1000
    assert 0 < p.budget.used <= 1000
    assert p.budget.retrieval == p.budget.used
    assert all(s.part == "retrieval" for s in p.selected)
    assert p.degraded == ()
    wire = msgspec.to_builtins(assemble_result(p))
    assert set(wire) >= {
        "messages",
        "systemPromptAddition",
        "estimatedTokens",
        "budget",
        "selected",
    }
    first = wire["selected"][0]
    assert set(first) == {
        "kind",
        "collection",
        "id",
        "turnIds",
        "sessionId",
        "role",
        "ts",
        "score",
        "tokens",
        "reason",
    }
    assert first["turnIds"] == [first["id"]]
    assert "<recalled_memories>" in p.system_prompt_addition


def test_order_and_parts_with_everything() -> None:
    session = [sturn(i) for i in range(12)]
    hard = [node(1, "Never push to main.")]
    soft = [node(2, "Prefer small diffs.", 2), node(3, "Write tests first.", 2)]
    elevated = [
        Candidate(
            "guidance",
            "elevated:user:ns",
            "g1",
            "Always run the linter on kickboxing code.",
            scope="elevated",
            vector=QV,
        )
    ]
    cands = [hturn(i, f"kickboxing note {i}", v=0) for i in range(3)]
    p = plan(session_turns=session, hard=hard, soft=soft, elevated=elevated, candidates=cands)
    order = [s.part for s in p.selected]
    assert order[0] == "hard"
    assert order.index("soft") > order.index("tail")
    assert parts(p, "hard") == ["doc#000001"]
    assert parts(p, "soft") == ["doc#000002", "doc#000003"]
    tail = tail_in_order(p)
    assert tail == [t.id for t in session[-len(tail) :]]
    assert len(tail) >= 4
    assert parts(p, "elevated") == ["g1"]
    assert set(parts(p, "retrieval")) >= {"h0", "h1", "h2"}
    b = p.budget
    assert b.used == b.hard + b.tail + b.soft + b.elevated + b.retrieval + b.recovery <= b.total
    assert b.tail <= 128 or len(tail) == 4


@pytest.mark.parametrize("budget", [4000, 2000, 300])  # the last one is degraded
def test_a_head_planned_ahead_gives_the_same_plan(budget: int) -> None:
    session = [sturn(i) for i in range(40)]
    hard = [node(1, "Never push to main. " * 10)]
    soft = [node(2, "Prefer small diffs.", 2), node(3, "Write tests first. " * 20, 2)]
    cands = [hturn(i, f"kickboxing note {i}", v=0) for i in range(3)]
    common: dict[str, object] = {"session_turns": session, "hard": hard, "soft": soft}
    head = plan_head(
        query="what about kickboxing",
        token_budget=budget,
        now_ms=NOW,
        **common,  # type: ignore[arg-type]
    )
    ahead = plan(token_budget=budget, candidates=cands, head=head, **common)
    inline = plan(token_budget=budget, candidates=cands, **common)
    assert ahead.selected == inline.selected
    assert ahead.budget == inline.budget and ahead.degraded == inline.degraded
    assert ahead.system_prompt_addition == inline.system_prompt_addition
    assert bool(ahead.degraded) == (budget == 300)
    if not ahead.degraded:
        assert ahead.timings["tailMs"] == head.elapsed_ms  # spent ahead
    with pytest.raises(ValueError, match="one assembly"):
        plan(token_budget=budget, candidates=cands, head=head, **common)


def test_tail_is_exact_and_session_rest_is_retrievable() -> None:
    session = [sturn(i, f"message {i} about kickboxing" if i == 1 else None) for i in range(30)]
    p = plan(session_turns=session)
    assert 4 <= len(tail_in_order(p)) < 30
    by_id = {s.id: s for s in p.selected}
    tail = [by_id[i] for i in tail_in_order(p)]
    assert [s.text for s in tail] == [t.text for t in session[-len(tail) :]]
    assert "cur-m1" in parts(p, "retrieval")  # older session turn found by retrieval
    assert next(s for s in p.selected if s.id == "cur-m1").scope == "session"


def test_degraded_when_hard_plus_base_exceed_budget() -> None:
    hard = [node(1, "R" * 2800)]  # 700 tokens + a 400-token base > 1000
    session = [sturn(i, "z" * 400) for i in range(6)]
    p = plan(hard=hard, session_turns=session, candidates=[hturn(0, "kickboxing")])
    assert p.degraded == (REASON_HARD_PLUS_TAIL,)
    assert parts(p, "hard") == ["doc#000001"]
    assert parts(p, "tail") == [t.id for t in session[-4:]]
    assert p.budget.used > p.budget.total
    assert p.budget.retrieval == p.budget.soft == 0
    assert p.system_prompt_addition.startswith("<memory_degraded>")
    assert msgspec.to_builtins(assemble_result(p))["degraded"] == [REASON_HARD_PLUS_TAIL]


def test_soft_prefix_is_position_preserving() -> None:
    soft = [node(1, "a" * 800, 2), node(2, "b" * 40, 2), node(3, "c" * 40, 2)]
    p = plan(soft=soft, token_budget=2000)  # M = 500, soft cap 150
    assert parts(p, "soft") == []  # the first does not fit, so no later one is taken
    p = plan(soft=soft[1:], token_budget=2000)
    assert parts(p, "soft") == ["doc#000002", "doc#000003"]


def test_dream_entries_only_for_dream_questions() -> None:
    dream = Candidate(
        "dream", "dream:ns", "d1", "I dreamt of kickboxing on the moon", scope="dream", vector=QV
    )
    normal = plan(candidates=[dream], query="my dream job is kickboxing coach")
    assert "d1" not in parts(normal, "retrieval") and not normal.dream
    asked = plan(candidates=[dream], query="what did I dream about last night?")
    assert asked.dream and "d1" in parts(asked, "retrieval")


def test_same_source_turn_never_twice() -> None:
    session = [sturn(i) for i in range(6)]
    # the last session turn again as a durable memory, and an older one as a raw turn
    dup_tail = Candidate(
        "memory",
        "user:ns",
        "ns:cur-m5",
        session[5].text,
        scope="durable",
        session_id="cur",
        turn_ids=("cur-m5",),
        vector=QV,
    )
    raw1 = Candidate(
        "turn", "turns:ns", "cur-m1", session[1].text, session_id="cur", vector=QV, seq=1
    )
    summary = Candidate(
        "summary",
        "session_summary:cur",
        "sum:1",
        "kickboxing summary",
        session_id="cur",
        turn_ids=("cur-m0", "cur-m1"),
        vector=QV,
        metadata={"confidence": 0.9},
    )
    p = plan(session_turns=session, candidates=[dup_tail, raw1, summary])
    sources = Counter((s.session_id, t) for s in p.selected for t in s.turn_ids)
    assert max(sources.values()) == 1
    assert "ns:cur-m5" not in parts(p, "retrieval")


def test_history_turns_of_the_current_session_rank_as_session() -> None:
    mine = Candidate("turn", "turns:ns", "cur-m1", "kickboxing talk", session_id="cur", vector=QV)
    other = Candidate("turn", "turns:ns", "x-m1", "more kickboxing talk", session_id="x", vector=QV)
    p = plan(candidates=[mine, other])
    scopes = {s.id: s.scope for s in p.selected}
    assert scopes == {"cur-m1": "session", "x-m1": "history"}
    assert p.selected[0].id == "cur-m1"  # the session scope weighs more


def test_summary_expansion_and_hops_and_neighbours() -> None:
    raw = [hturn(i, f"raw turn {i} about kickboxing") for i in range(3)]
    summary = Candidate(
        "summary",
        "session_summary:old",
        "sum:x",
        "kickboxing summary",
        session_id="old",
        turn_ids=tuple(r.id for r in raw),
        vector=QV,
        metadata={"confidence": 0.9},
    )
    calls: list[str] = []

    def expand(sid: str) -> Sequence[Candidate]:
        calls.append(sid)
        return raw

    p = plan(candidates=[summary], expand=expand)
    assert calls == ["sum:x"]
    got = [s for s in p.selected if s.part == "retrieval"]
    assert [s.id for s in got] == ["h0", "h1", "h2"]
    assert all("expanded from summary sum:x" in s.reason for s in got)
    # no room for the raw turns (with the section preamble): the summary itself is injected
    tiny = plan(candidates=[summary], expand=expand, token_budget=320)
    assert parts(tiny, "retrieval") == ["sum:x"]
    assert estimate_tokens(tiny.system_prompt_addition) <= tiny.budget.total
    # a budget smaller than the preamble injects nothing rather than overflowing
    none = plan(candidates=[summary], expand=expand, token_budget=40)
    assert parts(none, "retrieval") == []
    assert none.system_prompt_addition == ""

    parent = Candidate(
        "authored",
        "authored:variant",
        "a#000001",
        "kickboxing rules",
        scope="authored",
        vector=QV,
        metadata={"hop_targets": "a#000002"},
    )
    child = Candidate(
        "authored",
        "authored:variant",
        "a#000002",
        "see also sparring",
        scope="authored",
        vector=vec(77),
    )
    p = plan(candidates=[parent], hops=lambda ids: [child] if "a#000002" in ids else [])
    assert parts(p, "retrieval")[:2] == ["a#000001", "a#000002"]

    question = hturn(10, "Do you do kickboxing?", v=0)
    answer = hturn(11, "Yes, twice a week.", v=5)

    def neighbours(turns: Sequence[Candidate]) -> Sequence[Candidate]:
        return [answer] if any(t.id == "h10" for t in turns) else []

    p = plan(candidates=[question], neighbors=neighbours)
    assert parts(p, "retrieval") == ["h10", "h11"]


def test_a_short_answer_to_a_relevant_question_joins_but_an_acknowledgement_does_not() -> None:
    question = hturn(10, "Do you do kickboxing?", v=0)
    for reply, joins in [
        ("Yes, twice a week.", True),
        ("Sounds good, will do.", False),
        ("Ok thanks!", False),
    ]:
        answer = hturn(11, reply, v=5)
        p = plan(candidates=[question], neighbors=lambda _t, a=answer: [a])
        assert ("h11" in parts(p, "retrieval")) is joins, reply
        # with the daemon's term lookup, the reply's analyzed terms are kept on the
        # candidate for the next call (the daemon reuses its candidates)
        answer = hturn(11, reply, v=5)
        for _ in range(2):
            p = plan(
                candidates=[question],
                neighbors=lambda _t, a=answer: [a],
                terms_of=lambda c: Counter(analyze(c.text)),
            )
            assert ("h11" in parts(p, "retrieval")) is joins, reply
        assert features(answer).terms == frozenset(analyze(reply))
    # after a statement a short reply says too little to ride along
    statement = hturn(10, "I took up kickboxing last spring.", v=0)
    p = plan(candidates=[statement], neighbors=lambda _t: [hturn(11, "Yes, twice.", v=5)])
    assert parts(p, "retrieval") == ["h10"]


def test_recovery_for_new_session_and_weak_summaries() -> None:
    rec = [hturn(50, "recovered kickboxing detail", v=0)]
    p = plan(candidates=[hturn(1, "unrelated words here", v=9)], recover=lambda: rec)
    assert "h50" in parts(p, "recovery")
    assert "new session" in p.recovery
    assert p.budget.recovery > 0 and p.budget.used <= p.budget.total
    session = [sturn(i) for i in range(30)]
    weak = [  # the compacted part of the session: four weak summaries of five turns each
        Candidate(
            "summary",
            "session_summary:cur",
            f"sum:{i}",
            f"kickboxing summary {i}",
            session_id="cur",
            turn_ids=tuple(f"cur-m{5 * i + j}" for j in range(5)),
            vector=QV,
            metadata={"confidence": 0.2},
        )
        for i in range(4)
    ]
    p = plan(session_turns=session, candidates=weak, recover=lambda: rec)
    assert "weak summaries" in p.recovery and "h50" in parts(p, "recovery")
    strong = [hturn(60 + i, "kickboxing match", v=0) for i in range(3)]
    p = plan(session_turns=session, candidates=strong, recover=lambda: rec)
    assert p.recovery == () and p.budget.recovery == 0


def test_a_new_session_whose_pool_recalls_history_needs_no_recovery() -> None:
    """The daemon's pool is the raw history's own top-k: a new session whose pool already
    holds a relevant raw turn of an earlier session does not rank a deeper search on its
    own scale (the 51st hit at the top of that scale took the reserve from better items)."""
    calls: list[int] = []

    def recover() -> list[Candidate]:
        calls.append(1)
        return [hturn(50, "recovered kickboxing detail", v=0)]

    found = hturn(1, "I took up kickboxing last spring", v=0)
    p = plan(candidates=[found, hturn(2, "unrelated words here", v=9)], recover=recover)
    assert p.recovery == () and p.budget.recovery == 0 and calls == []
    assert parts(p, "retrieval") == ["h1"]
    # relevant by a keyword alone (its cosine with the query is negative) counts too
    by_word = hturn(3, "kickboxing again on Sunday", v=9)
    p = plan(candidates=[by_word], recover=recover)
    assert p.recovery == () and calls == [] and parts(p, "retrieval") == ["h3"]
    # a relevant summary, durable memory or session turn is not raw history: recovery runs
    summary = Candidate(
        "summary", "session_summary:x", "sum:x", "kickboxing summary", vector=QV,
        metadata={"confidence": 0.9},
    )  # fmt: skip
    p = plan(candidates=[summary], recover=recover)
    assert "new session" in p.recovery and parts(p, "recovery") == ["h50"]


def test_empty_query_keeps_mandatory_parts_only() -> None:
    session = [sturn(i) for i in range(5)]
    p = plan(
        query="",
        session_turns=session,
        hard=[node(1, "Rule.")],
        candidates=[hturn(0, "kickboxing")],
    )
    assert {s.part for s in p.selected} == {"hard", "tail"}


def test_placement_messages_and_original_messages() -> None:
    original = [{"role": "user", "content": "hi"}]
    p = plan(candidates=[hturn(0, "kickboxing <3")], original_messages=original)
    assert p.messages == original
    assert escape_text("kickboxing <3") in p.system_prompt_addition
    cfg = AssemblyConfig(placement="messages")
    p = plan(candidates=[hturn(0, "kickboxing <3")], original_messages=original, config=cfg)
    assert p.system_prompt_addition == "" and p.messages[-1] == original[0]
    assert len(p.messages) == 2


def test_invalid_budget_raises() -> None:
    with pytest.raises(ValueError):
        plan(token_budget=float("nan"))
    with pytest.raises(TypeError, match="token_budget or a head"):
        plan_assembly(query="what about kickboxing", query_vector=QV)


def test_search_filters_dedupe_and_wire() -> None:
    a = hturn(0, "kickboxing on monday", v=0)
    b = hturn(1, "kickboxing on tuesday", v=0)
    dup = Candidate(
        "memory",
        "user:ns",
        "u:h0",
        a.text,
        scope="durable",
        session_id="old",
        turn_ids=("h0",),
        vector=QV,
    )
    dream = Candidate("dream", "dream:ns", "d1", "kickboxing dream", scope="dream", vector=QV)
    hits = plan_search(
        query="kickboxing", query_vector=QV, candidates=[a, b, dup, dream], now_ms=NOW
    )
    assert sorted(h.id for h in hits) in (["h0", "h1"], ["h1", "u:h0"])
    assert (
        plan_search(
            query="kickboxing",
            query_vector=QV,
            candidates=[a, b],
            filters=HitFilter(role="user"),
            now_ms=NOW,
        )[0].id
        == "h0"
    )
    assert (
        plan_search(
            query="kickboxing",
            query_vector=QV,
            candidates=[a, b],
            k=1,
            filters=HitFilter(since=b.ts or 0),
            now_ms=NOW,
        )[0].id
        == "h1"
    )
    assert (
        plan_search(
            query="kickboxing",
            query_vector=QV,
            candidates=[a, b],
            filters=HitFilter(until=0),
            now_ms=NOW,
        )
        == []
    )
    assert (
        plan_search(
            query="kickboxing",
            query_vector=QV,
            candidates=[a, dream],
            filters=HitFilter(kind="dream"),
            now_ms=NOW,
        )
        == []
    )
    got = plan_search(
        query="what did I dream about?", query_vector=QV, candidates=[dream], now_ms=NOW
    )
    assert [h.id for h in got] == ["d1"]
    assert set(msgspec.to_builtins(search_hit_out(got[0]))) == {
        "kind",
        "collection",
        "id",
        "turnIds",
        "sessionId",
        "role",
        "ts",
        "score",
        "text",
    }


# ----------------------------------------------------------------- property tests

texts = st.text(alphabet=st.sampled_from("abc kickboxing <&> dream"), min_size=1, max_size=120)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(0, 25))
    roles = draw(st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=n, max_size=n))
    session = [sturn(i, draw(texts), roles[i]) for i in range(n)]
    hard = [node(i, draw(texts)) for i in range(draw(st.integers(0, 3)))]
    soft = [node(10 + i, draw(texts), 2) for i in range(draw(st.integers(0, 4)))]
    history = [
        hturn(
            i,
            draw(texts),
            sid=draw(st.sampled_from(["old", "older", "cur"])),
            v=draw(st.integers(0, 5)),
        )
        for i in range(draw(st.integers(0, 30)))
    ]
    dups: list[Candidate] = []
    for c in (
        draw(st.lists(st.sampled_from(session + history), max_size=6)) if session or history else []
    ):
        dups.append(
            Candidate(
                "memory",
                "user:ns",
                f"u:{c.id}",
                c.text,
                scope="durable",
                session_id=c.session_id,
                turn_ids=c.covered,
                vector=c.vector,
            )
        )
    summaries: list[Candidate] = []
    pool = session + history
    for j in range(draw(st.integers(0, 3))):
        covered = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5)) if pool else []
        sid = covered[0].session_id if covered else "cur"
        summaries.append(
            Candidate(
                "summary",
                f"session_summary:{sid}",
                f"sum:{j}",
                draw(texts),
                session_id=sid,
                turn_ids=tuple(dict.fromkeys(c.id for c in covered if c.session_id == sid)),
                vector=vec(j),
                metadata={"confidence": draw(st.floats(0, 1))},
            )
        )
    elevated = [
        Candidate(
            "guidance",
            "elevated:user:ns",
            f"g{i}",
            draw(texts),
            scope="elevated",
            vector=vec(300 + i),
        )
        for i in range(draw(st.integers(0, 3)))
    ]
    return {
        "session_turns": session,
        "hard": hard,
        "soft": soft,
        "candidates": history + dups + summaries,
        "elevated": elevated,
        "token_budget": draw(st.integers(0, 3000)),
        "query": draw(st.sampled_from(["kickboxing", "what did I dream about?", "", "abc"])),
        "overhead": draw(st.sampled_from([0, 5, 15])),  # 15: the daemon's envelope
        "expand": draw(st.booleans()),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_assembly_invariants(sc: dict[str, object]) -> None:
    session: list[Candidate] = sc.pop("session_turns")  # type: ignore[assignment]
    overhead: int = sc.pop("overhead")  # type: ignore[assignment]
    use_expand: bool = sc.pop("expand")  # type: ignore[assignment]
    by_id = {c.id: c for c in sc["candidates"]} | {c.id: c for c in session}  # type: ignore[attr-defined]

    def expand(sid: str) -> list[Candidate]:
        s = by_id[sid]
        return [by_id[t] for t in s.turn_ids if t in by_id and by_id[t].kind == "turn"]

    cfg = AssemblyConfig(budget=BudgetConfig(entry_overhead_tokens=overhead))
    p = plan(session_turns=session, config=cfg, expand=expand if use_expand else None, **sc)
    b = p.budget
    hard: list[AuthoredNode] = sc["hard"]  # type: ignore[assignment]

    # the budget is never exceeded, except in the reported degraded case, and that holds
    # for the rendered memory (section headers included), not only for the tally
    assert b.used == sum(s.tokens for s in p.selected)
    if p.degraded:
        assert (
            b.used > b.total
            or any("reserve" in r for r in p.degraded)
            or "once rendered" in p.degraded[0]
        )
        assert {s.part for s in p.selected} <= {"hard", "tail"}
    else:
        assert b.used <= b.total
        assert estimate_tokens(p.system_prompt_addition) <= b.total
    for part in ("hard", "tail", "soft", "elevated", "retrieval", "recovery"):
        assert getattr(b, part) == sum(s.tokens for s in p.selected if s.part == part)
    for s in p.selected:
        if s.part != "retrieval" or "expanded" not in s.reason:
            # an entry that stands for identical ones is charged its "(said N times)" too
            assert s.tokens == estimate_tokens(s.text) + overhead + repeats_cost(s)
            assert s.repeats == 1 or s.part in ("retrieval", "recovery")

    # hard rules are always present, in authored order, first
    assert [s.id for s in p.selected if s.part == "hard"] == [n.id for n in hard]
    assert all(s.part == "hard" for s in p.selected[: len(hard)])

    # the tail is an exact, in-order suffix of the session with at least min(4, n) turns
    by_key = {s.id: s for s in p.selected if s.part == "tail"}
    tail = [by_key[i] for i in tail_in_order(p)]
    k = len(tail)
    assert k >= min(4, len(session))
    assert [(s.id, s.text) for s in tail] == [(c.id, c.text) for c in session[len(session) - k :]]

    # no item in two parts, no source turn twice
    keys = [(s.collection, s.id) for s in p.selected]
    assert len(keys) == len(set(keys))
    sources = [(s.session_id, t) for s in p.selected for t in s.turn_ids]
    assert len(sources) == len(set(sources))

    # each memory is rendered once, and the host's messages are not duplicated
    assert p.messages == []
    for s in p.selected:
        if s.part == "tail":
            assert f">{escape_text(s.text)}</entry>" in p.system_prompt_addition
