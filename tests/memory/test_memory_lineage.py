from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.memory.compaction.continuity import (
    Draft,
    LadderStep,
    escalation_ladder,
    plan_compaction,
    run_ladder,
)
from sidecar.memory.compaction.lineage import (
    ChildRef,
    LineageError,
    LineageGraph,
    SourceItem,
    build_summary_record,
    coverage_edges,
    plan_condensation,
    reproduce_history,
    summary_id,
    summary_ref,
    turn_ref,
)
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.memory.core.turns import Turn, chronological

SID = "session-1"


def graph_of(n: int) -> LineageGraph:
    return LineageGraph({f"t{i}": (i, i, f"t{i}") for i in range(n)})


# ------------------------------------------------------------------------------ ids


def test_summary_ids_are_deterministic_and_partition_sensitive() -> None:
    a = summary_id(SID, [turn_ref("t0"), turn_ref("t1")])
    assert a == summary_id(SID, [turn_ref("t1"), turn_ref("t0")])  # same set, same id
    assert a.startswith("sum:") and len(a) == 36
    assert a != summary_id(SID, [turn_ref("t0"), turn_ref("t1"), turn_ref("t2")])
    assert a != summary_id("session-2", [turn_ref("t0"), turn_ref("t1")])
    assert a != summary_id(SID, [summary_ref("t0"), turn_ref("t1")])  # kinds are part of it
    with pytest.raises(ValueError):
        summary_id(SID, [])


# ---------------------------------------------------------------------------- graph


def test_frontier_expand_and_depth() -> None:
    g = graph_of(6)
    s1 = g.add_summary("s1", [turn_ref("t1"), turn_ref("t0")])
    assert s1.children == (turn_ref("t0"), turn_ref("t1")) and s1.level == 1
    g.add_summary("s2", [turn_ref("t2"), turn_ref("t3")])
    top = g.add_summary("top", [summary_ref("s2"), summary_ref("s1")])
    assert top.level == 2
    assert g.frontier() == [summary_ref("top"), turn_ref("t4"), turn_ref("t5")]
    assert g.expand("top", max_depth=1) == [summary_ref("s1"), summary_ref("s2")]
    assert g.expand("top", max_depth=2) == [turn_ref(f"t{i}") for i in range(4)]
    assert g.expand("top", max_depth=0) == g.expand("top", max_depth=1)
    assert g.leaves("top") == ["t0", "t1", "t2", "t3"]
    assert reproduce_history(g) == [f"t{i}" for i in range(6)]
    assert g.covered_turns() == frozenset({"t0", "t1", "t2", "t3"})
    assert g.active_summaries() == ["top"]
    assert g.parents(summary_ref("s1")) == ("top",)
    g.validate()


def test_add_summary_errors_and_idempotence() -> None:
    g = graph_of(4)
    g.add_summary("s1", [turn_ref("t0"), turn_ref("t1")])
    assert g.add_summary("s1", [turn_ref("t1"), turn_ref("t0")]).id == "s1"  # idempotent
    with pytest.raises(LineageError, match="other children"):
        g.add_summary("s1", [turn_ref("t2")])
    with pytest.raises(LineageError, match="already covered"):
        g.add_summary("s2", [turn_ref("t1"), turn_ref("t2")])
    with pytest.raises(LineageError, match="unknown turn"):
        g.add_summary("s3", [turn_ref("nope")])
    with pytest.raises(LineageError, match="unknown summary"):
        g.add_summary("s4", [summary_ref("s4")])  # a self-reference cannot be added: no cycles
    with pytest.raises(LineageError, match="duplicate"):
        g.add_summary("s5", [turn_ref("t2"), turn_ref("t2")])
    with pytest.raises(LineageError, match="at least one"):
        g.add_summary("s6", [])
    with pytest.raises(LineageError):
        g.node("missing")
    # Non-strict input (stored data with a shared child) still expands without duplicates.
    g.add_summary("s7", [turn_ref("t1"), turn_ref("t2")], strict=False)
    assert g.leaves("s7") == ["t1", "t2"]
    with pytest.raises(LineageError, match="another key"):
        g.add_turn("t0", (99, 0, "t0"))


