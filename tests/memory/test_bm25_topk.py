"""The pruned BM25 paths of a large index (MaxScore) give what scoring every document gives."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sidecar.memory.core import bm25_topk, lexical
from sidecar.memory.core.analyzer import analyze_query
from sidecar.memory.core.bm25_topk import TermPostings, score_slots, top_candidates
from sidecar.memory.core.lexical import BM25Index

# a Zipf-like vocabulary: a few words in most documents, many rare ones (names)
COMMON = ["went", "like", "time", "good", "really", "think", "know", "work"]
RARE = [f"name{i}" for i in range(400)]


def _doc(rng: random.Random) -> str:
    words = rng.choices(COMMON, k=rng.randint(1, 6)) + rng.choices(RARE, k=rng.randint(0, 3))
    rng.shuffle(words)
    return " ".join(words)


def _corpus(seed: int, n: int) -> tuple[BM25Index, random.Random]:
    rng = random.Random(seed)
    idx = BM25Index()
    for i in range(n):
        idx.add(f"d{i:05d}", _doc(rng))
    for i in rng.sample(range(n), n // 10):  # dead slots, and re-added documents
        idx.remove(f"d{i:05d}")
    for i in rng.sample(range(n), n // 20):
        idx.add(f"d{i:05d}", _doc(rng))
    return idx, rng


def _queries(rng: random.Random) -> list[str]:
    out = []
    for _ in range(40):
        out.append(" ".join(rng.choices(COMMON, k=rng.randint(0, 3)) + rng.choices(RARE, k=2)))
    out += ["went like time", "name7", "zzzunknown", "went zzzunknown name3 name3"]
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruned_search_and_scores_equal_the_full_scatter(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 10**9)  # MaxScore alone: exact
    idx, rng = _corpus(seed, 3000)
    ids = sorted(idx)
    for q in _queries(rng):
        for k in (1, 5, 50, 5000):
            monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 10**9)
            idx._memo = None
            full = idx.search(q, k)
            monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
            idx._memo = None
            pruned = idx.search(q, k)
            assert [h[0] for h in pruned] == [h[0] for h in full], (q, k)
            assert [h[1] for h in pruned] == [h[1] for h in full], (q, k)
        some = [*rng.sample(ids, 60), "unknown-id"]
        monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 10**9)
        idx._memo = None
        want = idx.score_hits(q, some)
        monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
        idx._memo = None
        assert idx.score_hits(q, some) == want, q


def test_selective_terms_settle_the_top_without_the_common_postings() -> None:
    # "common" is in every document and "rare" in three: the three holders of "rare" beat
    # every other document's bound, so the pool is those three, not the whole index
    n = 2000
    slots_common = np.arange(n, dtype=np.int32)
    slots_rare = np.array([5, 700, 1999], dtype=np.int32)
    common = TermPostings(slots_common, np.full(n, 1.0, np.float32), 0.01, 1.0)
    rare = TermPostings(slots_rare, np.full(3, 1.0, np.float32), 5.0, 1.0)
    pool, scores = top_candidates([common, rare], 3, None)
    assert pool.tolist() == [5, 700, 1999]
    assert np.allclose(scores, 5.01)
    # asking for more than the selective term holds brings the common term's documents in
    pool, _ = top_candidates([common, rare], 4, None)
    assert pool.shape[0] == n


def test_removed_documents_never_enter_the_pool() -> None:
    slots = np.array([1, 2, 3], dtype=np.int32)
    t = TermPostings(slots, np.array([1.0, 2.0, 3.0], np.float32), 1.0, 3.0)
    alive = np.array([True, True, True, False])
    pool, scores = top_candidates([t], 1, alive)
    assert pool.tolist() == [1, 2]
    assert scores.tolist() == [1.0, 2.0]
    got, hits = score_slots([t], np.array([3, 0], dtype=np.int32))
    assert got.tolist() == [3.0, 0.0] and hits.tolist() == [1, 0]


def test_champion_lists_bound_the_pool_and_stay_close_to_the_exact_top(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every query term common: the pool is the terms' champion lists, not the whole index,
    # and the top 20 found there is nearly the exact one.
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 200)
    idx, _ = _corpus(4, 3000)
    overlap, total = 0, 0
    for q in ["went like", "time good really", "think know work went", "work"]:
        monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 10**9)
        idx._memo = None
        full = idx.search(q, 20)
        monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
        idx._memo = None
        terms = idx._term_postings(analyze_query(q, idx.stem, idx.stopwords))
        assert all(t.champions is not None and t.champions.shape[0] == 200 for t in terms)
        pool, _ = bm25_topk.top_candidates(terms, 20, idx._alive)
        assert pool.shape[0] <= 200 * len(terms)
        pruned = idx.search(q, 20)
        overlap += len({h[0] for h in full} & {h[0] for h in pruned})
        total += len(full)
        # the scores of what is returned are exact
        exact = dict(idx.score(q, [h[0] for h in pruned]))
        assert all(abs(exact[i] - s) < 1e-4 for i, s in pruned)
    # uniform weights make this the hard case for champion lists (a realistic corpus: the
    # bench figure); the bound here is what this corpus gives, not a target
    assert overlap / total >= 0.75


def test_champions_of_keeps_the_best_weights_and_bounds_the_rest() -> None:
    slots = np.arange(10, dtype=np.int32)
    weights = np.array([5, 1, 9, 3, 7, 2, 8, 4, 6, 0], dtype=np.float32)
    got = bm25_topk.champions_of(slots, weights, 3)
    assert got is not None
    assert got[0].tolist() == [2, 4, 6] and got[1] == 6.0
    assert bm25_topk.champions_of(slots, weights, 10) is None


def test_weights_kept_beside_the_postings_follow_adds_and_removals() -> None:
    # queried between adds (the weights of a term are extended, not recomputed), across the
    # switch from lists to arrays at 64 postings and an avgdl drift: the same scores as an
    # index built in one go from the same documents
    rng = random.Random(11)
    docs = [(f"d{i:04d}", _doc(rng)) for i in range(400)]
    live = BM25Index()
    for j, (doc_id, text) in enumerate(docs):
        live.add(doc_id, text)
        if j % 37 == 0:
            live.search("went like name3 name7", 10)
    for doc_id, _ in docs[:40]:
        live.remove(doc_id)
    for i in range(60):  # longer documents: the average length drifts past 5 %
        live.add(f"long{i}", " ".join(["went", "time"] * 20 + [f"name{i}"]))
    fresh = BM25Index()
    for doc_id, text in docs[40:]:
        fresh.add(doc_id, text)
    for i in range(60):
        fresh.add(f"long{i}", " ".join(["went", "time"] * 20 + [f"name{i}"]))
    ids = sorted(fresh)
    for q in ["went like name3 name7", "time", "name12 good", "work think"]:
        live._memo = fresh._memo = None
        got, want = live.search(q, 25), fresh.search(q, 25)
        assert [h[0] for h in got] == [h[0] for h in want], q
        assert [h[1] for h in got] == pytest.approx([h[1] for h in want], rel=1e-5), q
        assert live.score_hits(q, ids)[0] == pytest.approx(fresh.score_hits(q, ids)[0], rel=1e-5)


def _postings_with_bounds(
    rng: np.random.Generator, n: int, upto: int
) -> tuple[np.ndarray, np.ndarray, bm25_topk.TermBound, bm25_topk.TermBound]:
    slots = np.sort(rng.choice(n * 3, size=n, replace=False)).astype(np.int32)
    weights = rng.gamma(2.0, 0.5, size=n).astype(np.float32)
    first = bm25_topk.term_bound(slots[:upto], weights[:upto])
    grown = bm25_topk.term_bound(slots, weights, first)
    return slots, weights, first, grown


def test_a_term_bound_extended_by_appended_postings_keeps_what_a_fresh_one_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 100)
    rng = np.random.default_rng(3)
    for upto in (150, 400, 600):
        slots, weights, _, grown = _postings_with_bounds(rng, 700, upto)
        fresh = bm25_topk.term_bound(slots, weights)
        assert grown.upto == 700 and grown.max_weight == pytest.approx(float(weights.max()))
        assert grown.champions is not None and fresh.champions is not None
        assert np.all(np.diff(grown.champions) > 0)  # ascending, no repeats
        # every posting a fresh list keeps is kept; nothing outside weighs above the tail
        assert set(fresh.champions.tolist()) <= set(grown.champions.tolist())
        outside = ~np.isin(slots, grown.champions)
        assert float(weights[outside].max()) <= grown.tail_weight
        assert grown.champions.shape[0] <= 2 * 100


def test_appending_light_postings_reuses_the_champion_list() -> None:
    slots = np.arange(5000, dtype=np.int32)
    weights = np.linspace(1.0, 2.0, 5000).astype(np.float32)[::-1].copy()
    first = bm25_topk.term_bound(slots[:4000], weights[:4000])
    assert first.champions is not None
    # the last thousand weigh less than the tail: no new list, the same array
    grown = bm25_topk.term_bound(slots, weights, first)
    assert grown.champions is first.champions and grown.upto == 5000
    assert bm25_topk.term_bound(slots, weights, grown) is grown


def test_pools_from_extended_bounds_rank_at_least_as_well_as_fresh_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the pool of an extended bound holds the fresh pool, so its exact top k is at least
    # as good, rank by rank
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 60)
    rng = np.random.default_rng(8)
    built = [_postings_with_bounds(rng, 500, int(rng.integers(100, 400))) for _ in range(3)]
    idf = [0.7, 1.1, 0.4]

    def terms(which: int) -> list[TermPostings]:
        return [
            TermPostings(s, w, f, b.max_weight, b.champions, b.tail_weight)
            for (s, w, _, grown), f in zip(built, idf, strict=True)
            for b in [grown if which else bm25_topk.term_bound(s, w)]
        ]

    for k in (5, 20, 80):
        got = []
        for which in (0, 1):
            _, scores = top_candidates(terms(which), k, None)
            got.append(np.sort(scores)[::-1][:k])
        assert np.all(got[1] >= got[0] - 1e-6), k


def test_queries_between_adds_extend_the_champions_instead_of_choosing_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 100)
    monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
    chosen = 0
    real = bm25_topk.champions_of

    def counting(*args: object, **kw: object) -> object:
        nonlocal chosen
        chosen += 1
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_topk, "champions_of", counting)
    idx, rng = _corpus(5, 3000)
    idx.search("went like", 10)
    first = chosen
    for i in range(20):
        idx.add(f"new{i}", _doc(rng))
        idx.search("went like", 10)
    # twenty adds and queries: no term went back to a full choice of its list (at most
    # one refill each, past twice the list's size)
    assert chosen - first <= 2


def test_warm_prepares_every_common_term_of_a_large_index_and_changes_no_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 100)
    monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 10**9)
    idx, rng = _corpus(6, 3000)
    assert idx.warm() == 0 and not idx._bounds  # small index: nothing to do
    monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
    cold, _ = _corpus(6, 3000)
    warmed = idx.warm()
    common = set(idx.posting_counts(100))
    assert warmed == len(common) and set(idx._bounds) == common
    for q in _queries(rng):
        assert idx.search(q, 20) == cold.search(q, 20), q
