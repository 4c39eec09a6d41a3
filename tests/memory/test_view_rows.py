"""A view's load normalises a page of vectors at once with the bits of one at a time."""

from __future__ import annotations

from typing import Any

import numpy as np

from sidecar.assembly.view_rows import unit, units_into


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
