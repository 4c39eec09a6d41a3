"""The ranking's caches and vectorised paths give what the plain forms give."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from sidecar.assembly.candidates import Candidate, features, with_scope
from sidecar.assembly.scoring import (
    Channels,
    QueryContext,
    Scored,
    context_scores,
    lexical_scores,
    rank_table,
)
from sidecar.memory.core.lexical import BM25Index
from sidecar.memory.core.lexical_index import LexicalIndex

NOW = 1_700_000_000_000


def _context_reference(
    rel: np.ndarray, candidates: list[Candidate], mu: float = 0.3, rho: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """The neighbour and session terms as a plain loop (the definition)."""
    n = len(candidates)
    neigh, sess = np.zeros(n), np.zeros(n)
    at: dict[tuple[str, int], int] = {}
    best: dict[str, float] = {}
    for i, c in enumerate(candidates):
        if c.kind != "turn" or not c.session_id:
            continue
        if c.seq is not None:
            at[(c.session_id, c.seq)] = i
        best[c.session_id] = max(best.get(c.session_id, 0.0), float(rel[i]))
    for i, c in enumerate(candidates):
        if c.kind != "turn" or not c.session_id:
            continue
        if c.seq is not None:
            p = at.get((c.session_id, c.seq - 1))
            q = at.get((c.session_id, c.seq + 1))
            neigh[i] = max(rel[p] if p is not None else 0.0, rel[q] if q is not None else 0.0)
        sess[i] = best.get(c.session_id, 0.0)
    return mu * neigh, rho * sess


def test_context_scores_match_the_definition() -> None:
    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(0, 30)
        seqs = [None, *range(-2, 6)] if rng.random() < 0.9 else [2**40, -(2**35), None, 1]
        cands = [
            Candidate(
                kind=rng.choice(["turn", "turn", "summary"]),
                collection="c",
                id=str(i),
                text="x",
                session_id=rng.choice(["", "a", "b"]),
                seq=rng.choice(seqs),
            )
            for i in range(n)
        ]
        rel = np.array(
            [rng.choice([0.0, -0.0, 0.5, 1.0, rng.random(), float("nan")]) for _ in range(n)]
        )
        got = context_scores(rel, cands)
        want = _context_reference(rel, cands)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w, equal_nan=True)
            assert np.array_equal(np.signbit(g), np.signbit(w))


def test_features_are_cached_and_follow_replace() -> None:
    c = Candidate(
        kind="turn",
        collection="turns:ns",
        id="t1",
        text="Maria: I moved to Oslo",
        session_id="s",
        vector=np.ones(3, dtype=np.float32),
    )
    f = features(c)
    assert features(c) is f
    assert f.sources == c.sources == frozenset({("s", "t1")})
    assert f.speaker == "Maria" and f.vector is c.vector
    d = dataclasses.replace(c, turn_ids=("x", "y"))
    assert features(d) is not f and d.sources == frozenset({("s", "x"), ("s", "y")})
    # a float64 vector is not cached as a row (converted per call, never copied early)
    assert features(dataclasses.replace(c, vector=np.ones(3))).vector is None


def test_with_scope_is_replace() -> None:
    names = [f.name for f in dataclasses.fields(Candidate) if f.init]
    # with_scope copies these fields one by one: a new field must be added there too
    assert names == [
        "kind",
        "collection",
        "id",
        "text",
        "scope",
        "turn_ids",
        "session_id",
        "role",
        "ts",
        "seq",
        "speaker",
        "vector",
        "dense",
        "lexical",
        "tokens",
        "metadata",
    ]
    c = Candidate(
        kind="turn",
        collection="turns:ns",
        id="t1",
        text="hello",
        scope="authored",
        turn_ids=("a",),
        session_id="s",
        role="user",
        ts=5,
        seq=3,
        speaker="Bo",
        vector=np.ones(2, dtype=np.float32),
        dense=0.5,
        lexical=1.5,
        tokens=7,
        metadata={"authority": 0.4},
    )
    features(c)
    for scope in ("session", "history"):
        got, want = with_scope(c, scope), dataclasses.replace(c, scope=scope)
        assert got == want
        assert got.vector is want.vector and got.metadata is want.metadata
        fg, fw = features(got), features(want)
        for name in ("key", "covered", "sources", "is_summary", "speaker", "decay", "authority"):
            assert getattr(fg, name) == getattr(fw, name), name


def test_score_list_matches_score() -> None:
    idx = LexicalIndex()
    texts = ["red bicycle in the garden", "the garden party", "a bicycle trip", "nothing"]
    for i, t in enumerate(texts):
        idx.add("a", f"d{i}", t)
        idx.add("b", f"d{i}", t + " extra words")
    keys = [("a", "d0"), ("b", "d1"), ("a", "zz"), ("c", "d0"), ("a", "d0")]
    for ids in (keys, keys * 10):  # both BM25 paths (per document and the score array)
        got = idx.score_list("garden bicycle", ids)
        want = idx.score("garden bicycle", ids)
        assert got == [want[k] for k in ids]
    single = BM25Index()
    single.add("x", "garden")
    assert single.score_list("garden", ["x", "y"]) == list(
        single.score("garden", ["x", "y"]).values()
    )


def test_rank_table_items_rows_and_lexical_paths_agree() -> None:
    rng = np.random.default_rng(3)
    words = ["garden", "bicycle", "oslo", "maria", "trip", "party", "red"]
    idx = LexicalIndex()
    cands = []
    for i in range(60):
        text = " ".join(rng.choice(words, size=4))
        coll = "turns:ns" if i % 3 else "user:ns"
        idx.add(coll, f"t{i}", text)
        v = rng.normal(size=8).astype(np.float32)
        cands.append(
            Candidate(
                kind="turn",
                collection=coll,
                id=f"t{i}",
                text=text,
                session_id=f"s{i % 4}",
                seq=i // 4,
                ts=NOW - i * 60_000,
                vector=v / np.linalg.norm(v),
                metadata={"access_count": int(rng.integers(0, 4))},
            )
        )
    q = rng.normal(size=8).astype(np.float32)
    qctx = QueryContext.build("red garden trip with Maria", q / np.linalg.norm(q), now_ms=NOW)

    class Plain:  # a scorer of the protocol only (the dict path)
        def score(self, query: str, keys: object) -> dict[tuple[str, str], float]:
            return idx.score(query, keys)  # type: ignore[arg-type]

    assert np.array_equal(
        lexical_scores(qctx.lexical_query, cands, idx),
        lexical_scores(qctx.lexical_query, cands, Plain()),
    )
    table = rank_table(qctx, cands, lexical=idx)
    assert [table.item(i) for i in range(len(table))] == table.items()
    # the stacked rows are the candidates' vectors, in ranked order
    rows = table.rows(8)
    assert rows is not None
    for i, c in enumerate(table.candidates):
        assert np.array_equal(rows[i], c.vector)
    # channels computed in two parts (the pool, then the neighbours fetched for it): the
    # rows come from both blocks
    ch = Channels.compute(qctx, cands[:30], idx).extend(Channels.compute(qctx, cands[30:], idx))
    split = rank_table(qctx, cands, lexical=idx, channels=ch)
    split_rows = split.rows(8)
    assert split_rows is not None and len(ch.vectors) == 2
    for i, c in enumerate(split.candidates):
        assert np.array_equal(split_rows[i], c.vector)
    # a hop target joins with neutral parts, sorted as a merged list would be
    extra = Candidate(kind="authored", collection="authored:variant", id="n1", text="hop")
    top = split.items()[0].score
    with_hop = split.with_hops([extra], [top])
    want = sorted(
        [*split.items(), Scored(extra, top, hop=top)],
        key=lambda s: (-s.score, s.candidate.collection, s.candidate.id),
    )
    assert with_hop.items() == want
    hop_at = int(np.flatnonzero(with_hop.index < 0)[0])
    assert with_hop.candidates[hop_at] is extra
    hop_rows = with_hop.rows(8)
    assert hop_rows is not None and not hop_rows[hop_at].any()  # left for the caller


def test_score_hits_count_the_distinct_query_terms_of_each_document() -> None:
    idx = LexicalIndex()
    texts = ["red bicycle in the garden", "the garden party", "a bicycle trip", "nothing"]
    for i, t in enumerate(texts):
        idx.add("a", f"d{i}", t)
    idx.add("a", "gone", "garden bicycle")
    idx.remove("a", "gone")  # a dead slot counts nothing
    keys = [("a", "d0"), ("a", "d1"), ("a", "zz"), ("c", "d0"), ("a", "d3"), ("a", "gone")]
    query = "garden bicycle garden trips"
    terms = list(dict.fromkeys(idx.collection("a").analyze(query)))

    def want(key: tuple[str, str]) -> int:
        if key[0] != "a" or key[1] not in idx.collection("a"):
            return -1
        doc = idx.collection("a").doc_terms(key[1])
        return sum(t in doc for t in terms)

    for ids in (keys, keys * 10):  # the per-document path and the score-array path
        scores, hits = idx.score_hits(query, ids)
        assert scores == idx.score_list(query, ids)
        assert hits == [want(k) for k in ids]
    assert hits[:3] == [2, 1, -1]


def test_keyword_overlap_from_the_index_equals_the_terms_path() -> None:
    rng = np.random.default_rng(5)
    words = ["garden", "bicycle", "oslo", "maria", "trip", "party", "red", "blue"]
    idx = LexicalIndex()
    cands = []
    for i in range(80):
        text = " ".join(rng.choice(words, size=5))
        coll = "turns:ns" if i % 3 else "user:ns"
        if i % 7:  # some candidates are not indexed: their terms come from terms_of
            idx.add(coll, f"t{i}", text)
        cands.append(
            Candidate(kind="turn", collection=coll, id=f"t{i}", text=text, ts=NOW - i * 1000)
        )
    qctx = QueryContext.build("red garden trip with Maria in Oslo", None, now_ms=NOW)
    ch = Channels.compute(qctx, cands, idx)
    assert ch.keyword_hits is not None and (ch.keyword_hits < 0).any()

    def terms_of(c: Candidate) -> frozenset[str]:
        return frozenset(BM25Index().analyze(c.text))

    plain = dataclasses.replace(ch, keyword_hits=None)
    for fn in (terms_of, None):
        fast = rank_table(qctx, cands, lexical=idx, channels=ch, terms_of=fn)
        slow = rank_table(qctx, cands, lexical=idx, channels=plain, terms_of=fn)
        assert fast.items() == slow.items()
        assert np.array_equal(fast.parts, slow.parts)
    # keywords that are not the index's query terms: the hits are not used
    other = dataclasses.replace(qctx, keywords=("red",))
    assert Channels.compute(other, cands, idx).keyword_hits is None
