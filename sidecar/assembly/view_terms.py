"""A view's BM25 terms saved beside the store (a PostgreSQL store: in its database), so
that a start does not analyze every text of a large collection again (issue 36).

Where they are kept is the store's (``StoreBackend.terms_place``, ``terms_place.py``): a
file per collection beside a SQLite store (``sidecar/store/lexical_files.py``: atomic
writes, checksums, the scrub after a forget), a row per collection in a PostgreSQL store's
database, shared by its daemons and deleted with any removal (``pg/saved_terms.py``).
The file of a collection holds, per record of the view when it was saved, its
id, a 64-bit BLAKE2b digest of the text that was analyzed, and its analyzed terms (term
ids and frequencies, CSR by record, over a vocabulary of only the terms those records
use) and, from :data:`VERSION` 2, the same postings by term (``TermGroups``: a restart
that takes every record from the file in its order hands them to the index as they are,
instead of sorting every posting by term again). A view's load
(``CollectionView.reload``) takes a record's terms from the file when its id is there
with the digest of its current text, and analyzes any other record
(written since the save, or changed): appends since the save are replayed from the store,
which the load reads anyway. The file holds only for the analyzer it was made with
(:func:`analyzer_key`), the format's :data:`VERSION` and the collection's state as saved
(``lexical_files.holds``: no record removed since); otherwise it is removed and the view
analyzes everything, then saves anew.

A view saves when its load or its catch-ups took :data:`SAVE_MIN_ANALYZED` records or
more (a tenth of the view, for large ones) from anywhere but its own file since its last
save (analyzed, copied from a twin, or read from a version-1 file): the arrays are taken under
the caller's lock (:func:`snapshot`) and written by a background thread.

A load (:func:`index_texts`) gathers every document's terms into one flat CSR by document
(the file's slots taken as a run, a twin's copied, analyzed texts counted with numpy) and
hands it to the index at once (``BM25Index.add_arrays``); the saved digests are checked in
C. At 100k records the step takes about 0.2 s from the file, against 0.7 s with a
``Counter`` or a slot per document and a call per term.

Small views are not saved (issue 36, the 2,000-namespace benchmark): reading a 500-record
file (100 KB) and taking its terms measured 2.6 ms against 6.7-10 ms to analyze the 500
texts, but every cold namespace would then write two such files (fsync'ed) on its first
load, 2,000 namespaces would keep 4,000 files, and the scrub after every forget reads the
header of every file beside the store (``lexical_files.scrub``), so a forget would slow
with the number of namespaces. Worth it once that scrub looks only at the files of the
collections a forget changed.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import structlog

from sidecar.memory.core.bm25_arrays import DocTerms, TermGroups, count_terms, ranges
from sidecar.memory.core.lexical import BM25Index
from sidecar.priority import lower_this_thread
from sidecar.store import lexical_files
from sidecar.store.terms_place import TermsPlace
from sidecar.store.types import CollectionState

#: The analyzed text of an id in a twin view (None: the twin has no such id).
TwinText = Callable[[str], "str | None"]

log = structlog.get_logger(__name__)

#: 2 added the postings by term (three sections); a version-1 file is still read (its
#: postings are sorted at load, and the view saves a version-2 file).
VERSION = 2
#: The body sections of each version read.
SECTIONS = {1: 8, 2: 11}
#: Texts analyzed since the last save (by a load or catch-ups) that make a save worth it.
SAVE_MIN_ANALYZED = 1024

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


def text_digest(text: str) -> int:
    """64 bits of BLAKE2b of ``text``: the saved terms are a record's while this matches."""
    raw = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(raw, "little")


_UTF8 = functools.partial(str.encode, encoding="utf-8", errors="surrogatepass")
_BLAKE = functools.partial(hashlib.blake2b, digest_size=8)
_DIGEST = operator.methodcaller("digest")


