"""A view's matrix of unit rows: its type by the view's size, and what is read from it.

A view the store's index ranks (``CollectionView.ann``: :attr:`ann_min_rows` rows and
more) keeps its rows in float16, half the bytes: the index finds its dense candidates,
and the matrix only rescores the few hundred rows a request reads (the BM25 pool, the
implicit recall's densities), where rounding a unit vector's components to float16 moves
a cosine by about 1e-4. A smaller view keeps float32, bit for bit the store's vectors:
its exact scan ranks every row itself. docs/store.md, "Half-precision matrices".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.assembly.view_rows import F32, FULL, HALF, Matrix


def dtype_for(rows: int, ann_min_rows: int) -> np.dtype[Any]:
    """The matrix's type for a view of ``rows`` rows."""
    return HALF if rows >= ann_min_rows else FULL


def settled(mat: Matrix | None, rows: int, ann_min_rows: int) -> Matrix | None:
    """``mat`` in the type ``rows`` rows call for: itself when it is, else a converted
    copy (a view grown past the threshold, a load that read another count than it
    expected, a float32 file taken by a view that wants float16)."""
    if mat is None or mat.dtype == (want := dtype_for(rows, ann_min_rows)):
        return mat
    return mat.astype(want)


def full(mat: Matrix) -> F32:
    """``mat`` (rows, or one row) as float32: itself when it is (the exact scan's views),
    else a copy (a candidate's vector, a few rows of a float16 view)."""
    return np.asarray(mat, dtype=np.float32)


def positive_rows(rows: npt.NDArray[np.int64], sims: F32, keep_all: bool) -> list[int]:
    """``rows`` (ranked) without those of cosine <= 0, unless ``keep_all``."""
    if keep_all:
        return [int(i) for i in rows.tolist()]
    return [int(i) for i, s in zip(rows.tolist(), sims.tolist(), strict=True) if s > 0.0]
