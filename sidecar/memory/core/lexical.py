"""The lexical channel: an analyzer for English conversation and a BM25 index.

The analyzer (:func:`analyze`, the same for documents and queries) is
:mod:`sidecar.memory.core.analyzer`'s; its module doc gives the steps.

:class:`BM25Index` is one document set (its own statistics, Okapi BM25 with ``k1`` 1.2
and ``b`` 0.75, IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))``, which is never negative).
Adds and removals are incremental: documents get an internal slot; postings are
appended; a removal updates the statistics at once and leaves a dead slot that queries
mask out; dead slots are compacted away once they outnumber the live ones. Per-term
postings are numpy arrays of ``(slot, tf)`` with spare capacity and the
``tf-and-length weight`` of each posting beside them, so a query is a handful of
vectorised scatters into one dense score array (about 3 ms p50 for 50k documents on a
busy two-core machine). Each document's analyzed terms are kept in a compact forward index
(term ids and frequencies in flat arrays, :mod:`sidecar.memory.core.bm25_arrays`), not a
``Counter`` per document. A bulk load into an empty index (a view's load:
:meth:`BM25Index.add_arrays`, :meth:`BM25Index.add_bulk`) keeps its postings CSR by term
from one sort and makes a term's arrays on first use; later adds append. The weights use an
average document length refreshed only when the true one drifts by more than 5 %
(:data:`AVGDL_TOLERANCE`), so an add only weighs its own postings; ``search`` and
``score`` use the same value and agree. The score array of the last query is memoised, so
ranking the candidates of a ``search`` (``score`` of their ids) is a lookup, and ``score`` of many
ids scores the whole index at once. The terms of the last few query texts are kept
(:func:`analyze_query`), since one ``assemble`` analyzes its query for every scope.

:class:`LexicalIndex` keeps one :class:`BM25Index` per collection (scope), so every
scope has its own statistics; a search over several collections merges their hits.

Not thread-safe: the caller serialises writers against readers (the daemon holds one
per namespace behind its store lock).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from sidecar.memory.core import bm25_topk
from sidecar.memory.core.analyzer import (
    STOPWORDS,
    StemMode,
    analyze,
    analyze_query,
)
from sidecar.memory.core.bm25_arrays import (
    DocTerms,
    Postings,
    TermGroups,
    by_term,
    doc_lengths,
    zero_padded,
)
from sidecar.memory.core.bm25_topk import (
    TermBound,
    TermPostings,
    score_slots,
    term_bound,
    top_candidates,
)

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75
AVGDL_TOLERANCE = 0.05
SCORE_ARRAY_MIN_IDS = 32  # ``score`` of this many ids scores the whole index at once
#: From this many slots a query scores only a pool of documents that can reach its top k
#: (:mod:`sidecar.memory.core.bm25_topk`: MaxScore, with champion lists for common terms)
#: and ``score`` looks the given ids up, instead of scattering into an array the size of
#: the index. Measured on ``make bench-scale``'s generated memories (100 prompts, top 50,
#: one run): at 1M documents 6.3 ms p50 / 11.9 ms p95 against 14.1 / 35.1 ms, sharing 77 %
#: of the exact top 50 (every query term there is common); at 100k 2.6 against 1.1 ms
#: and 89 %. So only indexes past the crossing take it; under it the scatter is exact.
PRUNE_MIN_SLOTS = 500_000

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
I16 = npt.NDArray[np.int16]
I64 = npt.NDArray[np.int64]

_Arrays = tuple[F32, I16]  # per slot: BM25 score, distinct query terms contained


_EMPTY_TERMS: Mapping[str, int] = {}


class BM25Index:
    """Okapi BM25 over one document set (see the module doc)."""

    def __init__(
        self,
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        stem: StemMode = "light",
        stopwords: frozenset[str] = STOPWORDS,
    ) -> None:
        if k1 < 0 or not 0.0 <= b <= 1.0:
            raise ValueError("need k1 >= 0 and 0 <= b <= 1")
        self.k1 = float(k1)
        self.b = float(b)
        self.stem: StemMode = stem
        self.stopwords = stopwords
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []  # slot -> id (None once removed)
        self._docs = DocTerms()  # slot -> analyzed term counts (compact, bm25_arrays)
        # a term's postings: made from ``_base`` (the postings of the first bulk load, CSR
        # by term: bm25_arrays.TermGroups) when first needed, else by the adds
        self._postings: dict[str, Postings] = {}
        self._base: TermGroups | None = None
        self._wgen = 0  # bumped when the normalising avgdl moves: every weight is redone
        # per term: largest cached weight (MaxScore bound) and champion list (bm25_topk),
        # extended as postings are appended
        self._bounds: dict[str, TermBound] = {}
        self._df = np.zeros(64, dtype=np.int64)  # documents holding each term id
        self._dl = np.zeros(64, dtype=np.float32)
        self._alive = np.zeros(64, dtype=bool)
        self._total_len = 0
        self._dead = 0
        self._wavgdl = 0.0
        # the score array of the last query (terms, avgdl used, scores per slot), so that
        # ``score`` right after ``search`` for the same query is a lookup
        self._memo: tuple[tuple[str, ...], float, _Arrays | None] | None = None

    # ---------------------------------------------------------------- documents
    def analyze(self, text: str) -> list[str]:
        return analyze(text, stem=self.stem, stopwords=self.stopwords)

    def _query(self, query: str | Sequence[str]) -> list[str]:
        """The terms of a query text (:func:`analyze_query`) or the given terms."""
        if isinstance(query, str):
            return list(analyze_query(query, self.stem, self.stopwords))
        return list(query)

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot_of

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._slot_of))

    @property
    def empty(self) -> bool:
        """Whether no document was ever added (none removed either)."""
        return not self._ids and not self._docs.postings

    @property
    def nbytes(self) -> int:
        """An estimate of the index's arrays: the forward index, and per posting a slot,
        a frequency and a weight; O(1)."""
        return self._docs.nbytes + 12 * self._docs.postings + 5 * self._dl.shape[0]

    @property
    def avgdl(self) -> float:
        n = len(self._slot_of)
        return self._total_len / n if n else 0.0

    def doc_terms(self, doc_id: str) -> Mapping[str, int]:
        """The analyzed term counts of a document (empty if unknown)."""
        slot = self._slot_of.get(doc_id)
        return self._docs.get(slot) if slot is not None else _EMPTY_TERMS

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id``, replacing an earlier version of the id."""
        self.add_terms(doc_id, self.analyze(text))

    def analyzes_like(self, other: BM25Index) -> bool:
        """Whether both indexes turn a text into the same terms."""
        return self.stem == other.stem and self.stopwords == other.stopwords

    def counts_of(self, doc_id: str) -> Mapping[str, int] | None:
        """The term counts of a document (None if unknown), to hand to :meth:`add_counts`
        of an index that :meth:`analyzes_like` this one (instead of analyzing again)."""
        slot = self._slot_of.get(doc_id)
        return self._docs.get(slot) if slot is not None else None

    def add_terms(self, doc_id: str, terms: Sequence[str]) -> None:
        """Index already analyzed ``terms`` (for callers that analyze once)."""
        self.add_counts(doc_id, Counter(terms))

    def add_counts(self, doc_id: str, counts: Mapping[str, int]) -> None:
        """Index a document by its term counts."""
        self.add_bulk([(doc_id, counts)])

    @property
    def forward(self) -> DocTerms:
        """The analyzed terms of every slot (for saving them: ``view_terms``)."""
        return self._docs

    def slot(self, doc_id: str) -> int | None:
        """The internal slot of a document (for :meth:`add_bulk` of a twin index)."""
        return self._slot_of.get(doc_id)

    def slot_map(self) -> dict[str, int]:
        """A copy of the slot of every id (a view loaded in one go keys its rows alike:
        copying the table takes a tenth of building one over a million new strings)."""
        return self._slot_of.copy()

    def slots_of(self, ids: Sequence[str]) -> I64:
        """:meth:`slot` of each id (-1: not indexed)."""
        return np.fromiter(map(self._slot_of.get, ids, itertools.repeat(-1)), np.int64, len(ids))

    def term_ids(self, terms: Sequence[str]) -> I32:
        """The ids of analyzed terms (repeats allowed) for :meth:`add_arrays`; new terms
        join the vocabulary."""
        return self._docs.ids_of(terms)

    def add_bulk(
        self,
        docs: Iterable[tuple[str, Mapping[str, int] | int]],
        twin: BM25Index | DocTerms | None = None,
    ) -> None:
        """Index many documents by their term counts, replacing earlier versions of their
        ids: the same index as :meth:`add_counts` of each in turn, with every term's
        postings appended at once (a view's load: one sort instead of a call per posting).
        An ``int`` instead of counts is the :meth:`slot` of a document of ``twin`` (an
        index that :meth:`analyzes_like` this one, or a slot of a forward index of terms
        analyzed alike, such as a saved one) whose terms are copied."""
        docs = list(docs)
        ids = [d for d, _ in docs]
        if len(set(ids)) != len(ids):  # an id twice: the later version wins, in turn
            for doc_id, counts in docs:
                self.add_bulk([(doc_id, counts)], twin)
            return
        self._remove_all(ids)  # first: a removal may compact, which renumbers the terms
        source = twin._docs if isinstance(twin, BM25Index) else twin
        nterms, tids, tfs = self._docs.flatten([counts for _, counts in docs], source)
        self._append(ids, nterms, tids, tfs)

    def add_arrays(
        self,
        ids: Sequence[str],
        nterms: I64,
        tids: I32,
        tfs: I32,
    ) -> None:
        """:meth:`add_bulk` of documents given as flat arrays: document ``i`` holds the
        next ``nterms[i]`` distinct terms of ``tids`` (ids from :meth:`term_ids`, of this
        index's vocabulary) with their frequencies ``tfs``. (A restart from saved terms,
        whose postings by term are taken as they are, is :meth:`take_forward`.)"""
        src = self._docs  # a removal may compact: then the ids are of another vocabulary
        if len(set(ids)) != len(ids):  # an id twice: the later version wins, in turn
            ends = np.cumsum(nterms).tolist()
            for i, doc_id in enumerate(ids):
                a, b = ends[i] - int(nterms[i]), ends[i]
                self._remove_all([doc_id])
                one = tids[a:b] if self._docs is src else self._docs.translate(src, tids[a:b])
                self._append([doc_id], nterms[i : i + 1], one, tfs[a:b])
            return
        self._remove_all(ids)
        if self._docs is not src:  # the ids of another vocabulary now
            tids = self._docs.translate(src, tids)
        self._append(ids, nterms, tids, tfs)

    def _remove_all(self, ids: Sequence[str]) -> None:
        if self._slot_of:
            for doc_id in [d for d in ids if d in self._slot_of]:
                self.remove(doc_id)

    def _append(
        self,
        ids: Sequence[str],
        nterms: I64,
        tids: I32,
        tfs: I32,
    ) -> None:
        """Add new ids (none of them indexed) with their flat terms (:meth:`add_arrays`)."""
        if not ids:
            return
        held = self._docs.postings
        self._docs.append(nterms, tids, tfs)
        self._index_appended(ids, nterms, tids, tfs, None, not held)

    def take_forward(self, ids: Sequence[str], docs: DocTerms, groups: TermGroups | None) -> None:
        """Index ``ids`` (distinct) whose analyzed terms are ``docs``' slots in order, into
        this empty index: ``docs`` becomes its forward index as it is, and ``groups`` (the
        same postings by term) its postings when they fit. A restart from saved terms in
        their file's order (``view_terms``): a 1M view's 170 MB of term ids and
        frequencies are not copied, nor its vocabulary."""
        if not self.empty or len(docs) != len(ids):
            raise ValueError("take_forward needs an empty index and one slot per id")
        self._docs = docs
        off, tids, tfs = docs.arrays()
        self._index_appended(ids, np.diff(off), tids, tfs, groups, True)

    def _index_appended(
        self,
        ids: Sequence[str],
        nterms: I64,
        tids: I32,
        tfs: I32,
        groups: TermGroups | None,
        first_terms: bool,
    ) -> None:
        """The slots, lengths, document frequencies and postings of ``ids``, whose terms
        were just appended to the forward index (``first_terms``: the first it holds)."""
        first, n = len(self._ids), len(ids)
        self._dl = zero_padded(self._dl, first + n)
        self._alive = zero_padded(self._alive, first + n)
        self._memo = None
        lengths = doc_lengths(nterms, tfs)
        self._slot_of.update(zip(ids, range(first, first + n), strict=True))
        self._ids.extend(ids)
        self._dl[first : first + n] = lengths
        self._alive[first : first + n] = True
        self._total_len += int(lengths.sum())
        nvocab = len(self._docs.terms)
        self._df = zero_padded(self._df, nvocab)
        fresh = first_terms and self._base is None and not self._postings
        if fresh and first == 0 and groups is not None and groups.fits(nvocab, tids.shape[0], n):
            self._df[:nvocab] += np.diff(groups.off)
            self._base = groups
            return
        self._df[:nvocab] += np.bincount(tids, minlength=nvocab)
        slots = np.repeat(np.arange(first, first + n, dtype=np.int32), nterms)
        if fresh:
            self._base = TermGroups(tids, slots, tfs, nvocab)
            return
        terms, postings = self._docs.terms, self._postings
        for tid, tslots, ttfs in by_term(tids, slots, tfs):
            term = terms[tid]
            plist = postings.get(term) or self._plist(term, tid)
            if plist is None:
                plist = postings[term] = Postings()
            plist.extend(tslots, ttfs)

    def _plist(self, term: str, tid: int | None = None) -> Postings | None:
        """The postings of a term (None: none), made from the base on first use."""
        plist = self._postings.get(term)
        if plist is not None or self._base is None:
            return plist
        if tid is None:
            tid = self._docs.term_id.get(term)
        plist = self._base.postings(tid) if tid is not None else None
        if plist is not None:
            self._postings[term] = plist
        return plist

    def remove(self, doc_id: str) -> bool:
        slot = self._slot_of.pop(doc_id, None)
        if slot is None:
            return False
        self._memo = None
        tids, tfs = self._docs.row(slot)
        self._ids[slot] = None
        self._alive[slot] = False
        self._total_len -= int(tfs.sum())
        self._df[tids] -= 1  # a document lists each of its terms once
        self._dead += 1
        if self._dead > max(1024, len(self._slot_of)):
            self._compact()
        return True

    def clear(self) -> None:
        self.__init__(k1=self.k1, b=self.b, stem=self.stem, stopwords=self.stopwords)  # type: ignore[misc]

    def _compact(self) -> None:
        old = self._docs
        live = [(doc_id, slot) for slot, doc_id in enumerate(self._ids) if doc_id is not None]
        self.clear()
        self.add_bulk(live, old)

    # ------------------------------------------------------------------ queries
    def _norm_avgdl(self) -> float:
        """The average length used for length normalisation. It follows the true
        average but is only updated when that drifts by more than
        :data:`AVGDL_TOLERANCE`, so cached per-term weights stay valid across most adds
        and removals (a 5 % change of ``avgdl`` moves BM25 by well under 5 %)."""
        avgdl = self.avgdl or 1.0
        w = self._wavgdl
        if w <= 0 or abs(avgdl - w) > AVGDL_TOLERANCE * w:
            self._wavgdl = avgdl
            self._wgen += 1
            self._bounds.clear()
        return self._wavgdl

    def _weights(self, term: str) -> tuple[I32, F32] | None:
        """``(slots, tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl)))`` of a term. The weights
        are kept beside the postings and only the postings added since are weighed (a
        document's length never changes: a re-added document takes a new slot), so an add
        costs the next query nothing for the rest of a common term's postings."""
        avgdl = self._norm_avgdl()
        plist = self._plist(term)
        if plist is None:
            return None
        return plist.weighed(self._wgen, self._dl, avgdl, self.k1, self.b)

    def df(self, term: str) -> int:
        """How many documents hold ``term``."""
        tid = self._docs.term_id.get(term)
        return int(self._df[tid]) if tid is not None and tid < self._df.shape[0] else 0

    def idf(self, term: str) -> float:
        df = self.df(term)
        n = len(self._slot_of)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def _term_postings(self, terms: Sequence[str]) -> list[TermPostings]:
        """The distinct matching terms of a query, in query order, for the pruned paths."""
        out: list[TermPostings] = []
        for term in dict.fromkeys(terms):
            idf = self.idf(term)
            arrays = self._weights(term) if idf > 0 else None
            if arrays is None:
                continue
            bound = term_bound(arrays[0], arrays[1], self._bounds.get(term))
            self._bounds[term] = bound
            out.append(
                TermPostings(
                    arrays[0],
                    arrays[1],
                    idf,
                    bound.max_weight,
                    bound.champions,
                    bound.tail_weight,
                )
            )
        return out

    def warm(self) -> int:
        """Weigh the postings and choose the champions of every common term of a large
        index now (after a bulk load), instead of on the first query that names it: at 1M
        documents that first query paid about 3 ms per common term (a weight per posting,
        an argpartition over them). Returns how many terms were warmed; a no-op under
        :data:`PRUNE_MIN_SLOTS`, where queries scatter and the weights are cheap."""
        if not self._pruned():
            return 0
        warmed = 0
        for term in self.posting_counts(bm25_topk.CHAMPIONS):
            if self.df(term) > 0:
                self._term_postings([term])
                warmed += 1
        return warmed

    def posting_counts(self, more_than: int = 0) -> dict[str, int]:
        """How many postings each term has (removed documents' too), for the terms with
        more than ``more_than``."""
        out = {t: p.n for t, p in self._postings.items() if p.n > more_than}
        if self._base is not None:
            terms, base = self._docs.terms, self._base
            for tid in base.common(more_than):
                out.setdefault(terms[tid], base.count(tid))
        return out

    def _pruned(self) -> bool:
        return len(self._ids) >= PRUNE_MIN_SLOTS

    def _memo_arrays(self, terms: Sequence[str]) -> _Arrays | bool | None:
        """The memoised arrays of ``terms`` (None: no document matches), or False when
        the memo is for another query or is outdated."""
        memo = self._memo
        if memo is None or memo[0] != tuple(dict.fromkeys(terms)):
            return False
        if memo[1] != self._norm_avgdl():
            return False
        return memo[2]

    def _arrays(self, terms: Sequence[str]) -> _Arrays | None:
        """:meth:`_score_array`, memoised for the last query."""
        got = self._memo_arrays(terms)
        if got is not False:
            return got  # type: ignore[return-value]
        arrays = self._score_array(terms)
        self._memo = (tuple(dict.fromkeys(terms)), self._wavgdl, arrays)
        return arrays

    def _scores(self, terms: Sequence[str]) -> F32 | None:
        arrays = self._arrays(terms)
        return None if arrays is None else arrays[0]

    def _score_array(self, terms: Sequence[str]) -> _Arrays | None:
        """BM25 of every slot, and how many of the distinct terms each slot's document
        contains."""
        n_slots = len(self._ids)
        if not self._slot_of or n_slots == 0:
            return None
        scores = np.zeros(n_slots, dtype=np.float32)
        hits = np.zeros(n_slots, dtype=np.int16)
        hit = False
        for term in dict.fromkeys(terms):
            idf = self.idf(term)
            arrays = self._weights(term) if idf > 0 else None
            if arrays is None:
                continue
            slots, weight = arrays
            scores[slots] += np.float32(idf) * weight
            hits[slots] += 1  # a term lists each document once
            hit = True
        if not hit:
            return None
        if self._dead:
            scores *= self._alive[:n_slots]
            hits *= self._alive[:n_slots]
        return scores, hits

    def search(self, query: str | Sequence[str], k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` for a query text (or analyzed terms), best first;
        ties by id. Only documents sharing a term with the query are returned."""
        terms = self._query(query)
        if k <= 0:
            return []
        if self._pruned() and self._memo_arrays(terms) is False:
            slots, values = top_candidates(
                self._term_postings(terms), k, self._alive if self._dead else None
            )
        else:
            scores = self._scores(terms)
            if scores is None:
                return []
            slots = np.flatnonzero(scores > 0).astype(np.int32)
            values = scores[slots]
        keep = values > 0
        slots, values = slots[keep], values[keep]
        if slots.size > k:
            part = np.argpartition(-values, k - 1)[:k]
            kth = values[part].min()
            keep = values >= kth  # keep ties at the boundary, cut after sorting
            slots, values = slots[keep], values[keep]
        out: list[tuple[str, float]] = []
        for slot, value in zip(slots.tolist(), values.tolist(), strict=True):
            doc_id = self._ids[slot]
            if doc_id is not None:
                out.append((doc_id, float(value)))
        out.sort(key=lambda h: (-h[1], h[0]))
        return out[:k]

    def score(self, query: str | Sequence[str], ids: Iterable[str]) -> dict[str, float]:
        """BM25 of the given documents (0 for a document without a query term or an
        unknown id)."""
        wanted = list(ids)
        return dict(zip(wanted, self.score_list(query, wanted), strict=True))

    def score_list(self, query: str | Sequence[str], ids: Sequence[str]) -> list[float]:
        """:meth:`score` as a list aligned with ``ids``."""
        return self.score_hits(query, ids)[0]

    def score_hits(
        self, query: str | Sequence[str], ids: Sequence[str]
    ) -> tuple[list[float], list[int]]:
        """:meth:`score_list`, and for each document how many of the query's distinct
        terms it contains (-1 for an id the index does not hold), from the same pass."""
        terms = self._query(query)
        if not ids:
            return [], []
        slot_of = self._slot_of
        if not terms:
            return [0.0] * len(ids), [0 if d in slot_of else -1 for d in ids]
        memo = self._memo_arrays(terms)
        if memo is False and self._pruned():  # the given ids only, not the whole index
            slots = np.array([slot_of.get(d, -1) for d in ids], dtype=np.int32)
            known = slots >= 0
            scores, hits = score_slots(self._term_postings(terms), slots[known])
            got_all = np.zeros(len(ids), dtype=np.float32)
            found_all = np.full(len(ids), -1, dtype=np.int64)
            got_all[known] = scores
            found_all[known] = hits
            return got_all.tolist(), found_all.tolist()
        if len(ids) >= SCORE_ARRAY_MIN_IDS or memo is not False:
            # vectorised over every document, memoised
            arrays = self._arrays(terms) if memo is False else memo
            slots = np.array([slot_of.get(d, -1) for d in ids], dtype=np.intp)
            known = slots >= 0
            if arrays is None or isinstance(arrays, bool):
                return [0.0] * len(ids), np.where(known, 0, -1).tolist()
            scores, hits = arrays
            got: list[float] = np.where(known, scores[slots], np.float32(0.0)).tolist()
            found: list[int] = np.where(known, hits[slots], -1).tolist()
            return got, found
        avgdl = self._norm_avgdl()
        k1, b = self.k1, self.b
        idfs = {t: self.idf(t) for t in dict.fromkeys(terms)}
        out: list[float] = []
        out_hits: list[int] = []
        for doc_id in ids:
            slot = slot_of.get(doc_id)
            counts = self._docs.get(slot) if slot is not None else None
            if slot is None or counts is None:
                out.append(0.0)
                out_hits.append(-1)
                continue
            norm = k1 * (1.0 - b + b * float(self._dl[slot]) / avgdl)
            total = 0.0
            n_hits = 0
            for term, idf in idfs.items():
                tf = counts.get(term, 0)
                if tf:
                    n_hits += 1
                    if idf > 0:
                        total += idf * tf * (k1 + 1.0) / (tf + norm)
            out.append(total)
            out_hits.append(n_hits)
        return out, out_hits
