"""Multi-hop chains (sidecar.assembly.chains): similarity passed on from the best hits."""

from __future__ import annotations

import numpy as np
import pytest

from sidecar.assembly.candidates import Candidate
from sidecar.assembly.chains import candidate_rows, chained_dense
from sidecar.assembly.scoring import QueryContext, ScoringConfig, rank, rank_table

NOW = 1_700_000_000_000


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def turn(i: int, text: str, vec: np.ndarray | None, session: str = "s1") -> Candidate:
    return Candidate(
        kind="turn",
        collection="turns:ns",
        id=f"t{i}",
        text=text,
        scope="history",
        session_id=session,
        role="user",
        ts=NOW - 1000 * i,
        seq=10 * i,  # never neighbours of one another
        vector=vec,
    )


def test_rows_from_the_dense_channel_blocks_or_each_vector() -> None:
    a, b = turn(0, "a", unit(1, 0)), turn(1, "b", unit(0, 1))
    block = np.stack([unit(1, 0), unit(0, 1)])
    mat, has = candidate_rows([a, b], (block,))
    assert mat is block and has.tolist() == [True, True]
    no_vec = turn(2, "c", None)
    mat, has = candidate_rows([a, no_vec, b], ())
    assert has.tolist() == [True, False, True]
    assert mat[1].tolist() == [0.0, 0.0] and mat[2].tolist() == pytest.approx(unit(0, 1).tolist())
    mat, has = candidate_rows([no_vec], ())
    assert mat.shape == (1, 0) and not has.any()


def test_a_turn_near_the_best_hit_gets_its_similarity_passed_on() -> None:
    head, near, far = unit(1, 0, 0), unit(0.8, 0.6, 0), unit(0, 0, 1)
    cands = [turn(0, "head", head), turn(1, "near", near), turn(2, "far", far)]
    dense = np.array([0.6, 0.1, 0.2])
    rel = np.array([1.0, 0.1, 0.2])
    got = chained_dense(dense, rel, cands, (), heads=1, weight=1.25)
    # near: 1.25 * 0.6 * cos(head, near) = 1.25 * 0.6 * 0.8 = 0.6; far is orthogonal;
    # the head reaches itself: lifted by w
    assert got.tolist() == pytest.approx([0.75, 0.6, 0.2])
    # below 1, w discounts: the head keeps its cosine, near gets 0.5 * 0.6 * 0.8
    assert chained_dense(dense, rel, cands, (), heads=1, weight=0.5).tolist() == pytest.approx(
        [0.6, 0.24, 0.2]
    )
    # two heads: each turn takes the better of what they pass on
    got = chained_dense(dense, np.array([1.0, 0.1, 0.9]), cands, (), heads=2, weight=1.0)
    assert got.tolist() == pytest.approx([0.6, 0.48, 0.2])


def test_off_or_nothing_to_pass_on_leaves_the_cosine() -> None:
    cands = [turn(0, "a", unit(1, 0)), turn(1, "b", unit(1, 1)), turn(2, "c", None)]
    dense = np.array([0.5, 0.1, 0.3])
    rel = np.array([0.9, 0.2, 1.0])
    assert chained_dense(dense, rel, cands, (), heads=0, weight=1.3) is dense
    assert chained_dense(dense, rel, cands, (), heads=2, weight=0.0) is dense
    assert chained_dense(np.zeros(0), np.zeros(0), [], (), heads=2, weight=1.3).size == 0
    # the best by relevance has no vector: the next one is the head; c keeps its cosine
    got = chained_dense(dense, rel, cands, (), heads=1, weight=1.0)
    assert got[2] == 0.3 and got[1] == pytest.approx(0.5 * float(unit(1, 0) @ unit(1, 1)))
    # a head with no positive cosine passes nothing on
    neg = np.array([-0.2, -0.5, 0.0])
    assert chained_dense(neg, rel, cands, (), heads=2, weight=1.3).tolist() == neg.tolist()


def test_rank_puts_the_second_hop_above_an_unrelated_turn_and_keeps_the_gate() -> None:
    q = unit(1, 0, 0, 0)
    # the hit about veterans; a second veterans turn that shares no word with the
    # question; an unrelated turn a little closer to the question than the second hop
    hit = turn(0, "veterans rights matter to me", unit(0.6, 0.8, 0, 0))
    hop = turn(1, "the march last week was moving", unit(0.1, 0.95, 0.3, 0), "s2")
    other = turn(2, "the weather is nice today", unit(0.14, 0, 0.99, 0), "s3")
    cands = [hit, hop, other]
    qctx = QueryContext.build("which causes matter?", q, now_ms=NOW)

    def order(cfg: ScoringConfig) -> list[str]:
        return [s.candidate.id for s in rank(qctx, cands, cfg=cfg)]

    assert order(ScoringConfig(chain_weight=0.0)) == ["t0", "t2", "t1"]
    on = ScoringConfig(chain_heads=1, chain_weight=1.3)
    assert order(on) == ["t0", "t1", "t2"]
    by_id = {s.candidate.id: s for s in rank(qctx, cands, cfg=on)}
    assert by_id["t1"].dense == pytest.approx(float(q @ hop.vector))  # its own cosine
    # the relevance gate reads the query's own cosine: a chain never makes noise relevant
    table = rank_table(qctx, cands, cfg=on)
    relevant = dict(
        zip([c.id for c in table.candidates], table.relevant(0.145).tolist(), strict=True)
    )
    assert relevant == {"t0": True, "t1": False, "t2": False}
