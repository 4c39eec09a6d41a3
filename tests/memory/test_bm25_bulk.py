"""A view's load builds the BM25 index as arrays (view_terms.index_texts,
BM25Index.add_arrays: saved terms, a twin's terms and analyzed texts in one flat CSR,
the postings CSR by term): the index answers exactly as one built by ``add`` of each
document in turn, through later adds, removals, re-adds and compaction."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from sidecar.assembly import view_terms
from sidecar.memory.core import bm25_topk, lexical
from sidecar.memory.core.bm25_arrays import TermGroups, count_terms, doc_lengths, stable_order
from sidecar.memory.core.lexical import BM25Index
from sidecar.store.types import CollectionState

WORDS = [f"w{i}" for i in range(400)] + [
    "Dog's",
    "cats",
    "running",
    "parks",
    "the",
    "I've",
    "don`t",
    "Caroline\u2019s",
    "naïve",
    "café",
    "東京タワー",
    "STRASSE",
    "straße",
    "x",
    "7",
    "a_b",
    "e-mail",
    "İstanbul",
    "ΣΊΣΥΦΟΣ",
]
QUERIES = ["dog park", "w1 w2 w3", "cat run w250", "naïve café", "東京タワー", "7 strasse", "zz"]


def _texts(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.choice((0, 1, 3, 12, 40))  # empty and stop-word-only texts too
        vocab = WORDS[: rng.choice((6, 60, len(WORDS)))]
        out.append((f"d{i}", " ".join(rng.choice(vocab) for _ in range(k))))
    return out


def _one_by_one(docs: list[tuple[str, str]]) -> BM25Index:
    idx = BM25Index()
    for doc_id, text in docs:
        idx.add(doc_id, text)
    return idx


def same(a: BM25Index, b: BM25Index) -> None:
    """The same documents, terms, statistics, postings (made from a bulk load's base or
    appended), weights, scores and rankings."""
    assert sorted(a) == sorted(b)
    assert a.avgdl == b.avgdl and a._total_len == b._total_len and a._dead == b._dead
    assert a._docs.postings == b._docs.postings
    for doc_id in a:
        assert a.doc_terms(doc_id) == b.doc_terms(doc_id)
        assert list(a.doc_terms(doc_id)) == list(b.doc_terms(doc_id))  # first-seen order
    counts = a.posting_counts()
    assert counts == b.posting_counts()
    for term in counts:
        p, q = a._plist(term), b._plist(term)
        assert p is not None and q is not None
        assert (p.lists is None) == (q.lists is None)
        wa, wb = a._weights(term), b._weights(term)
        assert wa is not None and wb is not None
        assert wa[0].tolist() == wb[0].tolist() and wa[1].tobytes() == wb[1].tobytes()
        assert a.df(term) == b.df(term) and a.idf(term) == b.idf(term)
    ids = sorted(a)[:40]
    for q in QUERIES:
        assert a.search(q, 15) == b.search(q, 15)
        assert a.score_hits(q, ids) == b.score_hits(q, ids)
        assert a.score_hits(q, ids[:5]) == b.score_hits(q, ids[:5])  # the per-id path


def _saved(docs: list[tuple[str, str]]) -> view_terms.SavedTerms:
    """The saved terms of ``docs`` as a file holds them (encoded, decoded)."""
    idx = _one_by_one(docs)
    snap = view_terms.snapshot(
        "c", CollectionState(cid=1), idx, [d for d, _ in docs], [t for _, t in docs]
    )
    assert snap is not None
    header, pieces = view_terms.encode(snap)
    body = b"".join(pieces)
    got = view_terms.decode(header, body)
    assert got is not None
    return got


@pytest.mark.parametrize("part", [1, 7, 16_384])
def test_a_load_from_saved_terms_a_twin_and_analysis_is_the_index_of_adds(part: int) -> None:
    docs = _texts(900, 1)
    # saved: the first 500 (of which a few changed since), a twin holding others
    saved = _saved(docs[:500])
    changed = {f"d{i}" for i in (3, 77, 420)}
    docs = [(d, t + " w399 parks" if d in changed else t) for d, t in docs]
    twin_docs = dict(docs[300:700])
    twin_docs["d650"] = "a text the view does not have"
    twin = _one_by_one(list(twin_docs.items()))
    rng = random.Random(2)
    rng.shuffle(docs)  # not the file's order
    bulk = BM25Index()
    done = view_terms.index_texts(bulk, iter(docs), saved, twin, twin_docs.get, part)
    # not saved: d500-d899 and the 3 changed; of those the twin has d500-d699 but d650, and d420
    assert done.analyzed == 400 + 3 - 199 - 1
    assert done.unsaved == 400 + 3  # the twin's copies are not this view's file
    assert bulk._base is not saved.groups  # not the file's order: sorted anew
    same(_one_by_one(docs), bulk)


def test_a_restart_in_the_file_s_order_takes_every_record_from_it() -> None:
    docs = _texts(600, 3)
    saved = _saved(docs[:550])  # 50 written since the save
    bulk = BM25Index()
    assert view_terms.index_texts(bulk, iter(docs), saved, None, lambda _r: None, 64) == (50, 50)
    same(_one_by_one(docs), bulk)


def test_a_restart_of_the_whole_file_takes_its_postings_by_term_unsorted() -> None:
    docs = _texts(700, 8)
    saved = _saved(docs)
    bulk = BM25Index()
    assert view_terms.index_texts(bulk, iter(docs), saved, None, lambda _r: None, 64) == (0, 0)
    assert saved.groups is not None and bulk._base is saved.groups
    one = _one_by_one(docs)
    same(one, bulk)
    for idx in (one, bulk):  # appends after it, and removals, as usual
        for doc_id, text in _texts(50, 9):
            idx.add(f"n-{doc_id}", text)
        for doc_id in [d for d, _ in docs[::3]]:
            idx.remove(doc_id)
    same(one, bulk)


def test_a_version_1_file_is_read_and_its_postings_sorted() -> None:
    docs = _texts(300, 10)
    idx = _one_by_one(docs)
    snap = view_terms.snapshot(
        "c", CollectionState(cid=1), idx, [d for d, _ in docs], [t for _, t in docs]
    )
    assert snap is not None
    header, pieces = view_terms.encode(snap)
    body = b"".join(pieces)
    sizes = header["sections"]
    assert isinstance(sizes, list)
    old = {**header, "version": 1, "sections": sizes[:8]}  # what version 1 wrote
    saved = view_terms.decode(old, body[: sum(sizes[:8])])
    assert saved is not None and saved.groups is None
    bulk = BM25Index()
    assert view_terms.index_texts(bulk, iter(docs), saved, None, lambda _r: None, 64) == (0, 300)
    same(_one_by_one(docs), bulk)


def test_postings_by_term_that_do_not_fit_the_file_refuse_it() -> None:
    docs = _texts(200, 11)
    snap = view_terms.snapshot(
        "c", CollectionState(cid=1), _one_by_one(docs), [d for d, _ in docs], [t for _, t in docs]
    )
    assert snap is not None
    header, pieces = view_terms.encode(snap)
    body = b"".join(pieces)
    sizes = header["sections"]
    assert isinstance(sizes, list)
    at = sum(sizes[:9])  # the first slot of the postings by term: past the last document
    bad = body[:at] + np.int32(200).tobytes() + body[at + 4 :]
    assert view_terms.decode(header, bad) is None
    assert view_terms.decode(header, body) is not None


def test_document_lengths_are_the_sums_of_their_frequencies() -> None:
    rng = np.random.default_rng(12)
    nterms = rng.choice([0, 0, 1, 5], 400).astype(np.int64)
    nterms[-3:] = 0  # empty documents at the end too
    tfs = rng.integers(1, 9, int(nterms.sum())).astype(np.int32)
    ends = np.cumsum(nterms)
    want = [int(tfs[e - k : e].sum()) for e, k in zip(ends.tolist(), nterms.tolist(), strict=True)]
    assert doc_lengths(nterms, tfs).tolist() == want
    assert doc_lengths(np.zeros(3, dtype=np.int64), tfs[:0]).tolist() == [0, 0, 0]


def test_adds_removals_re_adds_and_compaction_after_a_bulk_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = _texts(1500, 4)
    one = _one_by_one(docs)
    bulk = BM25Index()
    view_terms.index_texts(bulk, iter(docs), _saved(docs[:700]), None, lambda _r: None, 500)
    same(one, bulk)
    rng = random.Random(5)
    for step in range(4):
        gone = rng.sample(sorted(one), 300)
        for doc_id in gone:
            assert one.remove(doc_id) == bulk.remove(doc_id)
        more = _texts(200, 10 + step)
        more = [(f"s{step}-{d}", t) for d, t in more] + [(gone[0], "w1 dog dog")]
        for doc_id, text in more:  # appended one by one onto the bulk load's postings
            one.add(doc_id, text)
            bulk.add(doc_id, text)
        same(one, bulk)
    # enough removals to compact both, then a second bulk load into a non-empty index
    for doc_id in sorted(one)[: len(one) - 200]:
        one.remove(doc_id)
        bulk.remove(doc_id)
    assert bulk._dead < 1024 + 200
    extra = _texts(300, 99)
    extra = [(f"x-{d}", t) for d, t in extra] + [("x-d1", "cat cats"), (sorted(one)[0], "7")]
    for doc_id, text in extra:
        one.add(doc_id, text)
    view_terms.index_texts(bulk, iter(extra), None, None, lambda _r: None, 100)
    same(one, bulk)
    # the large-index paths (pruned search, champion lists, warm) agree too
    monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 8)
    assert one.warm() == bulk.warm() > 0
    assert set(one._bounds) == set(bulk._bounds)
    for term, bound in one._bounds.items():
        other = bulk._bounds[term]
        assert bound.max_weight == other.max_weight and bound.tail_weight == other.tail_weight
        assert (bound.champions is None) == (other.champions is None)
        if bound.champions is not None:
            assert other.champions is not None
            assert bound.champions.tolist() == other.champions.tolist()
    same(one, bulk)


def test_an_id_given_twice_keeps_its_later_version() -> None:
    docs = [("a", "dog park"), ("b", "cat"), ("a", "ball w7 w7"), ("c", "dog"), ("b", "")]
    bulk = BM25Index()
    bulk.add("b", "old text for b")
    view_terms.index_texts(bulk, iter(docs), None, None, lambda _r: None, 2)
    one = BM25Index()
    one.add("b", "old text for b")
    for doc_id, text in docs:
        one.add(doc_id, text)
    same(one, bulk)
    assert dict(bulk.doc_terms("a")) == {"ball": 1, "w7": 2}


def test_counts_and_order_match_the_counters_and_the_sort() -> None:
    rng = np.random.default_rng(6)
    for vocab in (3, 70_000, 200_000):
        keys = rng.integers(0, vocab, 5000).astype(np.int32)
        assert stable_order(keys).tolist() == np.argsort(keys, kind="stable").tolist()
    docs = [[int(t) for t in rng.integers(0, 50, rng.integers(0, 20))] for _ in range(300)]
    lens = np.array([len(d) for d in docs], dtype=np.int64)
    flat = np.array([t for d in docs for t in d], dtype=np.int32)
    counts, tids, tfs = count_terms(lens, flat, 50)
    at = 0
    for d, k in zip(docs, counts.tolist(), strict=True):
        assert list(Counter(d).items()) == list(
            zip(tids[at : at + k].tolist(), tfs[at : at + k].tolist(), strict=True)
        )
        at += k


def test_digests_in_c_are_the_digests_of_each_text() -> None:
    for texts in (["", "a", "é東", "x" * 5000], ["ok", "lone \ud800 surrogate"]):
        want = [view_terms.text_digest(t) for t in texts]
        assert view_terms.text_digests(texts).tolist() == want


def test_a_restart_in_the_file_s_order_decodes_no_id_one_by_one() -> None:
    docs = _texts(300, 13)
    saved = _saved(docs[:250])
    bulk = BM25Index()
    assert view_terms.index_texts(bulk, iter(docs), saved, None, lambda _r: None, 64) == (50, 50)
    assert "ids" not in saved.__dict__ and "slots" not in saved.__dict__  # never built
    same(_one_by_one(docs), bulk)


@pytest.mark.parametrize(
    ("saved_ids", "rids", "leads"),
    [
        (["ab", "c"], ["ab", "c", "d"], True),
        (["ab", "c"], ["a", "bc", "d"], False),  # the same characters, other ids
        (["ab", "c"], ["c", "ab"], False),
        (["é1", "ü2"], ["é1", "ü2", "x"], True),  # not ASCII: compared id by id
        (["é1", "ü2"], ["ü2", "é1"], False),
        (["ab", "c"], ["ab"], False),  # fewer records than the file
        ([], ["a"], True),
    ],
)
def test_the_file_s_order_is_recognised_exactly(
    saved_ids: list[str], rids: list[str], leads: bool
) -> None:
    docs = [(rid, f"text of {rid}") for rid in saved_ids]
    saved = _saved(docs) if docs else None
    if saved is None:  # an empty file: nothing to lead with
        idx = BM25Index()
        snap = view_terms.snapshot("c", CollectionState(cid=1), idx, [], [])
        assert snap is not None
        header, pieces = view_terms.encode(snap)
        saved = view_terms.decode(header, b"".join(pieces))
        assert saved is not None
    assert saved.leads(rids) is leads
    texts = [f"text of {rid}" for rid in rids]
    want = [saved_ids.index(r) if r in saved_ids else -1 for r in rids]
    assert saved.slots_of(rids, texts).tolist() == want  # either way, the same slots


def test_saved_terms_take_a_twin_s_strings_for_the_terms_it_holds() -> None:
    docs = _texts(200, 14)
    twin = _one_by_one(docs[:150])  # holds most of the file's terms, not all
    saved = _saved(docs)
    header, pieces = view_terms.encode(
        view_terms.snapshot(
            "c",
            CollectionState(cid=1),
            _one_by_one(docs),
            [d for d, _ in docs],
            [t for _, t in docs],
        )
        or pytest.fail("no snapshot")
    )
    shared = view_terms.decode(header, b"".join(pieces), twin.forward)
    assert shared is not None and shared.docs.terms == saved.docs.terms
    held = twin.forward.term_id
    mine = [t for t in shared.docs.terms if t not in held]
    assert mine  # some terms only the file has: its own strings
    for term in shared.docs.terms:
        if term in held:
            assert term is twin.forward.terms[held[term]]
    assert all(shared.docs.term_id[t] == i for i, t in enumerate(shared.docs.terms))
    bulk = BM25Index()
    view_terms.index_texts(bulk, iter(docs), shared, None, lambda _r: None, 64)
    same(_one_by_one(docs), bulk)


def test_postings_by_term_are_taken_only_by_an_empty_index_and_only_when_sound() -> None:
    docs = _texts(120, 15)
    saved = _saved(docs)
    assert saved.groups is not None
    g = saved.groups
    assert TermGroups.of(g.off, g.slots, g.tfs, 120) is not None
    assert TermGroups.of(g.off, g.slots, g.tfs, 100) is None  # slots past the records
    assert TermGroups.of(g.off[::-1].copy(), g.slots, g.tfs, 120) is None  # not offsets
    assert TermGroups.of(g.off, g.slots, g.tfs[:-1], 120) is None  # a frequency short
    assert g.fits(len(saved.docs.terms), g.slots.shape[0], 120)
    assert not g.fits(len(saved.docs.terms) + 1, g.slots.shape[0], 120)
    assert not g.fits(len(saved.docs.terms), g.slots.shape[0], 119)
    # an index that already holds a document sorts the load's postings itself
    bulk = BM25Index()
    bulk.add("first", "w1 dog")
    view_terms.index_texts(bulk, iter(docs), saved, None, lambda _r: None, 64)
    assert bulk._base is not g
    same(_one_by_one([("first", "w1 dog"), *docs]), bulk)