def text_digests(texts: Sequence[str]) -> U64:
    """:func:`text_digest` of each text, iterated in C (no Python frame per text)."""
    try:  # the same bytes as "surrogatepass" when the text has no lone surrogate, sooner
        raw = b"".join(map(_DIGEST, map(_BLAKE, map(str.encode, texts))))
    except UnicodeEncodeError:
        raw = b"".join(map(_DIGEST, map(_BLAKE, map(_UTF8, texts))))
    n = len(texts)
    out: U64 = np.frombuffer(raw, dtype="<u8", count=n).astype(np.uint64)
    return out


def analyzer_key(index: BM25Index) -> str:
    """What makes two indexes analyze a text alike (stemming, the stop words)."""
    words = "\n".join(sorted(index.stopwords)).encode("utf-8", "surrogatepass")
    return f"{index.stem}:{hashlib.sha256(words).hexdigest()[:32]}"


@dataclass(frozen=True)
class SavedTerms:
    """A file's terms: :attr:`docs` (slot = the record's place in the file) and, through
    :meth:`slots_of`, the slot of each id whose text has the saved digest. The ids stay
    one UTF-8 blob (``id_off``: byte offsets) until a load that is not a restart in the
    file's order needs them one by one (:attr:`ids`, :attr:`slots`): at 1M records a list
    of their strings and a dict over them cost about 150 MB during the load."""

    docs: DocTerms
    digests: U64
    id_off: I64
    id_blob: bytes
    groups: TermGroups | None = None  # the postings by term (slot = place in the file)

    def __len__(self) -> int:
        return int(self.id_off.shape[0]) - 1

    @functools.cached_property
    def ids(self) -> list[str]:
        """The ids, in file order."""
        return _strings(self.id_off, self.id_blob)

    @functools.cached_property
    def slots(self) -> dict[str, int]:
        """Each id's slot."""
        return {rid: i for i, rid in enumerate(self.ids)}

    def leads(self, rids: Sequence[str]) -> bool:
        """Whether ``rids`` begin with the file's ids in its order (a restart), compared
        as one string and its offsets rather than as a string per id."""
        m = len(self)
        if len(rids) < m:
            return False
        head = rids[:m]
        text = self.id_blob.decode("utf-8", "surrogatepass")
        if len(text) != len(self.id_blob):  # not ASCII: byte and character offsets differ
            return list(head) == self.ids
        lens = np.fromiter(map(len, head), np.int64, m)
        return bool(np.array_equal(np.cumsum(lens), self.id_off[1:])) and "".join(head) == text

    def slots_of(
        self, rids: Sequence[str], texts: Sequence[str], digests: U64 | None = None
    ) -> I64:
        """The slot of each record whose text has the saved digest (-1: none);
        ``digests``: the texts' own, when known (a saved view's: nothing is hashed)."""
        n, m = len(rids), len(self)
        got = np.full(n, -1, dtype=np.int64)
        if self.leads(rids):  # the others are not in the file: a view's ids are distinct
            got[:m] = np.arange(m)
        else:
            got[:] = np.fromiter(map(self.slots.get, rids, itertools.repeat(-1)), np.int64, n)
        have = np.flatnonzero(got >= 0)
        if have.size == n:
            mine = text_digests(texts) if digests is None else digests
            got[mine != self.digests[got]] = -1
        elif have.size:
            mine = text_digests(list(map(texts.__getitem__, have.tolist())))
            got[have[mine != self.digests[got[have]]]] = -1
        return got


@dataclass(frozen=True)
class Snapshot:
    """What a save writes, taken under the caller's lock: the arrays are read later, by
    the writer thread (a forward index only ever appends past what it held)."""

    collection: str
    state: CollectionState
    analyzer: str
    ids: Sequence[str]
    texts: Sequence[str]  # the analyzed text of each id
    slots: I64  # each id's slot in ``docs``
    docs: DocTerms


