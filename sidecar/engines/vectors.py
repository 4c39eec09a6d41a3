"""Vector math shared by the engines: pooling, normalization, Matryoshka tiers, cosine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
MIN_NORM = 1e-9


def masked_mean(hidden: npt.NDArray[np.floating], mask: npt.NDArray[np.integer]) -> F32:
    """Mean over the positions where ``mask == 1``. hidden [b, s, d], mask [b, s] -> [b, d]."""
    m = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32, copy=False) * m).sum(axis=1)
    counts = np.maximum(m.sum(axis=1), 1.0)
    result: F32 = (summed / counts).astype(np.float32, copy=False)
    return result


def l2_normalize(x: npt.NDArray[np.floating]) -> F32:
    """Row-wise (or single-vector) L2 normalization; rows with norm < 1e-9 are left as they are."""
    arr = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    safe = np.where(norms < MIN_NORM, 1.0, norms)
    return (arr / safe).astype(np.float32, copy=False)


def tier_vector(vec: npt.NDArray[np.floating], dims: int) -> F32:
    """Matryoshka tier: the first ``dims`` components, re-normalized to unit length.

    Works on one vector [d] or a matrix [n, d]. Re-normalization is skipped when the prefix norm
    is below 1e-9 (the prefix is returned as is).
    """
    arr = np.asarray(vec, dtype=np.float32)
    if dims <= 0 or arr.shape[-1] < dims:
        raise ValueError(f"cannot take a {dims}-dim tier of a {arr.shape[-1]}-dim vector")
    return l2_normalize(arr[..., :dims])


def tiers(vec: npt.NDArray[np.floating], dims: Sequence[int]) -> dict[int, F32]:
    """All Matryoshka tiers of ``vec`` keyed by dimension."""
    return {d: tier_vector(vec, d) for d in dims}


def cosine_matrix(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> F32:
    """Cosine similarity of every row of ``a`` with every row of ``b``."""
    return (l2_normalize(a) @ l2_normalize(b).T).astype(np.float32, copy=False)
