"""How generic each remembered turn is, for implicit recall (:mod:`sidecar.assembly.implicit`).

A message such as "Plan me a paella night for Saturday" shares no word and little meaning
with the "I'm allergic to shellfish" it should recall (cosine 0.1-0.3 with
all-MiniLM-L6-v2), while generic chat lines ("Thanks, appreciate your help!", "Hey, good
to see you!") sit near almost every query: they are *hubs* of the embedding space and fill
the top of a plain cosine ranking whatever is asked. The fix is the hubness correction of
cross-domain retrieval (CSLS): a turn is scored by its cosine with the query **minus its
density**, the mean cosine of its ``k`` nearest turns, so a turn that resembles much of
the history gains nothing from resembling the query too, and a specific statement that
stands apart from the chatter rises.

Two details make it work on transcripts:

* **The speaker's label is taken out** of every vector first. A turn stored as
  ``"Caroline: I'm allergic to shellfish"`` shares the direction of the label
  ``"Caroline:"`` with all of Caroline's turns (the same effect the speaker focus removes
  from a query, :mod:`sidecar.assembly.speaker_focus`), which makes every one of them
  look dense. A row ``x`` with label vector ``e`` (unit) becomes ``x - (x . e) e``
  (unit length after), so its cosine with a query ``q`` is
  ``(x . q - (x . e)(e . q)) / ||x - (x . e) e||``: one scan of the stored vectors still
  serves, with two numbers kept per row (:attr:`Density.coef`, :attr:`Density.norm`).
* **The density is measured against a bounded reference**: the first
  :data:`REFERENCE_ROWS` rows of the view (the oldest turns; all of them in a store that
  small), so building it costs ``rows x 512`` products, not ``rows**2``, and an appended
  turn costs one small product. In a smaller reference the same ``k`` reaches further out
  (a coarser estimate of the same thing); on the dev cue set a reference of 128 or 256
  rows ranked the cues as well as every row did (docs/memory.md).

:class:`Density` is kept in step with a view incrementally: appended rows are computed
and, while the reference is not full, join it (the earlier rows' neighbours are updated
with them); rewritten rows are computed again; a new row layout or a new set of speaker
labels rebuilds it. Pure numpy: the caller passes the rows and how to read them.

A view saved beside the store (:mod:`sidecar.assembly.view_snapshot`) keeps its density
too when it was in step with the rows saved (:meth:`Density.saved`, handed to the view by
``view.density_synced``): a start whose view came from that file adopts it
(:meth:`Density.sync` with ``view.saved_density``) when the speaker labels are the same,
with bit-identical vectors, instead of building it again; the rows replayed since the
save are then brought in as any appended or rewritten rows are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import text_label
from sidecar.assembly.duplicates import text_key
from sidecar.assembly.view_load import unit
from sidecar.assembly.view_rows import TURN, Matrix, ViewRows

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

DENSITY_K = 10  # nearest reference rows averaged
REFERENCE_ROWS = 512  # rows every density is measured against (the first of the view)
MIN_NORM = 0.05  # a row that is (almost) only its label has no content direction left
#: A density means something once the reference holds this many rows. In a smaller
#: history nothing has near neighbours, so every turn stands out for every prompt ("hello"
#: recalled both statements of a new user): implicit recall waits (:attr:`Density.trusted`)
#: and the hybrid ranking, with its relevance floor, answers alone, as before it.
TRUSTED_ROWS = 64
#: Densities are read relative to the median of the user's turns, placed at this value
#: (the median of the dev histories, 0.575-0.592 per conversation). How dense a history is
#: overall depends on how much of it is alike: in a sparse one (a few hundred turns on
#: unrelated subjects) every turn's neighbours are far, and a statement alone on its
#: subject would stand out for "hello" as much as for the message it bears on. What
#: matters is how generic a turn is *for its history*.
TYPICAL_DENSITY = 0.58
MEDIAN_SAMPLE = 8192  # rows the median is taken over, at most (evenly spaced)
CHUNK = 4096  # rows per product (bounded temporaries)


#: The arrays of a full build a saved view keeps (:class:`SavedDensity`), in order.
SAVED = (
    "label_mat",
    "label",
    "coef",
    "norm",
    "eligible",
    "copies",
    "top",
    "ref_rows",
    "ref",
    "values",
)


@dataclass(frozen=True)
class SavedDensity:
    """A density's arrays (:data:`SAVED`) for the first ``n`` rows of a view, with the
    parameters and speaker labels it was built with."""

    k: int
    reference: int
    labels: tuple[str, ...]
    n: int
    arrays: Mapping[str, npt.NDArray[np.generic]]


class View(Protocol):
    """What :meth:`Density.sync` reads of a cached collection view
    (:class:`sidecar.assembly.cache.CollectionView`); ``saved_density``: the density its
    saved file held (None: none), ``density_synced``: told after each sync."""

    stamp: int
    touched: list[str]
    by_id: dict[str, int]
    saved_density: SavedDensity | None

    def density_synced(self, density: Density) -> None: ...

    @property
    def rows(self) -> ViewRows: ...

    @property
    def matrix(self) -> Matrix | None: ...


def text_keys(roles: Sequence[str], texts: Sequence[str]) -> list[str]:
    """``[text_key(role, text) ...]``, with a text whose only characters beyond ASCII
    separate words (a dash, quotes) keyed as ASCII, without the regex (the same keys:
    tested against ``text_key``; a fifth of a small history's texts in the many-namespace
    benchmark, and the regex took half the time of keying them all)."""
    out: list[str] = []
    for role, text in zip(roles, texts, strict=True):
        if not text.isascii():
            folded = text.casefold()
            if not _WORD_BEYOND_ASCII.search(folded):
                body = b" ".join(folded.encode().translate(_WORD).lower().split()).decode()
                out.append(f"{role}\x1f{body}")
                continue
        out.append(text_key(role, text))
    return out


#: A letter or digit beyond ASCII (a word character of ``duplicates.text_key``'s regex).
_WORD_BEYOND_ASCII = re.compile(r"[^\W\x00-\x7f]")
#: ``duplicates.text_key``'s table for ASCII: letters and digits kept, every other byte
#: (of the UTF-8 of what separates words) a space.
_WORD = bytes(c if chr(c).isalnum() and c < 128 else 32 for c in range(256))


class Density:
    """Per-row density and label coefficients of a view's unit rows (module doc)."""

    def __init__(self, k: int = DENSITY_K, reference: int = REFERENCE_ROWS) -> None:
        self.k = max(1, k)
        self.reference = max(1, reference)
        self.key: tuple[object, ...] | None = None  # (layout stamp, labels)
        self.n = 0  # rows computed
        self.labels: tuple[str, ...] = ()
        self.label_mat = np.zeros((1, 0), dtype=np.float32)  # unit label rows + a zero row
        self.label = np.zeros(0, dtype=np.int64)  # row -> label index (len(labels): none)
        self.coef = np.zeros(0, dtype=np.float32)  # x . e
        self.norm = np.zeros(0, dtype=np.float32)  # ||x - (x . e) e||, 0 for an empty row
        self.eligible = np.zeros(0, dtype=bool)  # rows implicit recall may return
        # rows with the same text: not each other's neighbours (copy_of)
        self.copies = np.zeros(0, dtype=np.int64)
        self._texts: dict[str, int] = {}  # the reference rows' texts -> their codes
        self._next_code = 0  # the code of the next text not among them
        self._copy_of: Callable[[int], str] | None = None
        self._eligible_rows: Callable[[I64], npt.NDArray[np.bool_]] | None = None
        self._copy_keys: Callable[[I64], Sequence[str]] | None = None
        self.top = np.zeros((0, self.k), dtype=np.float32)  # best cosines to the reference
        self.ref_rows = np.zeros(0, dtype=np.int64)
        self.ref = np.zeros((0, 0), dtype=np.float32)  # their label-free unit vectors
        self.values = np.zeros(0, dtype=np.float32)  # the densities
        self.seen = 0  # how much of a view's ``touched`` log is accounted for
        # derived per row for the queries (_derive), for this many rows (-1: stale)
        self._derived = -1
        self._inv_norm = np.zeros(0, dtype=np.float32)
        self._bias = np.zeros(0, dtype=np.float32)
        self._bias_eligible = np.zeros(0, dtype=np.float32)
        self._labelled = False
        self._texts_stale = False  # adopted: _texts is rebuilt from ``copies`` when needed

    def saved(self) -> SavedDensity:
        """Copies of the arrays, to be written by another thread."""
        arrays = {name: getattr(self, name).copy() for name in SAVED}
        return SavedDensity(self.k, self.reference, self.labels, self.n, arrays)

    def adopt(
        self, saved: SavedDensity, stamp: object, rows: int, label_vecs: Mapping[str, F32]
    ) -> bool:
        """Take ``saved`` as the density of a view's first ``saved.n`` rows (of ``rows``)
        at layout ``stamp`` when it was built as this one would be: the same parameters,
        labels and label vectors (bit for bit); False (nothing changed) otherwise."""
        labels = tuple(sorted(label_vecs))
        mat = saved.arrays.get("label_mat")
        ok = (saved.k, saved.reference, saved.labels) == (self.k, self.reference, labels)
        if not ok or mat is None or saved.n > rows or mat.shape[0] != len(labels) + 1:
            return False
        dims = int(mat.shape[1])
        mine = np.vstack(
            [*(unit(label_vecs[name], dims) for name in labels), np.zeros((1, dims), np.float32)]
        )
        if mine.dtype != mat.dtype or mine.tobytes() != mat.tobytes():
            return False
        for name in SAVED:
            setattr(self, name, saved.arrays[name])
        self.labels, self.n, self.key = labels, saved.n, (stamp, labels)
        self._texts, self._texts_stale, self._derived = {}, True, -1
        return True

    def sync(self, view: View, label_vecs: Mapping[str, F32]) -> None:
        """:meth:`update` from a cached view of the raw history: a row's label is the
        speaker its text starts with, and implicit recall may return the user's turns."""
        mat = view.matrix
        if mat is None:
            return
        rows = view.rows
        texts = rows.texts
        saved = view.saved_density
        if self.key is None and saved is not None:
            self.adopt(saved, view.stamp, mat.shape[0], label_vecs)
        if self.key is None or self.key[0] != view.stamp or len(view.touched) < self.seen:
            self.seen = 0
        ids = view.touched[self.seen :]
        self.seen = len(view.touched)
        changed = [i for i in (view.by_id.get(x) for x in ids) if i is not None]
        user = rows.roles.code.get("user", -1)

        def users_turns(at: I64) -> npt.NDArray[np.bool_]:
            # read from the rows' arrays: a call per row cost 0.7 s of a first build at 100k
            kinds = np.frombuffer(rows.kind, dtype=np.uint8)[at]
            ok: npt.NDArray[np.bool_] = (kinds == TURN) & (
                np.frombuffer(rows.role, dtype=np.uint32)[at] == user
            )
            return ok

        def keys(at: I64) -> list[str]:
            names, role = rows.roles.names, rows.role
            idx = at.tolist()
            return text_keys([names[role[i]] for i in idx], [texts[i] for i in idx])

        self.update(
            view.stamp,
            mat,
            lambda i: text_label(texts[i]),
            lambda i: rows.kind[i] == TURN and rows.role_of(i) == "user",
            label_vecs,
            changed,
            lambda i: text_key(rows.role_of(i), texts[i]),  # duplicate_key of its candidate
            eligible_rows=users_turns,
            copy_keys=keys,
        )
        view.density_synced(self)

    # ---- maintenance ---------------------------------------------------------------

    def update(  # noqa: PLR0913 - the per-row readers and their many-row forms
        self,
        stamp: object,
        matrix: Matrix,
        speaker_of: Callable[[int], str],
        eligible_of: Callable[[int], bool],
        label_vecs: Mapping[str, F32],
        changed: Sequence[int] = (),
        copy_of: Callable[[int], str] | None = None,
        *,
        eligible_rows: Callable[[I64], npt.NDArray[np.bool_]] | None = None,
        copy_keys: Callable[[I64], Sequence[str]] | None = None,
    ) -> None:
        """Bring the densities in step with ``matrix`` (the view's unit rows; rows only
        grow at the end while ``stamp`` is the same). ``speaker_of(i)``: the label that
        starts row ``i``'s text ("" for none); ``eligible_of(i)``: whether implicit recall
        may return row ``i``; ``label_vecs``: the label embeddings known (a label not
        among them is left in its rows); ``changed``: rows rewritten since the last call;
        ``eligible_rows``, ``copy_keys``: ``eligible_of``, ``copy_of`` of many rows at
        once, used instead when given."""
        self._copy_of = copy_of
        self._copy_keys = copy_keys if copy_of is not None else None
        self._eligible_rows = eligible_rows
        labels = tuple(sorted(label_vecs))
        key = (stamp, labels)
        n = int(matrix.shape[0])
        if key != self.key or n < self.n:
            self._reset(matrix.shape[1] if matrix.ndim == 2 else 0, labels, label_vecs)
            self.key = key
        start = self.n
        every = start == 0
        if start < n:
            every = self._append(matrix, start, n, speaker_of, eligible_of) or every
        redo = sorted({i for i in changed if 0 <= i < start})
        if redo:
            self._redo(matrix, np.asarray(redo, dtype=np.int64), speaker_of, eligible_of)
        if every:
            self._finish(None)
        elif start < n or redo:
            self._finish(np.asarray([*redo, *range(start, n)], dtype=np.int64))

    def _reset(self, dims: int, labels: tuple[str, ...], label_vecs: Mapping[str, F32]) -> None:
        self.n = 0
        self.labels = labels
        rows = [unit(label_vecs[name], dims) for name in labels]
        self.label_mat = np.vstack([*rows, np.zeros((1, dims), dtype=np.float32)])
        self.label = np.zeros(0, dtype=np.int64)
        self.coef = np.zeros(0, dtype=np.float32)
        self.norm = np.zeros(0, dtype=np.float32)
        self.eligible = np.zeros(0, dtype=bool)
        self.copies = np.zeros(0, dtype=np.int64)
        self._texts, self._texts_stale, self._next_code = {}, False, 0
        self.top = np.zeros((0, self.k), dtype=np.float32)
        self.ref_rows = np.zeros(0, dtype=np.int64)
        self.ref = np.zeros((0, dims), dtype=np.float32)

    def _rows_of(
        self,
        matrix: Matrix,
        rows: I64,
        speaker_of: Callable[[int], str],
        eligible_of: Callable[[int], bool],
    ) -> tuple[I64, F32, F32, npt.NDArray[np.bool_]]:
        """Label index, coefficient, norm and eligibility of ``rows``."""
        index = {name: j for j, name in enumerate(self.labels)}
        none = len(self.labels)
        if not index:  # no label to take out: no row's speaker to read
            label = np.full(rows.size, none, dtype=np.int64)
        else:
            label = np.fromiter(
                (index.get(speaker_of(i), none) for i in rows.tolist()),
                dtype=np.int64,
                count=rows.size,
            )
        coef = np.zeros(rows.size, dtype=np.float32)
        norm = np.zeros(rows.size, dtype=np.float32)
        for lo in range(0, rows.size, CHUNK):  # bounded temporaries: 300 MB at 100k rows
            at = slice(lo, lo + CHUNK)
            x = matrix[rows[at]]
            c = np.einsum("ij,ij->i", x, self.label_mat[label[at]]).astype(np.float32)
            sq = np.einsum("ij,ij->i", x, x) - c * c
            coef[at] = c
            norm[at] = np.sqrt(np.maximum(sq, 0.0)).astype(np.float32)
        if self._eligible_rows is not None:
            ok = self._eligible_rows(rows)
        else:
            ok = np.fromiter((eligible_of(i) for i in rows.tolist()), dtype=bool, count=rows.size)
        return label, coef, norm, ok & (norm >= MIN_NORM)

    def _copy_codes(self, rows: I64, joining: I64) -> I64:
        """A code per row of ``rows`` (in order, after every row computed), equal for
        rows of the same text (``copy_of``) as far as the densities can tell: a row is
        only ever compared with the reference rows, so the codes of their texts are the
        only ones kept (``_texts``, at most :attr:`reference` of them; a dict of every
        text cost 27 MB at 100k rows, 10x that at 1M) and a row of another text gets a
        code of its own. ``joining``: the rows that join the reference. Every row its own
        code without ``copy_of``."""
        if self._copy_of is None:
            return -1 - rows  # distinct, and never the code of a text
        texts, key, many = self._texts, self._copy_of, self._copy_keys

        def keys(at: I64) -> Sequence[str]:
            return many(at) if many is not None else [key(i) for i in at.tolist()]

        if self._texts_stale:  # adopted: the codes of the reference's texts
            self._texts_stale = False
            codes = self.copies[self.ref_rows].tolist()
            for k, code in zip(keys(self.ref_rows), codes, strict=True):
                texts.setdefault(k, code)
            self._next_code = int(self.copies.max()) + 1 if self.copies.size else 0
        out = np.empty(rows.size, dtype=np.int64)
        joins = set(joining.tolist())
        for lo in range(0, rows.size, CHUNK):  # bounded temporaries (the keys' strings)
            part = rows[lo : lo + CHUNK]
            for j, (i, k) in enumerate(zip(part.tolist(), keys(part), strict=True), lo):
                code = texts.get(k)
                if code is None:
                    code = self._next_code
                    self._next_code += 1
                    if i in joins:
                        texts[k] = code
                out[j] = code
        return out

    def free(self, matrix: Matrix, rows: I64) -> F32:
        """The label-free unit vectors of computed ``rows`` (zero where nothing is left)."""
        x = matrix[rows] - self.coef[rows, None] * self.label_mat[self.label[rows]]
        norm = self.norm[rows]
        safe = np.where(norm >= MIN_NORM, norm, np.inf)
        out: F32 = (x / safe[:, None]).astype(np.float32)
        return out

    def _append(
        self,
        matrix: Matrix,
        lo: int,
        hi: int,
        speaker_of: Callable[[int], str],
        eligible_of: Callable[[int], bool],
    ) -> bool:
        """Rows ``lo..hi`` computed; True when earlier rows changed too (the new rows
        joined the reference)."""
        rows = np.arange(lo, hi, dtype=np.int64)
        label, coef, norm, ok = self._rows_of(matrix, rows, speaker_of, eligible_of)
        room = self.reference - self.ref_rows.size
        joining = rows[norm >= MIN_NORM][: max(0, room)]
        self.copies = np.concatenate([self.copies, self._copy_codes(rows, joining)])
        self.label = np.concatenate([self.label, label])
        self.coef = np.concatenate([self.coef, coef])
        self.norm = np.concatenate([self.norm, norm])
        self.eligible = np.concatenate([self.eligible, ok])
        self.top = np.concatenate([self.top, np.full((hi - lo, self.k), -np.inf, np.float32)])
        self.n = hi
        mine: F32 | None = None  # the new rows' label-free vectors, when computed
        if joining.size:
            # the earlier rows meet the new reference rows (the new rows are scored
            # against the whole reference below)
            new_ref = self.free(matrix, joining)
            if joining.size == rows.size:  # every new row joined (a small view's build)
                mine = new_ref
            if lo:
                self._merge(np.arange(lo, dtype=np.int64), matrix, new_ref, joining)
            self.ref_rows = np.concatenate([self.ref_rows, joining])
            self.ref = np.concatenate([self.ref, new_ref]) if self.ref.size else new_ref
        self._merge(rows, matrix, self.ref, self.ref_rows, mine)
        return bool(joining.size) and lo > 0

    def _redo(
        self,
        matrix: Matrix,
        rows: I64,
        speaker_of: Callable[[int], str],
        eligible_of: Callable[[int], bool],
    ) -> None:
        label, coef, norm, ok = self._rows_of(matrix, rows, speaker_of, eligible_of)
        self.label[rows], self.coef[rows], self.norm[rows], self.eligible[rows] = (
            label,
            coef,
            norm,
            ok,
        )
        at = np.flatnonzero(np.isin(self.ref_rows, rows))
        if at.size:  # a rewritten reference row: its new vector (others keep their top)
            self.ref[at] = self.free(matrix, self.ref_rows[at])
        self.top[rows] = -np.inf
        self._merge(rows, matrix, self.ref, self.ref_rows)

    def _merge(
        self, rows: I64, matrix: Matrix, ref: F32, ref_rows: I64, free: F32 | None = None
    ) -> None:
        """``top[rows]`` updated with the rows' cosines to ``ref`` (a row is not its own
        neighbour); ``free``: the rows' :meth:`free` vectors, when the caller has them."""
        if not rows.size or not ref.size:
            return
        k = self.k
        for lo in range(0, rows.size, CHUNK):
            part = rows[lo : lo + CHUNK]
            x = self.free(matrix, part) if free is None else free[lo : lo + CHUNK]
            sims = x @ ref.T  # float32, as both operands
            # a row is not its own neighbour, nor are its copies (a statement said twice
            # is not generic for it)
            same = self.copies[part][:, None] == self.copies[ref_rows][None, :]
            sims[same] = -np.inf
            sims[self.norm[part] < MIN_NORM] = -np.inf
            both = np.concatenate([self.top[part], sims], axis=1)
            if both.shape[1] > k:
                # in place: np.partition is a copy, then this
                both.partition(both.shape[1] - k, axis=1)
                both = both[:, -k:]
            self.top[part] = both

    def _finish(self, rows: I64 | None) -> None:
        """The densities of ``rows`` (all when None): the mean cosine of their nearest
        reference rows (0 with none)."""
        top = self.top if rows is None else self.top[rows]
        finite = np.isfinite(top)
        count = finite.sum(axis=1)
        total = np.where(finite, top, 0.0).sum(axis=1)
        values = np.where(count > 0, total / np.maximum(count, 1), 0.0).astype(np.float32)
        self._derived = -1
        if rows is None:
            self.values = values
        else:
            if self.values.size < self.n:
                grown = np.zeros(self.n, dtype=np.float32)
                grown[: self.values.size] = self.values
                self.values = grown
            self.values[rows] = values

    # ---- queries -------------------------------------------------------------------

    @property
    def trusted(self) -> bool:
        """Whether the reference is large enough for the densities to mean something
        (:data:`TRUSTED_ROWS`)."""
        return self.ref_rows.size >= TRUSTED_ROWS

    def corrected(
        self, sims: F32, rows: I64 | None, qvec: F32, *, eligible_only: bool = False
    ) -> F32:
        """Each row's label-free cosine with ``qvec`` minus its density, from the rows'
        plain cosines ``sims`` (of ``rows``, or of the first ``len(sims)`` rows); ``-inf``
        for a row with no content direction (and, ``eligible_only``, for a row implicit
        recall may not return)."""
        if self._derived != self.n:
            self._derive()
        idx = slice(0, sims.size) if rows is None else rows
        free = sims
        if self._labelled:
            g = self.label_mat @ qvec
            free = sims - self.coef[idx] * g[self.label[idx]]
        bias = self._bias_eligible if eligible_only else self._bias
        out: F32 = (free * self._inv_norm[idx] + bias[idx]).astype(np.float32, copy=False)
        return out

    def scale(self, n: int) -> F32:
        """``1 / norm`` of the first ``n`` rows (0 for a row without content)."""
        if self._derived != self.n:
            self._derive()
        out: F32 = self._inv_norm[:n]
        return out

    def _derive(self) -> None:
        """What every query reads, kept per row: ``1 / norm`` and minus the density read
        against the history's median (:data:`TYPICAL_DENSITY`; -inf for a row without
        content, or not eligible)."""
        ok = self.norm >= MIN_NORM
        self._inv_norm = np.where(ok, 1.0 / np.where(ok, self.norm, 1.0), 0.0).astype(np.float32)
        present = self.values[self.eligible & ok]  # the user's turns
        step = max(1, present.size // MEDIAN_SAMPLE)
        shift = TYPICAL_DENSITY - float(np.median(present[::step])) if present.size else 0.0
        self._bias = np.where(ok, -(self.values + shift), -np.inf).astype(np.float32)
        self._bias_eligible = np.where(self.eligible, self._bias, -np.inf).astype(np.float32)
        self._labelled = bool((self.label < len(self.labels)).any())
        self._derived = self.n
