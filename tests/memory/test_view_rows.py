"""A view's load normalises a page of vectors at once with the bits of one at a time."""

from __future__ import annotations

from typing import Any

import numpy as np

from sidecar.assembly.view_load import load_rows, unit, units_into
from sidecar.assembly.view_rows import ViewRows
from sidecar.store.types import Record


def test_a_page_of_unit_rows_has_the_bits_of_unit_row_by_row() -> None:
    rng = np.random.default_rng(7)
    dims = 384
    vectors: list[Any] = [rng.standard_normal(dims).astype(np.float32) * s for s in (1, 1e3, 1e-3)]
    vectors += [rng.standard_normal(dims) for _ in range(500)]  # float64, as read by some
    vectors += [None, np.zeros(dims, np.float32), np.ones(dims - 1, np.float32)]  # no row
    vectors += [np.full(dims, 1e-20, np.float32), [0.5] * dims]  # too short to scale; a list
    order = rng.permutation(len(vectors))
    vectors = [vectors[i] for i in order]
    out = np.zeros((len(vectors) + 3, dims), dtype=np.float32)
    units_into(out[1 : 1 + len(vectors)], vectors, dims)
    want = np.stack([unit(v, dims) for v in vectors])
    assert out[1 : 1 + len(vectors)].tobytes() == want.tobytes()
    assert not out[0].any() and not out[-2:].any()


def _rows(items: list[tuple[str, str]]) -> ViewRows:
    recs = [
        Record("user:u", rid, text, {}, version=1, created_ms=1, updated_ms=1, ts_ms=1, seq=i)
        for i, (rid, text) in enumerate(items)
    ]
    rows, _mat = load_rows("user:u", [recs], len(recs), 4)
    return rows


def test_texts_not_in_gives_what_a_reload_hands_the_index() -> None:
    first = [("a", "one"), ("b", "two"), ("c", ""), ("d", "four")]
    empty = ViewRows()
    assert _rows(first).texts_not_in(empty) == ([], first)  # a first load: every row
    now = _rows([("b", "two"), ("c", "three"), ("d", "FOUR"), ("e", "five")])
    gone, docs = now.texts_not_in(_rows(first))
    assert gone == ["a", "c", "d"]  # removed, or its text changed
    assert docs == [("c", "three"), ("d", "FOUR"), ("e", "five")]
    assert now.record_texts() == ["two", "three", "FOUR", "five"]
