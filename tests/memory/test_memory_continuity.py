from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.memory.compaction.continuity import (
    PRIOR_CONTEXT_HEADER,
    Draft,
    LadderStep,
    PriorSummary,
    Route,
    SummarizerRole,
    check_progress,
    cluster_turns,
    coupling,
    escalation_ladder,
    partition,
    plan_compaction,
    protection_decision,
    route_summarizer,
    run_ladder,
    select_prior_context,
    select_recent_tail,
    strict_progress,
)
from sidecar.memory.compaction.sanitize import OPAQUE_MARKER
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.memory.core.turns import Turn


def mk(i: int, role: str = "user", text: str | None = None, bundle: str = "") -> Turn:
    return Turn(
        f"t{i}", role, text if text is not None else "x" * 16, ts=i, seq=i, bundle_id=bundle
    )


def chat(n: int, tokens: int = 50, first: str = "user") -> list[Turn]:
    other = "assistant" if first == "user" else "user"
    return [mk(i, first if i % 2 == 0 else other, "w" * (4 * tokens)) for i in range(n)]


# ------------------------------------------------------------------------------ tail


def test_alternating_chat_is_compactable() -> None:
    turns = chat(20)
    split = select_recent_tail(turns, min_turns=4, tail_tokens=128)
    assert len(split.recent) == 4  # boundary between assistant and user: nothing split
    assert len(split.older) == 16
    shifted = select_recent_tail(chat(20, first="assistant"), min_turns=4, tail_tokens=128)
    assert len(shifted.recent) == 5  # the one request/response pair is kept whole
    assert shifted.couplings == ("request_response",)


def test_min_turns_and_budget() -> None:
    turns = [mk(i, "system") for i in range(6)]  # 4 tokens each, never coupled
    assert [t.id for t in select_recent_tail(turns, min_turns=2, tail_tokens=8).recent] == [
        "t4",
        "t5",
    ]
    mandatory = select_recent_tail(turns, min_turns=3, tail_tokens=1)
    assert len(mandatory.recent) == 3 and mandatory.base_tokens == 12
    extended = select_recent_tail(turns, min_turns=1, tail_tokens=13)
    assert len(extended.recent) == 3 and extended.recent_tokens == 12
    token_only = select_recent_tail(turns, min_turns=0, tail_tokens=8)
    assert len(token_only.recent) == 2
    assert select_recent_tail([], min_turns=4).recent == ()
    everything = select_recent_tail(turns, min_turns=10, tail_tokens=0)
    assert everything.older == () and len(everything.recent) == 6


def test_bundle_id_extends_tail() -> None:
    turns = [mk(0, "system"), mk(1, "system", bundle="b"), mk(2, "system", bundle="b"),
             mk(3, "system", bundle="b"), mk(4, "system")]  # fmt: skip
    split = select_recent_tail(turns, min_turns=2, tail_tokens=0)
    assert [t.id for t in split.recent] == ["t1", "t2", "t3", "t4"]
    assert split.couplings == ("bundle", "bundle")


def test_tool_results_stay_with_their_call() -> None:
    turns = [mk(0, "user"), mk(1, "assistant"), mk(2, "tool"), mk(3, "tool"), mk(4, "assistant")]
    split = select_recent_tail(turns, min_turns=2, tail_tokens=0)
    assert [t.id for t in split.recent] == ["t0", "t1", "t2", "t3", "t4"]
    assert split.couplings == ("tool", "tool", "request_response")
    assert coupling(mk(0, "tool"), mk(1, "assistant")) is None


ROLES = st.sampled_from(["user", "assistant", "system", "tool"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(ROLES, st.integers(0, 40), st.sampled_from(["", "", "", "a", "b"])),
             max_size=30),
    st.integers(0, 6),
    st.integers(0, 200),
)  # fmt: skip
def test_tail_properties(spec: list[tuple[str, int, str]], m: int, budget: int) -> None:
    turns = [mk(i, role, "y" * (4 * size), bundle) for i, (role, size, bundle) in enumerate(spec)]
    split = select_recent_tail(turns, min_turns=m, tail_tokens=budget)
    assert list(split.older) + list(split.recent) == turns
    assert len(split.recent) >= min(m, len(turns))
    assert split.couplings.count("request_response") <= 1
    if split.older and split.recent:
        used = "request_response" in split.couplings
        assert coupling(split.older[-1], split.recent[0], allow_pair=not used) is None
    if not split.couplings and split.base_tokens <= budget:
        assert split.recent_tokens <= budget
    assert split.recent_tokens == sum(estimate_tokens(t.text) for t in split.recent)


# -------------------------------------------------------------------------- clusters


def test_partition_rule() -> None:
    assert [len(r) for r in partition(5, 2)] == [2, 2, 1]
    assert partition(0, 3) == []
    assert [len(r) for r in partition(45, 0)] == [15, 15, 15]  # target 0 → 20
    assert [len(r) for r in partition(4, 2)] == [2, 2]
    turns = [mk(i) for i in range(4)]
    assert [[t.id for t in c] for c in cluster_turns(turns, 2)] == [["t0", "t1"], ["t2", "t3"]]


