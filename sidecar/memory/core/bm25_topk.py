"""Exact BM25 top-k of a large index without scoring every document (MaxScore).

Scoring every document of an index is a scatter over every posting of every query term
into one array the size of the index: 1.4 ms p50 at 100k documents, 16 ms at 1M (41 ms
p95) on a busy two-core machine, most of it spent on the few common terms whose postings
cover a large share of the index and whose IDF is small.

MaxScore (Turtle and Flood, 1995) avoids that without changing the result. Each term has
an upper bound on what it can add to any document: its IDF times its largest
``tf·(k1+1) / (tf + norm)`` weight. The terms are taken in decreasing order of that bound;
after the first ``j`` ("essential") terms, every document containing none of them scores
at most the sum of the bounds of the others. The documents containing an essential term
are scored exactly with every term (a binary search of each term's sorted postings), and
when the k-th best of them scores strictly above that sum, no other document can enter
the top k, ties included. Otherwise the next term becomes essential. Usually one or two
selective terms (names, rare nouns) settle it, and the common terms are only looked up for
those few documents.

The scores are summed in the query's term order in float32, exactly as the full scatter
does, so both paths return the same values and the same ranking.

MaxScore alone does not help when every query term is common (in a million documents
made of a few thousand sentences, every word is): the k-th score stays under the bound of
the common terms and they all become essential. So a term held by more than
:data:`CHAMPIONS` documents brings only its *champion list* into the pool (Manning et al.,
*Introduction to Information Retrieval*, 7.1.3): the documents where it weighs most, its
other documents being bounded by the weight of the last champion. The pool is still scored
exactly with every term. Then the result is exact when the k-th score beats the bound of
everything outside the pool (which now counts the champion lists' tails), and otherwise an
approximation that only misses documents made of many common terms none of which
weighs much in them: the cost per query is bounded by the number of query terms times
``CHAMPIONS`` binary searches, not by the size of the index.

A term's bound and champion list (:class:`TermBound`) are kept between queries and
extended as postings are appended (:func:`term_bound`), and the index chooses every
common term's list when a large view loads (``BM25Index.warm``): choosing one is an
argpartition over all of the term's postings, about 3 ms for a common term at 1M
documents, which the first query to name the term (and, before the extension, the first
query after any add of a document holding it) used to pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
I16 = npt.NDArray[np.int16]
BOOL = npt.NDArray[np.bool_]

#: Documents a common term brings into the pool (its best-weighted); see the module doc.
CHAMPIONS = 2048


@dataclass(frozen=True, slots=True)
class TermPostings:
    """One query term: its documents' slots (ascending), their BM25 weights without the
    IDF, the IDF, the largest weight (for the bound), and for a common term its champions
    (the slots of its :data:`CHAMPIONS` best weights, ascending) with the largest weight
    among its other documents."""

    slots: I32
    weights: F32
    idf: float
    max_weight: float
    champions: I32 | None = None
    tail_weight: float = 0.0

    @property
    def bound(self) -> float:
        return float(np.float32(self.idf) * np.float32(self.max_weight))

    @property
    def tail_bound(self) -> float:
        """What the term adds at most to a document outside what it brings to the pool."""
        if self.champions is None:
            return 0.0
        return float(np.float32(self.idf) * np.float32(self.tail_weight))

    @property
    def pool(self) -> I32:
        return self.slots if self.champions is None else self.champions


def champions_of(slots: I32, weights: F32, n: int | None = None) -> tuple[I32, float] | None:
    """The slots of the ``n`` (default :data:`CHAMPIONS`) best weights (ascending) and the
    best weight of the others, or None when the term has at most ``n`` documents."""
    n = CHAMPIONS if n is None else n
    if slots.shape[0] <= n:
        return None
    part = np.argpartition(-weights, n - 1)
    best, others = part[:n], part[n:]
    return np.sort(slots[best]).astype(np.int32), float(weights[others].max())


@dataclass(frozen=True, slots=True)
class TermBound:
    """What a query needs of a term besides its postings, for the first ``upto`` of them:
    the largest weight and, past :data:`CHAMPIONS` postings, the champion slots (ascending)
    with the largest weight outside them."""

    max_weight: float
    champions: I32 | None
    tail_weight: float
    upto: int


def term_bound(slots: I32, weights: F32, prev: TermBound | None = None) -> TermBound:
    """The bound of a term's postings, extending ``prev`` (the bound of their first
    ``prev.upto``) when postings were only appended since.

    An appended posting joins the champions when it weighs more than the tail: the tail
    bound stays valid and the champions keep every posting that a fresh computation would
    choose (the k-th best weight only rises as postings are added), so a query pools at
    least what a fresh list brings. Without this, an ingest would send every term of a
    new document back to an argpartition over all its postings (about 4 ms a common term
    at 1M documents) on the next query. The list is chosen anew once it holds twice
    :data:`CHAMPIONS`."""
    n = int(slots.shape[0])
    if prev is not None and prev.upto == n:
        return prev
    if prev is None or prev.upto > n or (prev.champions is None and n > CHAMPIONS):
        wmax = float(weights.max()) if n else 0.0
        champ = champions_of(slots, weights)
        if champ is None:
            return TermBound(wmax, None, 0.0, n)
        return TermBound(wmax, champ[0], champ[1], n)
    added = weights[prev.upto :]
    wmax = max(prev.max_weight, float(added.max()))
    if prev.champions is None:
        return TermBound(wmax, None, 0.0, n)
    joins = added > np.float32(prev.tail_weight)
    if not joins.any():
        return TermBound(wmax, prev.champions, prev.tail_weight, n)
    # appended slots are larger than every earlier one: the list stays ascending
    champions = np.concatenate([prev.champions, slots[prev.upto :][joins]])
    if champions.shape[0] > 2 * CHAMPIONS:
        return term_bound(slots, weights)
    return TermBound(wmax, champions.astype(np.int32, copy=False), prev.tail_weight, n)


def score_slots(terms: Sequence[TermPostings], slots: I32) -> tuple[F32, I16]:
    """BM25 of the documents at ``slots`` and how many of the terms each contains (terms
    in query order, the sum in float32 like the full scatter)."""
    scores = np.zeros(slots.shape[0], dtype=np.float32)
    hits = np.zeros(slots.shape[0], dtype=np.int16)
    if not slots.size:
        return scores, hits
    for t in terms:
        if not t.slots.size:
            continue
        pos = np.minimum(np.searchsorted(t.slots, slots), t.slots.shape[0] - 1)
        found = t.slots[pos] == slots
        scores[found] += np.float32(t.idf) * t.weights[pos[found]]
        hits += found
    return scores, hits


def top_candidates(terms: Sequence[TermPostings], k: int, alive: BOOL | None) -> tuple[I32, F32]:
    """Slots and exact scores of a set of documents that holds the BM25 top ``k`` (every
    document that can reach it, ties at the k-th score included). ``terms`` in query
    order; ``alive``: per slot, False for a removed document. Exact unless a common term
    had to be cut to its champions (module doc)."""
    order = sorted(range(len(terms)), key=lambda i: -terms[i].bound)
    bounds = [terms[i].bound for i in order]
    tails = [terms[i].tail_bound for i in order]
    # outside the pool after the first j+1 terms: the others' bounds, the champion tails
    rest = [float(sum(bounds[j + 1 :]) + sum(tails[: j + 1])) for j in range(len(order))]
    # each document is scored once, when its first term brings it in: a score depends on
    # the document alone (every term, in query order), not on the rest of the pool. A mask
    # over the slots marks what was brought in (removed ones too): linear in the pool,
    # where sorted set operations redid the whole pool each round
    n_slots = max((int(t.pool[-1]) + 1 for t in terms if t.pool.size), default=0)
    seen = np.zeros(n_slots, dtype=bool)
    pool = np.zeros(0, dtype=np.int32)
    scores = np.zeros(0, dtype=np.float32)
    for j, i in enumerate(order):
        cand = terms[i].pool
        new = cand[~seen[cand]]
        if new.size:
            seen[new] = True
            if alive is not None:
                new = new[alive[new]]
            more, _ = score_slots(terms, new)
            pool = np.concatenate([pool, new])
            scores = np.concatenate([scores, more])
        if j == len(order) - 1:
            return pool, scores
        if pool.shape[0] >= k:
            kth = float(np.partition(scores, pool.shape[0] - k)[pool.shape[0] - k])
            # a float32 sum may round a hair above the exact sum of the bounds
            if kth > rest[j] * (1.0 + 1e-5):
                return pool, scores
    return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
