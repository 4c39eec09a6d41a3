"""Multi-hop chains over stored vectors: similarity passed on from the best hits.

A multi-hop question ("What causes does John support?") is answered by turns that share
little with its words but much with one another: the first hit about veterans sits near
the other turns about veterans. After the first fusion, the ``heads`` (the ``m``
candidates of highest fused relevance) act as extra dense queries with their **stored**
vectors, so nothing is embedded again and no store search runs: one ``n x m`` product
over the rows the dense channel already stacked. The cosine fed to the fusion becomes::

    dense'(d) = max(dense(d), w * max_h dense(h) * cos(h, d))

``w`` (``ScoringConfig.chain_weight``, 1.3) sets how far the second hop reaches: a turn
reaches its head's cosine when ``cos(h, d) >= 1 / w``. A head reaches itself too, so with
``w > 1`` the heads are lifted by ``w`` and, through the context terms, so are their
neighbours and sessions. Both parts count on the dev split (leave-one-conversation-out,
docs/memory.md): the chain without the heads' own lift, or the lift alone, gained less.
Only the fusion sees ``dense'``: the reported cosine, the similarity floor and the
relevance gate read the query's own cosine, so a chain reorders what bears on the query
and never makes noise relevant. A candidate without a vector keeps its cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import Candidate, features

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


def candidate_rows(candidates: Sequence[Candidate], blocks: Sequence[F32]) -> tuple[F32, Bools]:
    """The candidates' unit vectors as rows (the dense channel's ``blocks`` when they
    cover every candidate, else each candidate's own vector) and which rows are real
    (an all-False mask with zero columns when no candidate has a vector)."""
    n = len(candidates)
    if blocks and sum(len(b) for b in blocks) == n and len({b.shape[1] for b in blocks}) == 1:
        mat = blocks[0] if len(blocks) == 1 else np.concatenate(list(blocks))
        return mat, np.ones(n, dtype=bool)
    vecs = [features(c).vector for c in candidates]
    dims = next((v.shape[0] for v in vecs if v is not None), 0)
    mat = np.zeros((n, dims), dtype=np.float32)
    has = np.zeros(n, dtype=bool)
    for i, v in enumerate(vecs):
        if v is not None and dims and v.shape[0] == dims:
            mat[i] = v
            has[i] = True
    return mat, has


def chained_dense(
    dense: F64,
    rel: F64,
    candidates: Sequence[Candidate],
    blocks: Sequence[F32],
    heads: int,
    weight: float,
) -> F64:
    """``dense`` with the cosine passed on from the ``heads`` candidates of highest
    ``rel`` (module doc); ``dense`` itself when there is nothing to pass on."""
    if not len(dense) or heads <= 0 or weight <= 0.0:
        return dense
    mat, has = candidate_rows(candidates, blocks)
    if not has.any():
        return dense
    order = np.argsort(-np.where(has, rel, -np.inf), kind="stable")
    top = order[: min(heads, int(has.sum()))]
    top = top[dense[top] > 0.0]
    if not len(top):
        return dense
    sims = np.asarray(mat @ mat[top].T, dtype=np.float64)  # n x m
    passed = weight * (sims * dense[top][None, :]).max(axis=1)
    return np.maximum(dense, np.where(has, passed, dense))