@given(st.integers(0, 300), st.integers(-3, 50))
def test_partition_properties(n: int, k: int) -> None:
    ranges = partition(n, k)
    assert [i for r in ranges for i in r] == list(range(n))
    if ranges:
        sizes = [len(r) for r in ranges]
        assert max(sizes) - min(sizes) <= 1
        assert max(sizes) <= (k if k > 0 else 20)


def test_plan_compaction_is_incremental() -> None:
    turns = [mk(i, "system", "z" * 40) for i in range(14)]
    plan = plan_compaction(turns, min_turns=4, tail_tokens=0, target_size=4)
    assert len(plan.tail.recent) == 4
    assert [[t.id for t in c] for c in plan.clusters] == [
        ["t0", "t1", "t2", "t3"], ["t4", "t5", "t6"], ["t7", "t8", "t9"]
    ]  # fmt: skip
    covered = {t.id for c in plan.clusters[:2] for t in c}
    again = plan_compaction(turns, covered, min_turns=4, tail_tokens=0, target_size=4)
    assert [[t.id for t in c] for c in again.clusters] == [["t7", "t8", "t9"]]
    gap = plan_compaction(turns, {"t1", "t2", "t3", "t4"}, min_turns=4, tail_tokens=0)
    assert [t.id for t in gap.singletons] == ["t0"]
    assert [[t.id for t in c] for c in gap.clusters] == [[f"t{i}" for i in range(5, 10)]]
    assert gap.clusters_formed == 2


# ---------------------------------------------------------------------- strict progress


def test_strict_progress_one_unit() -> None:
    assert not strict_progress(["alpha", "beta"], "alpha beta")  # 2+1 vs 3
    assert strict_progress(["alpha" * 4, "beta" * 4], "short")
    c = check_progress(["abcd", "abcd"], "abcdefgh")
    assert (c.source_tokens, c.summary_tokens, c.ok, c.delta) == (2, 2, False, 0)


# ---------------------------------------------------------------------------- ladder


class FakeSummarizer:
    def __init__(self, outputs: dict[str, str], fail: bool = False) -> None:
        self.outputs = outputs
        self.fail = fail
        self.calls: list[tuple[str, str]] = []

    def __call__(self, texts: Sequence[str], step: LadderStep, prior: str) -> Draft:
        self.calls.append((step.name, prior))
        if self.fail:
            raise RuntimeError("model exploded")
        return Draft(self.outputs.get(step.name, " ".join(texts)), 0.9, "fake")


def test_ladder_shapes() -> None:
    abstractive = escalation_ladder(primary_is_abstractive=True)
    assert [(s.name, s.summarizer, s.max_output_tokens, s.target_density) for s in abstractive] == [
        ("primary", SummarizerRole.PRIMARY, 64, 0.4),
        ("aggressive", SummarizerRole.PRIMARY, 32, 0.25),
        ("deterministic-fallback", SummarizerRole.EXTRACTIVE, 16, 0.25),
    ]
    assert [s.uses_prior_context for s in abstractive] == [True, True, False]
    extractive = escalation_ladder(primary_is_abstractive=False, max_output_tokens=20)
    assert [s.max_output_tokens for s in extractive] == [20, 16, 16]
    assert not any(s.uses_prior_context for s in extractive)
    assert extractive[-1].bounded and extractive[-1].output_limit(5) == 4


def test_escalation_to_aggressive_then_fallback() -> None:
    sources = ["word " * 20, "more " * 20]  # 50 tokens
    long = "z" * 400
    primary = FakeSummarizer({"primary": long, "aggressive": "short summary"})
    extractive = FakeSummarizer({})
    ladder = escalation_ladder(primary_is_abstractive=True)
    out = run_ladder(sources, sources, primary=primary, extractive=extractive, ladder=ladder,
                     prior="P")  # fmt: skip
    assert out.accepted and out.step is not None and out.step.name == "aggressive"
    assert [a.accepted for a in out.attempts] == [False, True]
    assert primary.calls == [("primary", "P"), ("aggressive", "P")]

    primary2 = FakeSummarizer({"primary": long, "aggressive": long})
    extractive2 = FakeSummarizer({"deterministic-fallback": long})
    out2 = run_ladder(sources, sources, primary=primary2, extractive=extractive2, ladder=ladder)
    assert out2.step is not None and out2.step.name == "deterministic-fallback"
    assert out2.draft is not None and estimate_tokens(out2.draft.text) <= 16
    assert extractive2.calls == [("deterministic-fallback", "")]


