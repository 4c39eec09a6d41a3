"""The densities' first build for a small view (sidecar/assembly/density.py) without
Python per row: the rows keyed many at once (``copy_keys``, ``text_keys``), no speaker
read when there is no label to take out, the new rows' label-free vectors computed once,
the partition in place, only the reference rows' texts keyed for good. The same bits
as the build before these changes, which :class:`Before` keeps verbatim, but for the
copy codes of rows that are no reference row's copy (each its own code now)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from sidecar.assembly import density as D
from sidecar.assembly.density import MIN_NORM, SAVED, Density, text_keys
from sidecar.assembly.duplicates import text_key

I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]


class Before(Density):
    """The build as it was: a key, a label and a free vector per row, np.partition."""

    def _rows_of(
        self,
        matrix: F32,
        rows: I64,
        speaker_of: Callable[[int], str],
        eligible_of: Callable[[int], bool],
    ) -> tuple[I64, F32, F32, npt.NDArray[np.bool_]]:
        index = {name: j for j, name in enumerate(self.labels)}
        none = len(self.labels)
        label = np.fromiter(
            (index.get(speaker_of(i), none) for i in rows.tolist()), dtype=np.int64, count=rows.size
        )
        # every row at once (the build works in chunks; a row's products do not depend on it)
        x = matrix[rows]
        coef = np.einsum("ij,ij->i", x, self.label_mat[label]).astype(np.float32)
        sq = np.einsum("ij,ij->i", x, x) - coef * coef
        norm = np.sqrt(np.maximum(sq, 0.0)).astype(np.float32)
        ok = np.fromiter((eligible_of(i) for i in rows.tolist()), dtype=bool, count=rows.size)
        return label, coef, norm, ok & (norm >= MIN_NORM)

    def _copy_codes(self, rows: I64, joining: I64) -> I64:
        # a code for every text seen, the reference's or not
        texts, key = self._texts, self._copy_of
        assert key is not None
        return np.fromiter(
            (texts.setdefault(key(i), len(texts)) for i in rows.tolist()),
            dtype=np.int64,
            count=rows.size,
        )

    def _merge(
        self, rows: I64, matrix: F32, ref: F32, ref_rows: I64, free: F32 | None = None
    ) -> None:
        if not rows.size or not ref.size:
            return
        k = self.k
        for lo in range(0, rows.size, D.CHUNK):
            part = rows[lo : lo + D.CHUNK]
            sims = self.free(matrix, part) @ ref.T
            same = self.copies[part][:, None] == self.copies[ref_rows][None, :]
            sims[same] = -np.inf
            sims[self.norm[part] < MIN_NORM] = -np.inf
            both = np.concatenate([self.top[part], sims.astype(np.float32)], axis=1)
            if both.shape[1] > k:
                both = np.partition(both, both.shape[1] - k, axis=1)[:, -k:]
            self.top[part] = both


WORDS = ["tea", "Tea!", "lake", "Ana: hi", "Bo: hi", "café", "trip — soon", "ok", "", "x_y"]


@pytest.mark.parametrize("labelled", [False, True])
@pytest.mark.parametrize("n", [40, 300, 700])
def test_a_first_build_and_its_updates_have_the_bits_of_the_build_before(
    n: int, labelled: bool
) -> None:
    rng = np.random.default_rng(n + labelled)
    dims = 16
    mat = rng.normal(size=(n + 30, dims)).astype(np.float32)
    if n > 40:  # vectorless rows (without them every new row joins the reference)
        mat[rng.integers(0, n, 5)] = 0
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
    mat = mat.astype(np.float32)
    texts = [" ".join(rng.choice(WORDS, size=2)) for _ in range(n + 30)]  # many copies
    roles = [("user", "assistant")[i % 2] for i in range(n + 30)]
    who = [t.split(":")[0] if ":" in t else "" for t in texts]
    labels = {"Ana": rng.normal(size=dims), "Bo": rng.normal(size=dims)} if labelled else {}
    ok = np.arange(n + 30) % 3 != 1
    old, new = Before(k=4, reference=256), Density(k=4, reference=256)
    steps: list[tuple[int, list[int]]] = [(n, []), (n + 10, [3]), (n + 30, [n + 2, 0])]
    for hi, changed in steps:
        old.update(
            0,
            mat[:hi],
            lambda i: who[i],
            lambda i: bool(ok[i]),
            labels,
            changed,
            lambda i: text_key(roles[i], texts[i]),
        )
        new.update(
            0,
            mat[:hi],
            lambda i: who[i],
            lambda i: False,
            labels,
            changed,
            lambda i: "unused",
            eligible_rows=ok.__getitem__,
            copy_keys=lambda at: text_keys([roles[i] for i in at], [texts[i] for i in at]),
        )
        for name in (*SAVED, "values"):
            if name != "copies":
                assert getattr(old, name).tobytes() == getattr(new, name).tobytes(), (hi, name)
        _same_copies_as_the_reference_sees(old, new)


def _same_copies_as_the_reference_sees(old: Density, new: Density) -> None:
    """Rows are only compared with reference rows: each row (with a content direction
    left) is a copy of the same reference rows in both."""
    live = np.flatnonzero(new.norm >= MIN_NORM)
    ref = new.ref_rows
    assert ref.tobytes() == old.ref_rows.tobytes()
    was = old.copies[live][:, None] == old.copies[ref][None, :]
    now = new.copies[live][:, None] == new.copies[ref][None, :]
    assert (was == now).all()
    assert was.sum() > len(ref)  # copies beyond each reference row itself were compared


def test_keys_of_many_rows_are_text_key_of_each() -> None:
    """A text whose only characters beyond ASCII separate words is keyed as ASCII; one
    with a letter or digit beyond ASCII (or one that case folding makes one: U+0345)
    goes through the regex."""
    rng = np.random.default_rng(21)
    extra = ["é", "ß", "İ", "—", "\u2019", "…", "\u0345", "²", "Σ", "ς", "ﬁ", "\u2028", "\u00a0"]
    extra += ["Ⓐ", "\U0001d400", "٣", "中", "\u200b", "\ufeff", "\x00", "_", "\t", " "]
    chars = [chr(c) for c in range(128)] + extra * 8
    texts = ["".join(rng.choice(chars, size=int(rng.integers(0, 30)))) for _ in range(6000)]
    texts += ["Ana: Thanks — see you  at 9!!", "— \u2019", "", "ﬁne", "x\u0345y", "a\x00b—c"]
    roles = [("user", "assistant", "")[i % 3] for i in range(len(texts))]
    assert text_keys(roles, texts) == [text_key(r, t) for r, t in zip(roles, texts, strict=True)]
    for t in texts[:500]:
        assert (
            text_keys(["user"], [t])[0] == "user\x1f" + re.sub(r"[\W_]+", " ", t.casefold()).strip()
        )


def test_an_adopted_density_keys_only_the_references_texts_and_appends_the_same() -> None:
    """A start that adopts a saved density keys the reference rows' texts again (not
    every row's), and rows appended since, copies of reference rows among them, get
    the densities a density built all along gives them."""
    rng = np.random.default_rng(4)
    dims, n, more = 16, 400, 60
    mat = rng.normal(size=(n + more, dims)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    texts = [f"note {i % 150}" for i in range(n + more)]  # copies, of reference rows too
    keyed: list[int] = []

    def keys(at: I64) -> list[str]:
        keyed.extend(at.tolist())
        return text_keys(["user"] * at.size, [texts[i] for i in at.tolist()])

    def update(d: Density, hi: int) -> None:
        d.update(
            0,
            mat[:hi],
            lambda i: "",
            lambda i: True,
            {},
            (),
            lambda i: text_key("user", texts[i]),
            eligible_rows=lambda at: np.ones(at.size, dtype=bool),
            copy_keys=keys,
        )

    built, first = Density(k=4, reference=64), Density(k=4, reference=64)
    update(built, n + more)
    update(first, n)
    assert len(first._texts) <= 64  # the reference's texts alone
    adopted = Density(k=4, reference=64)
    assert adopted.adopt(first.saved(), 0, n, {})
    keyed.clear()
    update(adopted, n + more)
    assert sorted(keyed) == sorted([*first.ref_rows.tolist(), *range(n, n + more)])
    for name in ("top", "values", "ref_rows"):
        assert getattr(adopted, name).tobytes() == getattr(built, name).tobytes(), name
    _same_copies_as_the_reference_sees(built, adopted)
