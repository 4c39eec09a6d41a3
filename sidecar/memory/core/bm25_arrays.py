"""Compact storage of a :class:`~sidecar.memory.core.lexical.BM25Index`: postings by term
and analyzed terms by document, in numpy arrays instead of one ``Counter`` per document.

* :class:`Postings`: one term's postings (slots ascending, term frequencies) and their
  BM25 weights; :meth:`Postings.extend` takes many at once (a bulk load builds every
  term's postings from one sort, :func:`by_term`).
* :class:`DocTerms`: the forward index, CSR by slot: per document a range of two flat
  arrays (term ids over the index's vocabulary, frequencies), 8 bytes per distinct term
  of a document instead of a ``Counter`` (about 0.5-1 KB a document). A document's terms
  are read back as a small ``dict`` (:meth:`DocTerms.get`) only for the few documents a
  caller asks about (keyword coverage of the pool, a removal, a short ``score``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]

ARRAY_MIN = 64  # from this many postings a term keeps arrays instead of lists
NO_SLOTS: I32 = np.zeros(0, dtype=np.int32)
NO_WEIGHTS: F32 = np.zeros(0, dtype=np.float32)


class Postings:
    """One term's postings: slots (ascending) and term frequencies, and their BM25 weights
    up to ``weighted`` (for the normalisation generation ``wgen``). A rare term keeps
    plain lists (most of a conversation's vocabulary is a handful of postings, where three
    arrays would cost more than the lists); from :data:`ARRAY_MIN` postings on they are
    arrays with spare capacity (8 bytes a posting, 12 with its weight once the term was
    queried, instead of two boxed ints and a cached copy)."""

    __slots__ = ("lists", "n", "slots", "tfs", "weighted", "weights", "wgen")

    def __init__(self) -> None:
        self.lists: tuple[list[int], list[int]] | None = ([], [])
        self.slots = NO_SLOTS
        self.tfs = NO_WEIGHTS
        self.weights = NO_WEIGHTS
        self.n = 0
        self.weighted = 0
        self.wgen = -1

    def append(self, slot: int, tf: int) -> None:
        self.n += 1
        if self.lists is not None:
            self.lists[0].append(slot)
            self.lists[1].append(tf)
            if self.n >= ARRAY_MIN:
                self._to_arrays()
            return
        if self.n > self.slots.shape[0]:
            self._reserve(self.n + self.n // 2)
        self.slots[self.n - 1] = slot
        self.tfs[self.n - 1] = tf

    def extend(self, slots: I32, tfs: I32) -> None:
        """Append many postings (slots ascending, after every slot held): the same
        postings as :meth:`append` of each in turn."""
        k = int(slots.shape[0])
        if not k:
            return
        if self.lists is not None and self.n + k < ARRAY_MIN:
            self.lists[0].extend(slots.tolist())
            self.lists[1].extend(tfs.tolist())
            self.n += k
            return
        if self.lists is not None:
            self._to_arrays()
        n = self.n
        if n + k > self.slots.shape[0]:
            self._reserve(n + k + (n + k) // 2)
        self.slots[n : n + k] = slots
        self.tfs[n : n + k] = tfs
        self.n = n + k

    def _to_arrays(self) -> None:
        assert self.lists is not None
        self.slots = np.asarray(self.lists[0], dtype=np.int32)
        self.tfs = np.asarray(self.lists[1], dtype=np.float32)
        self.lists, self.weighted = None, 0

    def _reserve(self, cap: int) -> None:
        self.slots = np.resize(self.slots, cap)
        self.tfs = np.resize(self.tfs, cap)
        if self.weights.shape[0]:  # weights exist once the term was queried
            self.weights = np.resize(self.weights, cap)

    def weighed(self, wgen: int, dl: F32, avgdl: float, k1: float, b: float) -> tuple[I32, F32]:
        if self.lists is not None:  # a few postings: weighed anew
            slots = np.asarray(self.lists[0], dtype=np.int32)
            tf = np.asarray(self.lists[1], dtype=np.float32)
            norm = k1 * (1.0 - b + b * dl[slots] / avgdl)
            return slots, (tf * (k1 + 1.0) / (tf + norm)).astype(np.float32)
        if self.wgen != wgen:
            self.wgen, self.weighted = wgen, 0
        if self.weights.shape[0] < self.slots.shape[0]:
            self.weights = np.resize(self.weights, self.slots.shape[0])
        lo, hi = self.weighted, self.n
        if lo < hi:
            slots, tf = self.slots[lo:hi], self.tfs[lo:hi]
            norm = k1 * (1.0 - b + b * dl[slots] / avgdl)
            self.weights[lo:hi] = tf * (k1 + 1.0) / (tf + norm)
            self.weighted = hi
        return self.slots[:hi], self.weights[:hi]


class DocTerms:
    """The analyzed terms of every slot (module doc): CSR by slot over a vocabulary."""

    __slots__ = ("_n", "_off", "_slots", "_tfs", "_tids", "term_id", "terms")

    def __init__(self) -> None:
        self.term_id: dict[str, int] = {}
        self.terms: list[str] = []
        self._tids = np.zeros(1024, dtype=np.int32)
        self._tfs = np.zeros(1024, dtype=np.int32)
        self._off = np.zeros(65, dtype=np.int64)  # slot s: [_off[s], _off[s + 1])
        self._n = 0  # postings held
        self._slots = 0

    def __len__(self) -> int:
        return self._slots

    def _ids_of(self, words: Iterable[str]) -> list[int]:
        """The ids of ``words`` (distinct), new ones added to the vocabulary."""
        term_id, terms = self.term_id, self.terms
        out: list[int] = []
        for term in words:
            t = term_id.get(term)
            if t is None:
                t = term_id[term] = len(terms)
                terms.append(term)
            out.append(t)
        return out

    def extend(
        self, docs: Sequence[Mapping[str, int] | int], twin: DocTerms | None = None
    ) -> tuple[I32, I32, I64]:
        """Append the next slots' term counts; returns their flat term ids and
        frequencies (in slot order, each document's terms in its counts' order) and how
        many distinct terms each document has. An ``int`` instead of counts is a slot of
        ``twin`` (another index's forward index, analyzed alike) whose terms are copied,
        translated to this vocabulary with array operations instead of a dict."""
        tids: list[int] = []
        tfs: list[int] = []
        lens: list[int] = []
        refs: list[int] = []
        for d in docs:
            if isinstance(d, int):
                refs.append(d)
                lens.append(-1)  # filled below
            else:
                tids.extend(self._ids_of(d))
                tfs.extend(d.values())
                lens.append(len(d))
        nterms = np.asarray(lens, dtype=np.int64)
        is_ref = nterms < 0
        if refs:
            assert twin is not None
            ref_slots = np.asarray(refs, dtype=np.int64)
            ref_lens = twin._off[ref_slots + 1] - twin._off[ref_slots]
            nterms[is_ref] = ref_lens
        k = int(nterms.sum())
        starts = np.cumsum(nterms) - nterms
        flat_t = np.empty(k, dtype=np.int32)
        flat_f = np.empty(k, dtype=np.int32)
        own = ranges(starts[~is_ref], nterms[~is_ref])
        flat_t[own] = np.asarray(tids, dtype=np.int32)
        flat_f[own] = np.asarray(tfs, dtype=np.int32)
        if refs:
            assert twin is not None
            src = ranges(twin._off[ref_slots], ref_lens)
            theirs = twin._tids[src]
            tmap = np.full(len(twin.terms), -1, dtype=np.int32)
            used = np.unique(theirs)
            tmap[used] = self._ids_of([twin.terms[t] for t in used.tolist()])
            dst = ranges(starts[is_ref], ref_lens)
            flat_t[dst] = tmap[theirs]
            flat_f[dst] = twin._tfs[src]
        n, s = self._n, self._slots
        if n + k > self._tids.shape[0]:
            cap = max(n + k, 2 * self._tids.shape[0])
            self._tids = np.resize(self._tids, cap)
            self._tfs = np.resize(self._tfs, cap)
        self._tids[n : n + k] = flat_t
        self._tfs[n : n + k] = flat_f
        if s + len(lens) + 1 > self._off.shape[0]:
            self._off = np.resize(self._off, max(s + len(lens) + 1, 2 * self._off.shape[0]))
        self._off[s + 1 : s + 1 + len(lens)] = n + np.cumsum(nterms)
        self._n, self._slots = n + k, s + len(lens)
        return flat_t, flat_f, nterms

    @classmethod
    def from_arrays(cls, terms: list[str], off: I64, tids: I32, tfs: I32) -> DocTerms:
        """A forward index over ``terms`` with ``len(off) - 1`` slots, slot ``s`` holding
        ``tids``/``tfs[off[s]:off[s + 1]]`` (read-only arrays are copied on first append)."""
        out = cls()
        out.terms = terms
        out.term_id = {t: i for i, t in enumerate(terms)}
        out._off = np.array(off, dtype=np.int64)
        out._tids = np.array(tids, dtype=np.int32)
        out._tfs = np.array(tfs, dtype=np.int32)
        out._slots = int(off.shape[0]) - 1
        out._n = int(off[-1]) if off.shape[0] else 0
        return out

    def arrays(self) -> tuple[I64, I32, I32]:
        """The CSR arrays held (``off`` of every slot and one past, term ids,
        frequencies): views, valid while nothing is appended past them."""
        return self._off[: self._slots + 1], self._tids[: self._n], self._tfs[: self._n]

    def get(self, slot: int) -> dict[str, int]:
        """The term counts of a slot (a new dict, in the order they were added)."""
        a, b = int(self._off[slot]), int(self._off[slot + 1])
        terms = self.terms
        tids, tfs = self._tids[a:b].tolist(), self._tfs[a:b].tolist()
        return {terms[t]: f for t, f in zip(tids, tfs, strict=True)}

    @property
    def postings(self) -> int:
        """Term ids held (one per distinct term of each slot's document)."""
        return self._n

    @property
    def nbytes(self) -> int:
        return int(self._tids.nbytes + self._tfs.nbytes + self._off.nbytes)


def ranges(starts: I64, lens: I64) -> I64:
    """The concatenated ranges ``[start, start + len)``."""
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lens) - lens
    out: I64 = np.repeat(starts - before, lens) + np.arange(total, dtype=np.int64)
    return out


def by_term(tids: I32, slots: I32, tfs: I32) -> Iterable[tuple[int, I32, I32]]:
    """The postings of flat ``(term id, slot, tf)`` triples (slots ascending) grouped by
    term: ``(term id, slots, tfs)``, each term's slots still ascending (a stable sort)."""
    if not tids.shape[0]:
        return
    order = np.argsort(tids, kind="stable")
    st, ss, sf = tids[order], slots[order], tfs[order]
    cuts = np.flatnonzero(np.diff(st)) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), int(st.shape[0])]
    for a, b in zip(starts, ends, strict=True):
        yield int(st[a]), ss[a:b], sf[a:b]