def test_condensation_plan() -> None:
    g = graph_of(12)
    for k in range(6):
        g.add_summary(f"s{k}", [turn_ref(f"t{2 * k}"), turn_ref(f"t{2 * k + 1}")])
    assert plan_condensation(g, max_active=6) == []
    groups = plan_condensation(g, max_active=3, fanout=3)
    assert [[r.id for r in grp] for grp in groups] == [["s0", "s1", "s2"], ["s3", "s4", "s5"]]
    # The tail limit keeps summaries that reach into the tail out of the plan.
    limited = plan_condensation(g, max_active=2, fanout=2, before=(8, 8, "t8"))
    assert [[r.id for r in grp] for grp in limited] == [["s0", "s1"], ["s2", "s3"]]
    # An uncovered turn between summaries breaks a run.
    g2 = graph_of(7)
    g2.add_summary("a", [turn_ref("t0"), turn_ref("t1")])
    g2.add_summary("b", [turn_ref("t2"), turn_ref("t3")])
    g2.add_summary("c", [turn_ref("t5"), turn_ref("t6")])
    assert [[r.id for r in grp] for grp in plan_condensation(g2, max_active=1)] == [["a", "b"]]


# -------------------------------------------------------------------------- metadata


def test_summary_record_and_edges() -> None:
    children = [
        SourceItem(turn_ref("t0"), 100, 100, 10, 10, user_id="u1"),
        SourceItem(summary_ref("s9"), 200, 300, 8, 40),
    ]
    rec = build_summary_record(
        SID,
        children,
        text="summary",
        summary_tokens=2,
        method="extractive",
        confidence=0.75,
        generation=3,
        compacted_at=999,
        level=2,
    )
    assert rec.id == summary_id(SID, [turn_ref("t0"), summary_ref("s9")])
    m = rec.metadata
    assert m["decay_rate"] == pytest.approx(0.25)
    assert (m["source_ts_min"], m["source_ts_max"]) == (100, 300)
    assert m["source_ids"] == ["t0", "s9"]
    assert m["continuity_lineage"]["source_turn_ids"] == ["t0"]
    assert m["continuity_lineage"]["parent_summary_ids"] == ["s9"]
    assert (m["input_tokens"], m["original_tokens"], m["summary_tokens"]) == (18, 50, 2)
    assert (m["generation"], m["level"], m["userId"], m["type"]) == (3, 2, "u1", "summary")
    assert "continuity_support_summary_ids" not in m
    with_support = build_summary_record(
        SID, children, text="s", summary_tokens=1, method="onnx-t5", confidence=1.5,
        generation=1, compacted_at=1, support_summary_ids=["p1"], support_tokens=12,
        quality={"nomic_align": 0.9},
    )  # fmt: skip
    sm = with_support.metadata
    assert sm["confidence"] == 1.0 and sm["decay_rate"] == 0.0
    assert sm["continuity_support_summary_ids"] == ["p1"] and sm["continuity_support_tokens"] == 12
    assert sm["continuity_lineage"]["support_summary_ids"] == ["p1"]
    assert sm["nomic_align"] == 0.9
    edges = coverage_edges(SID, rec.id, children, compacted_at=999)
    assert [(e["child_id"], e["child_type"], e["edge_order"]) for e in edges] == [
        ("t0", "turn", 0),
        ("s9", "summary", 1),
    ]
    assert edges[0]["child_collection"] == f"session_raw:{SID}"
    assert edges[1]["child_collection"] == f"session_summary:{SID}"
    assert edges[0]["userId"] == "u1" and "userId" not in edges[1]
    assert len({e["id"] for e in edges}) == 2


# ------------------------------------------------------------ lossless property test


@dataclass
class Session:
    turns: list[Turn] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    graph: LineageGraph = field(default_factory=LineageGraph)
    summary_text: dict[str, str] = field(default_factory=dict)
    generation: int = 0

    def append(self, role: str, text: str, ts: int) -> None:
        seq = len(self.turns)
        turn = Turn(f"m{seq}", role, text, ts=ts, seq=seq)
        self.turns.append(turn)
        self.texts[turn.id] = text
        self.graph.add_turn(turn.id, turn.sort_key)


