"""Compact storage of a :class:`~sidecar.memory.core.lexical.BM25Index`: postings by term
and analyzed terms by document, in numpy arrays instead of one ``Counter`` per document.

* :class:`Postings`: one term's postings (slots ascending, term frequencies) and their
  BM25 weights; :meth:`Postings.extend` takes many at once.
* :class:`TermGroups`: the postings of a bulk load into an empty index (a view's load),
  CSR by term from one stable sort of the load's flat ``(term, slot, tf)`` arrays. A
  term's :class:`Postings` is made from its range when a query or a later add first needs
  it, so a load makes no object per term (a 100k view has about 100k terms, most of them
  in a few documents: a ``Postings`` each cost about 0.5 s a view).
* :class:`DocTerms`: the forward index, CSR by slot: per document a range of two flat
  arrays (term ids over the index's vocabulary, frequencies), 8 bytes per distinct term
  of a document instead of a ``Counter`` (about 0.5-1 KB a document). A document's terms
  are read back as a small ``dict`` (:meth:`DocTerms.get`) only for the few documents a
  caller asks about (keyword coverage of the pool, a removal, a short ``score``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

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

    @classmethod
    def of(cls, slots: I32, tfs: F32) -> Postings:
        """The postings ``(slots, tfs)`` (a range of :class:`TermGroups`), as
        :meth:`extend` of an empty one would hold them; arrays are shared, not copied (an
        append past them reallocates first)."""
        out = cls()
        n = out.n = int(slots.shape[0])
        if n < ARRAY_MIN:
            out.lists = (slots.tolist(), tfs.astype(np.int32).tolist())
        else:
            out.lists, out.slots, out.tfs = None, slots, tfs
        return out

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
        self.slots = grown(self.slots, cap)
        self.tfs = grown(self.tfs, cap)
        if self.weights.shape[0]:  # weights exist once the term was queried
            self.weights = grown(self.weights, cap)

    def weighed(self, wgen: int, dl: F32, avgdl: float, k1: float, b: float) -> tuple[I32, F32]:
        if self.lists is not None:  # a few postings: weighed anew
            slots = np.asarray(self.lists[0], dtype=np.int32)
            tf = np.asarray(self.lists[1], dtype=np.float32)
            norm = k1 * (1.0 - b + b * dl[slots] / avgdl)
            return slots, (tf * (k1 + 1.0) / (tf + norm)).astype(np.float32)
        if self.wgen != wgen:
            self.wgen, self.weighted = wgen, 0
        if self.weights.shape[0] < self.slots.shape[0]:
            self.weights = grown(self.weights, self.slots.shape[0])
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
        words = list(words)
        new = [w for w in words if w not in term_id]
        if new:
            term_id.update(zip(new, range(len(terms), len(terms) + len(new)), strict=True))
            terms.extend(new)
        return list(map(term_id.__getitem__, words))

    def ids_of(self, words: Sequence[str]) -> I32:
        """The ids of ``words`` (repeats allowed), new ones added to the vocabulary in
        order of first occurrence; one pass in C when every word is known."""
        term_id = self.term_id
        try:
            return np.fromiter(map(term_id.__getitem__, words), np.int32, len(words))
        except KeyError:
            self._ids_of(dict.fromkeys(words))
        return np.fromiter(map(term_id.__getitem__, words), np.int32, len(words))

    def shared(self, words: list[str]) -> list[str]:
        """``words`` with each one this vocabulary holds replaced by its string object
        here (the same text, one object in memory)."""
        term_id, terms = self.term_id, self.terms
        return [terms[i] if (i := term_id.get(w)) is not None else w for w in words]

    def translate(self, other: DocTerms, tids: I32) -> I32:
        """``other``'s term ids ``tids`` as ids of this vocabulary (new terms added). An
        empty vocabulary takes ``other``'s whole (a load from saved terms or a twin): the
        ids stay, and a term no document holds only costs its entry."""
        if not tids.shape[0]:
            return np.zeros(0, dtype=np.int32)
        if not self.terms:
            self.terms, self.term_id = list(other.terms), other.term_id.copy()
            return tids
        used = np.zeros(len(other.terms), dtype=bool)
        used[tids] = True
        used_ids = np.flatnonzero(used)
        tmap = np.full(len(other.terms), -1, dtype=np.int32)
        names = other.terms
        tmap[used_ids] = self._ids_of([names[t] for t in used_ids.tolist()])
        out: I32 = tmap[tids]
        return out

    def take(self, slots: I64) -> tuple[I64, I32, I32]:
        """How many terms each of ``slots`` has, and their term ids and frequencies
        (flat, in slot order): this vocabulary's ids."""
        starts = self._off[slots]
        lens = self._off[slots + 1] - starts
        k = int(slots.shape[0])
        if k and int(slots[-1]) - int(slots[0]) + 1 == k and bool((np.diff(slots) == 1).all()):
            a, b = int(self._off[int(slots[0])]), int(self._off[int(slots[-1]) + 1])
            return lens, self._tids[a:b].copy(), self._tfs[a:b].copy()  # a run: slices
        at = ranges(starts, lens)
        return lens, self._tids[at], self._tfs[at]

    def row(self, slot: int) -> tuple[I32, I32]:
        """The term ids and frequencies of a slot (views)."""
        a, b = int(self._off[slot]), int(self._off[slot + 1])
        return self._tids[a:b], self._tfs[a:b]

    def flatten(
        self, docs: Sequence[Mapping[str, int] | int], twin: DocTerms | None = None
    ) -> tuple[I64, I32, I32]:
        """How many distinct terms each document has, and their flat term ids (in this
        vocabulary, new ones added) and frequencies, each document's terms in its counts'
        order. An ``int`` instead of counts is a slot of ``twin`` (another forward index,
        analyzed alike) whose terms are copied, translated with array operations."""
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
        if not refs:
            return nterms, np.asarray(tids, dtype=np.int32), np.asarray(tfs, dtype=np.int32)
        assert twin is not None
        is_ref = nterms < 0
        ref_lens, ref_tids, ref_tfs = twin.take(np.asarray(refs, dtype=np.int64))
        nterms[is_ref] = ref_lens
        starts = np.cumsum(nterms) - nterms
        flat_t = np.empty(int(nterms.sum()), dtype=np.int32)
        flat_f = np.empty_like(flat_t)
        own = ranges(starts[~is_ref], nterms[~is_ref])
        flat_t[own] = np.asarray(tids, dtype=np.int32)
        flat_f[own] = np.asarray(tfs, dtype=np.int32)
        dst = ranges(starts[is_ref], ref_lens)
        flat_t[dst] = self.translate(twin, ref_tids)
        flat_f[dst] = ref_tfs
        return nterms, flat_t, flat_f

    def append(self, nterms: I64, tids: I32, tfs: I32) -> None:
        """Append ``len(nterms)`` slots, slot ``i`` holding the next ``nterms[i]`` of the
        flat ``tids`` (ids of this vocabulary) and ``tfs``."""
        n, s, k, m = self._n, self._slots, int(tids.shape[0]), int(nterms.shape[0])
        if n + k > self._tids.shape[0]:
            cap = max(n + k, 2 * self._tids.shape[0])
            self._tids = grown(self._tids, cap)
            self._tfs = grown(self._tfs, cap)
        self._tids[n : n + k] = tids
        self._tfs[n : n + k] = tfs
        if s + m + 1 > self._off.shape[0]:
            self._off = grown(self._off, max(s + m + 1, 2 * self._off.shape[0]))
        self._off[s + 1 : s + 1 + m] = n + np.cumsum(nterms)
        self._n, self._slots = n + k, s + m

    def extend(
        self, docs: Sequence[Mapping[str, int] | int], twin: DocTerms | None = None
    ) -> tuple[I32, I32, I64]:
        """:meth:`flatten` and :meth:`append` ``docs``; returns the flat term ids and
        frequencies and how many terms each document has."""
        nterms, tids, tfs = self.flatten(docs, twin)
        self.append(nterms, tids, tfs)
        return tids, tfs, nterms

    @classmethod
    def from_arrays(cls, terms: list[str], off: I64, tids: I32, tfs: I32) -> DocTerms:
        """A forward index over ``terms`` with ``len(off) - 1`` slots, slot ``s`` holding
        ``tids``/``tfs[off[s]:off[s + 1]]``, copied into arrays with :func:`headroom`
        (unwritten): the appends after a restart fit without growing them (growing a 1M
        view's copied 2 x 154 MB held both copies for a moment, at its first append)."""
        out = cls()
        out.terms = terms
        out.term_id = {t: i for i, t in enumerate(terms)}
        out._off = grown(np.asarray(off, dtype=np.int64), headroom(off.shape[0]))
        out._tids = grown(np.asarray(tids, dtype=np.int32), headroom(tids.shape[0]))
        out._tfs = grown(np.asarray(tfs, dtype=np.int32), headroom(tfs.shape[0]))
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


