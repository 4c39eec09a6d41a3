from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from sidecar.assembly.candidates import Candidate, authority, named_speakers, speaker_of
from sidecar.assembly.scoring import (
    DEFAULT_SCORING,
    Channels,
    QueryContext,
    ScoringConfig,
    as_lexical_scorer,
    dense_scores,
    fuse,
    lexical_scores,
    prior,
    rank_table,
    summary_quality,
)
from sidecar.memory.core.lexical import BM25Index
from sidecar.memory.core.temporal import plan_temporal

DAY = 86_400_000
NOW = 1_700_000_000_000


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def turn(
    i: int,
    text: str,
    vec: np.ndarray | None = None,
    *,
    session: str = "s1",
    scope: str = "history",
    ts: int | None = None,
    **meta: object,
) -> Candidate:
    return Candidate(
        kind="turn",
        collection="turns:ns",
        id=f"t{i}",
        text=text,
        scope=scope,
        session_id=session,
        role="user" if i % 2 == 0 else "assistant",
        ts=ts if ts is not None else NOW - DAY * 30 + i * 1000,
        seq=i,
        vector=vec,
        metadata=meta,
    )


def test_dense_scores_use_given_cosine_or_vector() -> None:
    q = unit(1, 0)
    cands = [
        turn(0, "a", unit(1, 0)),
        turn(1, "b", unit(0, 1)),
        Candidate("memory", "user:ns", "m", "c", dense=0.5),
        Candidate("memory", "user:ns", "n", "d"),
    ]
    assert dense_scores(q, cands).tolist() == pytest.approx([1.0, 0.0, 0.5, 0.0])
    assert dense_scores(None, cands)[0] == 0.0


def test_lexical_scores_with_index_pool_or_given() -> None:
    idx = BM25Index()
    idx.add("t0", "kickboxing class tonight")
    idx.add("t1", "pottery workshop")
    cands = [turn(0, "kickboxing class tonight"), turn(1, "pottery workshop")]
    pool_only = lexical_scores("kickboxing", cands, scorer=None)
    assert pool_only[0] > 0 and pool_only[1] == 0
    with_index = lexical_scores("kickboxing", cands, scorer=as_lexical_scorer(idx))
    assert with_index.tolist() == pytest.approx([idx.score("kickboxing", ["t0"])["t0"], 0.0])
    given = [Candidate("memory", "c", "x", "zzz", lexical=2.5)]
    assert lexical_scores("kickboxing", given).tolist() == [2.5]


def test_fuse_modes() -> None:
    dense = np.array([0.9, 0.5, 0.1])
    lex = np.array([0.0, 4.0, 2.0])
    s = fuse(dense, lex, ScoringConfig(lexical_weight=0.4))
    assert s.tolist() == pytest.approx([0.6, 0.6 * 0.5 + 0.4, 0.4 * 0.5])
    assert fuse(dense, np.zeros(3)).max() <= 1.0
    r = fuse(dense, lex, ScoringConfig(fusion="rrf"))
    assert r.argmax() == 1 and r.max() <= 1.0
    assert fuse(np.zeros(0), np.zeros(0)).size == 0


def test_prior_recency_and_scope() -> None:
    cfg = ScoringConfig()
    fresh_session = turn(0, "x", scope="session", ts=NOW)
    old_global = Candidate("memory", "global", "g", "x", scope="global", ts=NOW - 400 * DAY)
    assert prior(fresh_session, NOW, cfg) == pytest.approx(1.0)
    assert prior(old_global, NOW, cfg) == pytest.approx(0.7 + 0.1 * 0.3, abs=1e-3)
    assert prior(turn(0, "x", ts=None), None, cfg) == pytest.approx(0.7 + 0.2 + 0.06)


def test_summary_quality_and_authority() -> None:
    s = Candidate("summary", "session_summary:s", "sum:1", "x", metadata={"decay_rate": 0.4})
    assert summary_quality(s) == pytest.approx(0.8)
    s2 = Candidate("summary", "c", "sum:2", "x", metadata={"confidence": 0.9})
    assert summary_quality(s2) == pytest.approx(0.95)
    assert summary_quality(turn(0, "x")) == 1.0
    assert authority(Candidate("authored", "authored:variant", "a", "x", scope="authored")) == 1.0
    assert authority(Candidate("memory", "c", "m", "x", metadata={"authority": 0.4})) == 0.4
    assert authority(turn(0, "x")) == 0.0