def toy_primary(texts: Sequence[str], step: LadderStep, prior: str) -> Draft:
    return Draft(f"[{len(texts)} items]", 0.5, "toy")


def toy_extractive(texts: Sequence[str], step: LadderStep, prior: str) -> Draft:
    return Draft(" ".join(texts), 0.4, "extractive")


LADDER = escalation_ladder(primary_is_abstractive=False)


def summarize(session: Session, children: list[ChildRef]) -> None:
    texts = [
        session.texts[c.id] if c.kind == "turn" else session.summary_text[c.id] for c in children
    ]
    out = run_ladder(texts, texts, primary=toy_primary, extractive=toy_extractive, ladder=LADDER)
    if out.draft is None:
        return  # declined: nothing is written
    assert estimate_tokens(out.draft.text) < sum(estimate_tokens(t) for t in texts)
    sid = summary_id(SID, children)
    node = session.graph.add_summary(sid, children)
    session.summary_text[sid] = out.draft.text
    session.generation += 1
    assert node.children == tuple(sorted(children, key=session.graph.first_key))


def check_invariants(session: Session) -> None:
    g = session.graph
    history = [t.id for t in chronological(session.turns)]
    assert reproduce_history(g) == history  # lossless and exact, no duplicates
    assert sorted(g.turns) == sorted(session.texts)  # raw turns are never deleted
    assert all(session.texts[t.id] == t.text for t in session.turns)  # nor changed
    leaves_total = 0
    for ref in g.frontier():
        leaves = g.leaves(ref.id) if ref.kind == "summary" else [ref.id]
        leaves_total += len(leaves)
    assert leaves_total == len(history)  # the frontier partitions the history
    g.validate()
    for s in g.summaries:
        leaves = g.leaves(s)
        assert leaves and leaves == sorted(leaves, key=g.turn_key)
        assert [r.id for r in g.expand(s, max_depth=99)] == leaves
        direct = g.expand(s, max_depth=1)
        assert set(direct) == set(g.node(s).children)
        assert [g.first_key(r) for r in direct] == sorted(g.first_key(r) for r in direct)


ROLES = st.sampled_from(["user", "assistant", "system", "tool"])
APPEND = st.tuples(
    st.just("append"),
    st.lists(st.tuples(ROLES, st.text(min_size=1, max_size=60), st.booleans()), max_size=12),
)
COMPACT = st.tuples(st.just("compact"), st.integers(0, 6), st.integers(0, 120), st.integers(0, 7))
CONDENSE = st.tuples(st.just("condense"), st.integers(1, 4), st.integers(2, 4))
OPS = st.lists(st.one_of(APPEND, COMPACT, CONDENSE), min_size=1, max_size=25)


@settings(max_examples=120, deadline=None)
@given(OPS)
def test_compaction_is_lossless(ops: list[tuple[object, ...]]) -> None:
    session = Session()
    clock = 1000
    for op in ops:
        kind = op[0]
        if kind == "append":
            for role, text, late in op[1]:  # type: ignore[attr-defined]
                clock += 1
                # A "late" message carries an event time in the past (out-of-order ingest).
                session.append(role, text, clock - 500 if late else clock)
        elif kind == "compact":
            _, m, tail, target = op
            turns = chronological(session.turns)
            covered = session.graph.covered_turns()
            plan = plan_compaction(turns, covered, min_turns=m, tail_tokens=tail,  # type: ignore[arg-type]
                                   target_size=target)  # type: ignore[arg-type]  # fmt: skip
            for cluster in plan.clusters:
                assert not any(t.id in covered for t in cluster)  # incremental
                assert all(t not in plan.tail.recent for t in cluster)  # tail untouched
                summarize(session, [turn_ref(t.id) for t in cluster])
        else:
            _, max_active, fanout = op
            for group in plan_condensation(session.graph, max_active=max_active, fanout=fanout):  # type: ignore[arg-type]
                summarize(session, list(group))
        check_invariants(session)