def snapshot(
    collection: str,
    state: CollectionState,
    index: BM25Index,
    ids: Sequence[str],
    texts: Sequence[str],
) -> Snapshot | None:
    """The snapshot of ``index`` for the records ``ids`` (with their analyzed ``texts``);
    None when one of them is not indexed (nothing to save that would hold)."""
    slots = index.slots_of(ids)  # under the caller's lock: one pass in C
    if slots.size and int(slots.min()) < 0:
        return None
    return Snapshot(
        collection, state, analyzer_key(index), list(ids), list(texts), slots, index.forward
    )


def encode(snap: Snapshot) -> tuple[dict[str, object], list[memoryview]]:
    """The header fields and body of ``snap``'s file, the body as its sections' buffers
    (the arrays' own memory: written one after another, never joined into one copy)."""
    off, tids, tfs = snap.docs.arrays()
    starts = off[snap.slots]
    lens = off[snap.slots + 1] - starts
    take = ranges(starts, lens)
    used, local = np.unique(tids[take], return_inverse=True)
    terms = [snap.docs.terms[t] for t in used.tolist()]
    new_off = np.zeros(len(snap.ids) + 1, dtype=np.int64)
    new_off[1:] = np.cumsum(lens)
    digests = text_digests(snap.texts)
    term_off, term_bytes = _blob(terms)
    id_off, id_bytes = _blob(snap.ids)
    local32: I32 = local.astype(np.int32)
    freqs = tfs[take].astype(np.int32)
    del local, take, used
    slots = np.repeat(np.arange(len(snap.ids), dtype=np.int32), lens)
    groups = TermGroups(local32, slots, freqs, len(terms))  # the writer thread's sort
    del slots
    sections = [
        _raw(term_off),
        memoryview(term_bytes),
        _raw(id_off),
        memoryview(id_bytes),
        _raw(digests),
        _raw(new_off),
        _raw(local32),
        _raw(freqs),
        _raw(groups.off),
        _raw(groups.slots),
        _raw(groups.tfs),
    ]
    header: dict[str, object] = {
        "version": VERSION,
        "cid": snap.state.cid,
        "removals": snap.state.removals,
        "analyzer": snap.analyzer,
        "sections": [s.nbytes for s in sections],
    }
    return header, sections


def _raw(values: npt.NDArray[np.generic]) -> memoryview:
    """The bytes of ``values`` in memory order (native byte order, as decode reads them)."""
    return np.ascontiguousarray(values).data.cast("B")


def decode(
    meta: Mapping[str, object], body: bytes | bytearray, vocabulary: DocTerms | None = None
) -> SavedTerms | None:
    """The terms of a checked file's body (None: sections that do not add up); a term
    ``vocabulary`` holds too is its string object there (a 1M view's million terms: about
    55 MB of strings not held twice)."""
    sizes, version = meta.get("sections"), meta.get("version")
    if (
        not isinstance(sizes, list)
        or version not in SECTIONS
        or len(sizes) != SECTIONS[version]
        or sum(sizes) != len(body)
    ):
        return None
    cuts = np.cumsum([0, *sizes]).tolist()
    whole = memoryview(body)  # sections as views: slices of bytes would copy them
    part = [whole[a:b] for a, b in itertools.pairwise(cuts)]
    terms = _strings(np.frombuffer(part[0], dtype=np.int64), bytes(part[1]))
    if vocabulary is not None and vocabulary.terms:
        terms = vocabulary.shared(terms)
    id_off, id_blob = np.frombuffer(part[2], dtype=np.int64), bytes(part[3])
    digests = np.frombuffer(part[4], dtype=np.uint64)
    off = np.frombuffer(part[5], dtype=np.int64)
    tids = np.frombuffer(part[6], dtype=np.int32)
    tfs = np.frombuffer(part[7], dtype=np.int32)
    n = int(id_off.shape[0]) - 1
    ok = (
        n >= 0
        and int(id_off[-1]) == len(id_blob)
        and digests.shape[0] == n
        and off.shape[0] == n + 1
        and tids.shape == tfs.shape
    )
    if not ok or (n and (int(off[-1]) != tids.shape[0] or int(tids.max(initial=0)) >= len(terms))):
        return None
    docs = DocTerms.from_arrays(terms, off, tids, tfs)
    groups = None
    if len(part) > SECTIONS[1]:  # copies: the body is let go
        groups = TermGroups.of(
            np.frombuffer(part[8], dtype=np.int64).copy(),
            np.frombuffer(part[9], dtype=np.int32).copy(),
            np.frombuffer(part[10], dtype=np.float32).copy(),
            n,
        )
        if groups is None or not groups.fits(len(terms), tids.shape[0], n):
            return None
    return SavedTerms(docs, digests, id_off, id_blob, groups)