A = TypeVar("A", bound=np.ndarray[Any, Any])


def grown(arr: A, cap: int) -> A:
    """``arr`` (at most ``cap`` items) copied into the start of a new array of ``cap``
    items whose rest is left unwritten: its pages stay out of resident memory until
    appends reach them. (``np.resize`` fills it with repeats of ``arr``: a 1M view's
    forward index, doubled at its first append after a restart, made 170 MB of copies
    resident.)"""
    out = np.empty(cap, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out  # type: ignore[return-value]


def headroom(n: int) -> int:
    """A capacity for ``n`` items loaded whole and appended to later: a sixteenth more,
    at least 4,096 (a view's appends between two restarts are far fewer)."""
    return n + max(4096, n // 16)


def zero_padded(arr: A, n: int) -> A:
    """``arr`` if it holds ``n`` items, else a copy twice as long (at least ``n``, 64)
    padded with zeros."""
    if n <= arr.shape[0]:
        return arr
    out = np.zeros(max(64, n, 2 * arr.shape[0]), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out  # type: ignore[return-value]


def ranges(starts: I64, lens: I64) -> I64:
    """The concatenated ranges ``[start, start + len)``."""
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lens) - lens
    out: I64 = np.repeat(starts - before, lens) + np.arange(total, dtype=np.int64)
    return out


def doc_lengths(nterms: I64, tfs: I32) -> I64:
    """Each document's length (the sum of its ``nterms[i]`` consecutive ``tfs``), without
    a running sum as long as ``tfs`` (a 1M-document load: 170 MB of new pages)."""
    out = np.zeros(nterms.shape[0], dtype=np.int64)
    has = np.flatnonzero(nterms > 0)
    if has.size:
        starts = (np.cumsum(nterms) - nterms)[has]
        out[has] = np.add.reduceat(tfs, starts, dtype=np.int64)
    return out


def count_terms(lens: I64, tids: I32, nvocab: int) -> tuple[I64, I32, I32]:
    """Per document (``lens[i]`` consecutive ``tids``, an analyzed text's terms with
    repeats), its distinct terms in order of first occurrence and their counts: what a
    ``Counter`` of each holds, flat (how many each, term ids, frequencies)."""
    doc = np.repeat(np.arange(lens.shape[0], dtype=np.int64), lens)
    key = doc * max(nvocab, 1) + tids
    uniq, first, cnt = np.unique(key, return_index=True, return_counts=True)
    order = np.argsort(first)  # each document's terms in order of first occurrence
    uniq = uniq[order]
    counts = np.bincount(uniq // max(nvocab, 1), minlength=lens.shape[0]).astype(np.int64)
    return counts, (uniq % max(nvocab, 1)).astype(np.int32), cnt[order].astype(np.int32)


def stable_order(keys: I32) -> I64:
    """``np.argsort(keys, kind="stable")`` of non-negative keys, by two 16-bit passes
    (numpy sorts 16-bit keys by radix: half the time of its 32-bit sort)."""
    if not keys.shape[0] or int(keys.max()) <= 0xFFFF:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    # the first 65,536 terms of a vocabulary hold most postings (the later ones are
    # first seen late, so rare): one pass over those, a second only over the others
    small = keys <= 0xFFFF
    head, tail = np.flatnonzero(small), np.flatnonzero(~small)
    rest = keys[tail]
    low = np.argsort((rest & 0xFFFF).astype(np.uint16), kind="stable")
    high = np.argsort((rest[low] >> 16).astype(np.uint16), kind="stable")
    order = np.argsort(keys[head].astype(np.uint16), kind="stable")
    out: I64 = np.concatenate([head[order], tail[low[high]]])
    return out


class TermGroups:
    """Postings by term, CSR over term ids (module doc): term ``t``'s slots (ascending)
    and frequencies are ``slots``/``tfs[off[t]:off[t + 1]]``."""

    __slots__ = ("bound", "off", "slots", "tfs")

    def __init__(self, tids: I32, slots: I32, tfs: I32 | F32, nvocab: int) -> None:
        order = stable_order(tids)
        self.off = np.zeros(nvocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(tids, minlength=nvocab), out=self.off[1:])
        self.slots: I32 = slots[order]
        self.tfs: F32 = tfs[order].astype(np.float32)
        self.bound = int(slots.max(initial=-1)) + 1  # every slot is below it

    @classmethod
    def of(cls, off: I64, slots: I32, tfs: F32, nslots: int) -> TermGroups | None:
        """Groups already made (saved beside the store: ``view_terms``), arrays taken as
        they are: a restart skips the sort of every posting (about 2.5 s a 1M view).
        None when they are not postings by term over ``nslots`` slots: a file that lies
        is refused, not trusted (checked here, once: :meth:`fits` compares sizes)."""
        n = int(slots.shape[0])
        if not (
            off.shape[0] >= 1
            and int(off[0]) == 0
            and int(off[-1]) == n == tfs.shape[0]
            and bool(np.all(np.diff(off) >= 0))
            and (not n or (int(slots.min()) >= 0 and int(slots.max()) < nslots))
        ):
            return None
        out = cls.__new__(cls)
        out.off, out.slots, out.tfs, out.bound = off, slots, tfs, nslots
        return out

    def fits(self, nvocab: int, npostings: int, nslots: int) -> bool:
        """Whether these groups can be the postings of a forward index of ``nvocab``
        terms, ``npostings`` postings and ``nslots`` slots."""
        return (
            self.off.shape[0] == nvocab + 1
            and self.slots.shape[0] == npostings
            and self.bound <= nslots
        )

    def count(self, tid: int) -> int:
        if tid + 1 >= self.off.shape[0]:
            return 0
        return int(self.off[tid + 1] - self.off[tid])

    def postings(self, tid: int) -> Postings | None:
        """A term's postings (None: none here)."""
        if tid + 1 >= self.off.shape[0]:
            return None
        a, b = int(self.off[tid]), int(self.off[tid + 1])
        return Postings.of(self.slots[a:b], self.tfs[a:b]) if b > a else None

    def common(self, more_than: int) -> list[int]:
        """The terms with more than ``more_than`` postings."""
        ids: list[int] = np.flatnonzero(np.diff(self.off) > more_than).tolist()
        return ids

    def flat(self) -> tuple[I32, I32, F32]:
        """Every posting as flat ``(term id, slot, tf)``, by term."""
        tids = np.repeat(np.arange(self.off.shape[0] - 1, dtype=np.int32), np.diff(self.off))
        return tids, self.slots, self.tfs


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