def test_primary_failure_falls_back() -> None:
    # A failing seq2seq model costs the normal extractive summary of the same step, not a
    # jump to the truncated fallback.
    sources = ["word " * 20, "more " * 20]
    primary = FakeSummarizer({}, fail=True)
    extractive = FakeSummarizer({"primary": "the normal extractive gist"})
    ladder = escalation_ladder(primary_is_abstractive=True)
    out = run_ladder(
        sources, sources, primary=primary, extractive=extractive, ladder=ladder, prior="P"
    )
    assert out.draft is not None and out.draft.text == "the normal extractive gist"
    assert out.step is not None and out.step.name == "primary"
    assert out.attempts[0].error.startswith("RuntimeError")
    assert len(primary.calls) == 1
    assert extractive.calls == [("primary", "")]  # no prior context for extractive

    # When the extractive primary step does not shrink, the aggressive step runs
    # extractively too (the failed model is not tried again), then the bounded fallback.
    primary2 = FakeSummarizer({}, fail=True)
    long = "z" * 400
    extractive2 = FakeSummarizer(
        {"primary": long, "aggressive": long, "deterministic-fallback": "g"}
    )
    out2 = run_ladder(sources, sources, primary=primary2, extractive=extractive2, ladder=ladder)
    assert out2.step is not None and out2.step.name == "deterministic-fallback"
    assert [c[0] for c in extractive2.calls] == ["primary", "aggressive", "deterministic-fallback"]
    assert len(primary2.calls) == 1


def test_non_shrinking_cluster_is_declined() -> None:
    sources = ["a", "b"]  # 2 tokens: the bounded fallback may emit at most 1
    s = FakeSummarizer({"primary": "a b c d e", "aggressive": "a b c d e"})
    ladder = escalation_ladder(primary_is_abstractive=False)
    out = run_ladder(sources, sources, primary=s, extractive=s, ladder=ladder)
    assert out.accepted  # truncated to one token ("…")
    tiny = run_ladder(["a"], ["a"], primary=s, extractive=s, ladder=ladder)
    assert not tiny.accepted and tiny.draft is None


def test_routing() -> None:
    route, mean = route_summarizer([0.8, 0.7], abstractive_available=True)
    assert route == Route.ABSTRACTIVE and mean == pytest.approx(0.75)
    assert route_summarizer([0.8, 0.7], abstractive_available=False)[0] == Route.EXTRACTIVE
    assert route_summarizer([None, None], abstractive_available=True) == (Route.EXTRACTIVE, 0.0)
    assert route_summarizer([0.9, None], abstractive_available=True)[0] == Route.ABSTRACTIVE
    assert route_summarizer([0.5], abstractive_available=True)[0] == Route.EXTRACTIVE


# ---------------------------------------------------------------------- prior context


def test_prior_context_selection() -> None:
    summaries = [
        PriorSummary("s1", "word " * 8, ts_max=10),  # 10 tokens once trimmed
        PriorSummary("s2", "long " * 80, ts_max=20),  # 100 tokens: never fits 96
        PriorSummary("s3", "mid " * 50, ts_max=30),  # 50 tokens
        PriorSummary("s4", "more " * 40, ts_max=40),  # 50 tokens
        PriorSummary("s5", "late", ts_max=99),  # after the cluster start
        PriorSummary("s6", "x" * 400, ts_max=5),  # an opaque blob: counted sanitized
    ]
    ctx = select_prior_context(summaries, before_ts=50, budget_tokens=96)
    # Newest first: s4 fits, s3 and s2 do not (the walk goes on), s1 fits, s6 is a marker.
    assert ctx.ids == ("s6", "s1", "s4")
    assert ctx.tokens == estimate_tokens(OPAQUE_MARKER) + 10 + 50 <= 96
    assert ctx.text == "\n\n".join([OPAQUE_MARKER, ("word " * 8).strip(), ("more " * 40).strip()])
    assert ctx.prompt.startswith(PRIOR_CONTEXT_HEADER)
    assert select_prior_context(summaries, 50, 0).ids == ()
    assert select_prior_context([], 50).prompt == ""


# ---------------------------------------------------------------------------- guidance


def test_protection_paths() -> None:
    never = "Never use mutexes in the hot path."
    assert protection_decision(never, 0.8).path == "deontic"
    assert not protection_decision(never, 0.1).protected
    assert not protection_decision("", 0.9).protected

    calls: list[str] = []

    def sim(value: float) -> object:
        def f(text: str) -> float:
            calls.append(text)
            return value

        return f

    hinted = "We use Postgres for the event store."
    assert not protection_decision(hinted, 0.5).protected  # no similarity available
    d = protection_decision(hinted, 0.5, similarity=sim(0.8))  # type: ignore[arg-type]
    assert d.protected and d.path == "booster" and d.similarity == pytest.approx(0.8)
    assert not protection_decision(hinted, 0.5, similarity=sim(0.77)).protected  # type: ignore[arg-type]
    calls.clear()
    plain = "The weather was lovely on the trip."
    assert not protection_decision(plain, 0.9, similarity=sim(0.99)).protected  # type: ignore[arg-type]
    assert calls == []  # no surface hint: the similarity is not even computed
    meta = "The design goal is: preserve the exact tail."
    assert not protection_decision(meta, 0.9, similarity=sim(0.5)).protected  # type: ignore[arg-type]