def load(
    place: TermsPlace,
    collection: str,
    state: CollectionState,
    index: BM25Index,
    twin: BM25Index | None = None,
) -> SavedTerms | None:
    """The saved terms of ``collection`` when its file holds for ``state`` and analyzes
    like ``index`` (module doc); a file that does not is removed. ``twin``: an index whose
    vocabulary the file's mostly repeats (the history beside the durable memories), whose
    term strings are taken for the equal ones instead of a second copy of each (a string
    is only text: the twin's analyzer does not matter)."""
    got = place.read(collection)
    if got is None:
        return None
    meta, body = got
    saved = None
    if (
        meta.get("version") in SECTIONS
        and meta.get("analyzer") == analyzer_key(index)
        and lexical_files.holds(meta, state)
    ):
        try:
            saved = decode(meta, body, twin.forward if twin is not None else None)
        except (ValueError, UnicodeDecodeError):
            saved = None
    if saved is None:
        log.info("lexical.saved_terms_dropped", collection=collection[:200])
        place.remove(collection)
    return saved


def save(place: TermsPlace, snap: Snapshot) -> bool:
    """Write ``snap``; False when ``place`` refused it (a removal since its state)."""
    header, body = encode(snap)
    return place.write(snap.collection, header, body)


def save_in_background(place: TermsPlace, snap: Snapshot) -> threading.Thread:
    """:func:`save` in a daemon thread at the lowest CPU priority (a failure is logged;
    the next load analyzes)."""

    def run() -> None:
        lower_this_thread()  # nothing waits for it but a shutdown: the CPU loads leave
        try:
            if not save(place, snap):
                log.info("lexical.save_refused", collection=snap.collection[:200])
        except Exception as exc:
            log.warning("lexical.save_failed", collection=snap.collection[:200], error=repr(exc))

    thread = threading.Thread(target=run, name="libravdb-terms-save", daemon=True)
    thread.start()
    return thread


def _blob(strings: Sequence[str]) -> tuple[I64, bytes]:
    parts = [s.encode("utf-8", "surrogatepass") for s in strings]
    off = np.zeros(len(parts) + 1, dtype=np.int64)
    if parts:
        off[1:] = np.cumsum([len(p) for p in parts])
    return off, b"".join(parts)


def _strings(off: I64, blob: bytes) -> list[str]:
    bounds = off.tolist()
    return [blob[a:b].decode("utf-8", "surrogatepass") for a, b in itertools.pairwise(bounds)]


class Indexed(NamedTuple):
    """What :func:`index_texts` did: texts ``analyzed``, and how many documents did not
    come from a saved file of this view that holds their postings by term (``unsaved``:
    a save would spare the next start their analysis, copy or sort)."""

    analyzed: int
    unsaved: int


