"""The BM25 index's compact storage (bm25_arrays.py): a bulk load builds the same index
as adding each document in turn, and a document's terms read back as analyzed."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from sidecar.memory.core import bm25_arrays, lexical
from sidecar.memory.core.bm25_arrays import ARRAY_MIN, DocTerms, Postings
from sidecar.memory.core.lexical import BM25Index

WORDS = [f"w{i}" for i in range(300)] + ["dog", "cat", "park", "ball"]


def _docs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    # a skewed vocabulary: some terms in hundreds of documents (arrays), most in a few
    return [
        (f"d{i}", " ".join(rng.choice(WORDS[: rng.choice((4, 40, 304))]) for _ in range(12)))
        for i in range(n)
    ]


def _same(a: BM25Index, b: BM25Index, queries: list[str]) -> None:
    assert sorted(a) == sorted(b)
    for doc_id in a:
        assert a.doc_terms(doc_id) == b.doc_terms(doc_id)
    for q in queries:
        assert a.search(q, 20) == b.search(q, 20)
        ids = sorted(a)[:10]
        assert a.score_hits(q, ids) == b.score_hits(q, ids)


def _same_postings(a: BM25Index, b: BM25Index) -> None:
    """Every term's postings, weights and document frequency are the same (made from the
    base of a bulk load or appended one by one)."""
    counts = a.posting_counts()
    assert counts == b.posting_counts()
    for term in counts:
        p, q = a._plist(term), b._plist(term)
        assert p is not None and q is not None
        assert p.n == q.n and (p.lists is None) == (q.lists is None)
        wa, wb = a._weights(term), b._weights(term)
        assert wa is not None and wb is not None
        assert wa[0].tolist() == wb[0].tolist() and wa[1].tobytes() == wb[1].tobytes()
        assert a.df(term) == b.df(term) and a.idf(term) == b.idf(term)
    assert a.avgdl == b.avgdl and a._total_len == b._total_len


def test_a_bulk_load_is_the_same_index_as_one_add_after_another() -> None:
    docs = _docs(600, 1)
    one, bulk = BM25Index(), BM25Index()
    for doc_id, text in docs:
        one.add(doc_id, text)
    bulk.add_bulk((doc_id, Counter(bulk.analyze(text))) for doc_id, text in docs)
    queries = ["dog park", "w1 w2 w3", "cat ball w250", "nothing here"]
    _same(one, bulk, queries)
    _same_postings(one, bulk)
    # replacing documents (and an id given twice: the later version wins), then more
    more = [("d5", "dog dog park"), ("d9", "cat"), ("d5", "ball w7"), ("x1", "w3 dog")]
    for doc_id, text in more:
        one.add(doc_id, text)
    bulk.add_bulk((doc_id, Counter(bulk.analyze(text))) for doc_id, text in more)
    _same(one, bulk, queries)
    assert dict(bulk.doc_terms("d5")) == {"ball": 1, "w7": 1}


def _bulk_and_taken(docs: list[tuple[str, str]]) -> tuple[BM25Index, DocTerms, BM25Index]:
    """An index bulk-loaded with ``docs``, its forward index as a terms file gives it back,
    and an index that took that forward index."""
    bulk = BM25Index()
    bulk.add_bulk((doc_id, Counter(bulk.analyze(text))) for doc_id, text in docs)
    off, tids, tfs = bulk.forward.arrays()
    saved = DocTerms.from_arrays(list(bulk.forward.terms), off, tids, tfs)
    taken = BM25Index()
    taken.take_forward([d for d, _ in docs], saved, None)
    return bulk, saved, taken


def test_an_index_that_takes_a_forward_index_is_the_same_as_its_bulk_load() -> None:
    docs = _docs(600, 2)
    bulk, saved, taken = _bulk_and_taken(docs)
    off, tids, tfs = saved.arrays()
    assert taken.forward is saved  # taken as it is, not copied
    assert taken.slot_map() == {d: i for i, (d, _) in enumerate(docs)}
    queries = ["dog park", "w1 w2 w3", "cat ball w250", "nothing here"]
    _same(bulk, taken, queries)
    _same_postings(bulk, taken)
    for index in (bulk, taken):  # and it goes on as the other: adds, replacements, removals
        index.add_bulk([("d5", Counter(["dog", "park"])), ("new", Counter(["w3"]))])
        index.remove("d9")
    _same(bulk, taken, queries)
    with pytest.raises(ValueError, match="empty index"):
        taken.take_forward(["x"], DocTerms.from_arrays([], off[:2], tids, tfs), None)


def test_a_loaded_forward_index_takes_appends_without_growing() -> None:
    # the arrays read from a terms file get room for the appends after a restart: the
    # first of them writes into it instead of copying the loaded arrays
    bulk, saved, taken = _bulk_and_taken(_docs(600, 2))
    before = [a.__array_interface__["data"][0] for a in (saved._tids, saved._tfs, saved._off)]
    for i in range(20):
        taken.add(f"late{i}", "dog park w3 cat")
    after = [a.__array_interface__["data"][0] for a in (saved._tids, saved._tfs, saved._off)]
    assert after == before
    bulk.add_bulk((f"late{i}", Counter(bulk.analyze("dog park w3 cat"))) for i in range(20))
    _same(bulk, taken, ["dog park", "w3", "cat ball"])
    _same_postings(bulk, taken)


def test_an_array_grown_for_appends_keeps_its_items() -> None:
    arr = np.arange(5, dtype=np.int32)
    out = bm25_arrays.grown(arr, 1 << 22)  # 16 MiB: its own pages, mapped on first write
    assert out.shape == (1 << 22,) and out.dtype == np.int32
    assert out[:5].tolist() == [0, 1, 2, 3, 4]
    docs = DocTerms()  # growing past its first capacity many times: every slot intact
    for i in range(3000):
        docs.append(np.array([2], np.int64), np.array([i, i + 1], np.int32), np.ones(2, np.int32))
    assert [docs.row(i)[0].tolist() for i in (0, 1999, 2999)] == [
        [0, 1],
        [1999, 2000],
        [2999, 3000],
    ]


def test_removals_and_compaction_keep_the_statistics() -> None:
    docs = _docs(3000, 2)
    idx = BM25Index()
    idx.add_bulk((d, Counter(idx.analyze(t))) for d, t in docs)
    for doc_id, _ in docs[:2000]:  # past half dead: compacted
        idx.remove(doc_id)
    fresh = BM25Index()
    for doc_id, text in docs[2000:]:
        fresh.add(doc_id, text)
    assert idx._dead < 1024 + 1000
    assert idx.avgdl == fresh.avgdl
    for q in ["dog park", "w1 w2", "w100 cat"]:
        assert idx.search(q, 15) == fresh.search(q, 15)


def test_doc_terms_are_stored_as_arrays() -> None:
    docs = DocTerms()
    tids, tfs, nterms = docs.extend([{"a": 2, "b": 1}, {}, {"b": 3, "c": 1}])
    assert tids.tolist() == [0, 1, 1, 2] and tfs.tolist() == [2, 1, 3, 1]
    assert nterms.tolist() == [2, 0, 2]
    assert [docs.get(s) for s in range(3)] == [{"a": 2, "b": 1}, {}, {"b": 3, "c": 1}]
    assert len(docs) == 3 and docs.postings == 4
    many = [{f"t{i}": 1} for i in range(5000)]  # grows past the first allocation
    docs.extend(many)
    assert docs.get(3 + 4999) == {"t4999": 1}


def test_postings_extend_is_append_in_turn() -> None:
    for k in (3, ARRAY_MIN - 1, ARRAY_MIN, 200):
        a, b = Postings(), Postings()
        slots = np.arange(0, 2 * k, 2, dtype=np.int32)
        tfs = (slots % 5 + 1).astype(np.int32)
        for s, f in zip(slots.tolist(), tfs.tolist(), strict=True):
            a.append(s, f)
        b.extend(slots[: k // 2], tfs[: k // 2])
        b.extend(slots[k // 2 :], tfs[k // 2 :])
        dl = np.ones(2 * k, dtype=np.float32)
        wa, wb = a.weighed(0, dl, 1.0, 1.2, 0.75), b.weighed(0, dl, 1.0, 1.2, 0.75)
        assert a.n == b.n == k
        assert wa[0].tolist() == wb[0].tolist() and wa[1].tolist() == wb[1].tolist()


def test_the_size_estimate_grows_with_the_postings() -> None:
    idx = lexical.BM25Index()
    empty = idx.nbytes
    idx.add_bulk((d, Counter(idx.analyze(t))) for d, t in _docs(500, 3))
    assert idx.nbytes > empty + 12 * 500


def test_terms_copied_from_a_twin_index_are_the_analyzed_terms() -> None:
    docs = _docs(400, 4)
    twin = BM25Index()
    twin.add("other", "zebra w9 w9 park")  # a vocabulary in another order than ours
    for doc_id, text in docs:
        twin.add(doc_id, text)
    analyzed, copied = BM25Index(), BM25Index()
    analyzed.add("mine", "kayak dog")
    copied.add("mine", "kayak dog")
    mixed: list[tuple[str, Counter[str] | int]] = []
    for j, (doc_id, text) in enumerate(docs):
        analyzed.add(doc_id, text)
        slot = twin.slot(doc_id)
        assert slot is not None
        # every third analyzed here, the others copied from the twin, interleaved
        mixed.append((doc_id, Counter(copied.analyze(text)) if j % 3 == 0 else slot))
    copied.add_bulk(mixed, twin)
    _same(analyzed, copied, ["dog park", "w1 w2 w3", "kayak w9", "zebra"])
    assert copied.avgdl == analyzed.avgdl