def test_speakers() -> None:
    assert speaker_of(turn(0, "Melanie: hi there")) == "Melanie"
    assert speaker_of(turn(0, "note: not a name")) == ""
    assert speaker_of(Candidate("turn", "c", "x", "hi", metadata={"speaker": "Jon"})) == "Jon"
    names = ["Melanie", "Caroline", "Jon Snow"]
    assert named_speakers("What did Mel paint?", names) == ["Melanie"]
    assert named_speakers("What did melanie and Caroline do?", names) == ["Melanie", "Caroline"]
    assert named_speakers("Where does Jon live?", names) == ["Jon Snow"]
    assert named_speakers("What did I say?", names) == []


def q(text: str, vec: np.ndarray | None, **kw: object) -> QueryContext:
    return QueryContext.build(text, vec, now_ms=NOW, **kw)  # type: ignore[arg-type]


def test_rank_relevance_neighbours_and_floor() -> None:
    qv = unit(1, 0, 0)
    cands = [
        turn(0, "Do you do any martial arts?", unit(1, 0.2, 0)),
        turn(1, "Yes, I do kickboxing twice a week.", unit(0.2, 1, 0)),
        turn(5, "I went to the bakery.", unit(0.2, 1, 0)),  # same cosine, no matching neighbour
        turn(9, "Completely unrelated", unit(0, 0, 1)),
    ]
    ranked = rank_table(q("martial arts", qv), cands).items()
    ids = [s.candidate.id for s in ranked]
    assert ids[0] == "t0"
    assert ids.index("t1") < ids.index("t5")  # the answer next to the matching question
    assert "t9" not in ids  # orthogonal and no keyword: below the similarity floor
    assert all(a.score >= b.score for a, b in itertools.pairwise(ranked))


def test_rank_speaker_temporal_quality_and_frequency() -> None:
    qv = unit(1, 0)
    base = unit(1, 1)
    may3 = 1_683_072_000_000  # 2023-05-03
    cands = [
        turn(0, "Maria: dinner was lovely", base, ts=may3 - 40 * DAY),
        turn(2, "John: dinner was lovely", base, session="s2", ts=may3 - 40 * DAY),
        turn(4, "Maria: dinner was lovely", base, session="s3", ts=may3 + 3600_000),
    ]
    plan = plan_temporal("Who did Maria have dinner with on May 3, 2023?", NOW)
    ranked = rank_table(
        q("Who did Maria have dinner with on May 3, 2023?", qv, plan=plan), cands
    ).items()
    assert [s.candidate.id for s in ranked] == ["t4", "t0", "t2"]
    assert ranked[0].parts["time"] == 1.0 and ranked[0].parts["speaker"] > 0
    summary = Candidate("summary", "sum", "s", "dinner", vector=base, metadata={"decay_rate": 1.0})
    raw = Candidate("memory", "user:ns", "m", "dinner", vector=base)
    popular = Candidate(
        "memory", "user:ns", "p", "dinner", vector=base, metadata={"access_count": 9}
    )
    # the access-frequency prior is off by default (docs/memory.md, issue 33: it reinforces
    # itself); its weight still works when set
    cfg = replace(DEFAULT_SCORING, frequency_weight=0.1)
    r = {
        s.candidate.id: s.score
        for s in rank_table(q("dinner", qv), [summary, raw, popular], cfg=cfg).items()
    }
    assert r["p"] > r["m"] > r["s"]
    plain = {
        s.candidate.id: s.score
        for s in rank_table(q("dinner", qv), [summary, raw, popular]).items()
    }
    assert plain["p"] == plain["m"] > plain["s"]


def test_rank_is_deterministic_and_uses_channels() -> None:
    qv = unit(1, 0)
    cands = [turn(i, f"word{i % 3} common", unit(1, i / 10)) for i in range(20)]
    ctx = q("common word1", qv)
    a = rank_table(ctx, cands).items()
    b = rank_table(ctx, list(reversed(cands))).items()
    assert [s.candidate.id for s in a] == [s.candidate.id for s in b]
    ch = Channels.compute(ctx, cands)
    c = rank_table(ctx, cands, channels=ch).items()
    assert [s.score for s in a] == pytest.approx([s.score for s in c])