def index_texts(
    index: BM25Index,
    docs: Iterable[tuple[str, str]],
    saved: SavedTerms | None,
    twin: BM25Index | None,
    twin_text: TwinText | None,
    part_size: int,
    digests: U64 | None = None,
) -> Indexed:
    """Add ``(id, text)`` pairs to ``index``: a text with saved terms takes them, else one
    the ``twin`` index (analyzing alike) holds for the same id and text (``twin_text``)
    copies the twin's, else it is analyzed. The terms of every document are gathered as
    flat arrays (a load's 100k documents hold a few MB) and handed to the index at once
    (``BM25Index.add_arrays``); texts are analyzed ``part_size`` at a time, each part's
    terms turned into ids before the next. When every document comes from the saved file
    in its order (a restart), the file's forward index and postings by term are taken
    as they are. ``digests``: the :func:`text_digests` of every row of the caller's,
    taken when ``docs`` are one per row (then in row order: a view's texts that changed
    are in its order), else ignored."""
    if twin_text is None or (twin is not None and not twin.analyzes_like(index)):
        twin = None
    pairs = list(docs)
    rids = list(map(operator.itemgetter(0), pairs))
    texts = list(map(operator.itemgetter(1), pairs))
    del pairs
    n = len(rids)
    if not n:
        return Indexed(0, 0)
    if digests is not None and digests.shape[0] != n:
        digests = None
    saved_at = saved.slots_of(rids, texts, digests) if saved is not None else np.full(n, -1)
    if saved is not None and index.empty and _in_file_order(saved_at, len(saved)):
        # a restart: every document from the file in its order, the file's arrays taken
        index.take_forward(rids, saved.docs, saved.groups)
        return Indexed(0, 0 if saved.groups is not None else n)
    twin_at = np.full(n, -1, dtype=np.int64)
    if twin is not None and twin_text is not None:
        rest = np.flatnonzero(saved_at < 0)
        at = twin.slots_of([rids[i] for i in rest.tolist()])
        rest, at = rest[at >= 0], at[at >= 0]
        same = map(
            operator.eq,
            map(twin_text, [rids[i] for i in rest.tolist()]),
            (texts[i] for i in rest.tolist()),
        )
        keep = np.fromiter(same, bool, rest.shape[0])
        twin_at[rest[keep]] = at[keep]
    todo = np.flatnonzero((saved_at < 0) & (twin_at < 0))
    nterms = np.zeros(n, dtype=np.int64)
    parts: list[tuple[I64, I32, I32]] = []  # (documents, term ids, frequencies)
    forward = index.forward
    for rows, source in (
        (saved_at, saved.docs if saved else None),
        (twin_at, twin.forward if twin else None),
    ):
        took = np.flatnonzero(rows >= 0)
        if source is not None and took.size:
            lens, tids, tfs = source.take(rows[took])
            nterms[took] = lens
            parts.append((took, forward.translate(source, tids), tfs))
    analyze = index.analyze
    for lo in range(0, todo.shape[0], max(part_size, 1)):
        took = todo[lo : lo + part_size]
        terms = [analyze(texts[i]) for i in took.tolist()]
        lens = np.fromiter(map(len, terms), np.int64, len(terms))
        ids = index.term_ids(list(itertools.chain.from_iterable(terms)))
        del terms
        counts, tids, tfs = count_terms(lens, ids, len(forward.terms))
        nterms[took] = counts
        parts.append((took, tids, tfs))
    if len(parts) == 1 and parts[0][0].shape[0] == n:  # one source: as they are
        flat_t, flat_f = parts[0][1], parts[0][2]
    else:
        starts = np.cumsum(nterms) - nterms
        flat_t = np.empty(int(nterms.sum()), dtype=np.int32)
        flat_f = np.empty_like(flat_t)
        for took, tids, tfs in parts:
            at = ranges(starts[took], nterms[took])
            flat_t[at] = tids
            flat_f[at] = tfs
    index.add_arrays(rids, nterms, flat_t, flat_f)
    own = 0 if saved is None or saved.groups is None else int((saved_at >= 0).sum())
    return Indexed(int(todo.shape[0]), n - own)


def _in_file_order(saved_at: I64, saved: int) -> bool:
    """Whether the documents are the file's ``saved`` ones, in its order."""
    n = int(saved_at.shape[0])
    return n == saved and bool((saved_at == np.arange(n)).all())


def twin_text(by_id: Mapping[str, int], record_text: Callable[[int], str]) -> TwinText:
    """The analyzed text of an id in a twin view (None: not there)."""

    def text(rid: str) -> str | None:
        j = by_id.get(rid)
        return None if j is None else record_text(j)

    return text
