"""Ingest's nearest stored turns, proposed by a large view's in-process graph.

Why: ingest gates each new turn on its nearest stored turns and durable memories. In a
large namespace the store answers that from its float32 hnswlib graphs, which nothing else
loads once the views have their own int8 graphs (view_graph.py): after a 1M restart the
first ingest loaded both (3.7 GB more anonymous memory, 4.0 -> 7.7 GB). A view the daemon
holds anyway proposes the candidates instead; ingest scores them exactly from the store's
vectors (memory/ingest/neighbours.py), so what it computes from them does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sidecar.assembly.scoring import F32

if TYPE_CHECKING:
    from sidecar.assembly.cache import CollectionView

#: Rows asked of the graph per neighbour wanted, in turn, until ``k`` of the role are
#: among them (about half of a history's turns are the user's).
ROLE_OVERSAMPLE = (4, 32)
#: Candidates handed back per neighbour wanted: ingest rescores them exactly, so the
#: float16 rows' ranking only has to bring the true top ``k`` among twice as many.
PROPOSED_PER_K = 2


def graph_neighbours(
    view: CollectionView, vecs: Sequence[F32] | F32, k: int, role: str | None
) -> list[list[str]] | None:
    """For each of ``vecs``, the ids of up to ``PROPOSED_PER_K * k`` nearest records
    (``role``: of that role only), best first, from the view's in-process graph; None when
    the view has no ready graph, or for a zero vector or too few rows of the role found
    (the store answers then)."""
    if view.dense_mode != "graph" or k <= 0:
        return None
    code: int | None = None
    if role is not None:
        code = view.rows.roles.code.get(role)
        if code is None:  # no record of that role at all
            return [[] for _ in range(len(vecs))]
    ids = view.ids
    out: list[list[str]] = []
    for vec in vecs:
        rows = _nearest_rows(view, np.asarray(vec, dtype=np.float32), k, code)
        if rows is None:
            return None
        out.append([ids[i] for i in rows[: PROPOSED_PER_K * k]])
    return out


def _nearest_rows(view: CollectionView, q: F32, k: int, code: int | None) -> list[int] | None:
    """Rows near ``q`` (of the role ``code``), best first: at least ``k`` unless the graph
    holds fewer; None when the graph cannot say."""
    graph, mat = view.graph, view.matrix
    norm = float(np.linalg.norm(q))
    if graph is None or mat is None or norm <= 1e-12:
        return None
    roles = np.frombuffer(view.rows.role, dtype=np.uint32)
    for m in ROLE_OVERSAMPLE if code is not None else (PROPOSED_PER_K,):
        found = graph.search(mat, q / norm, m * k)
        if found is None:
            return None
        rows = found[0]
        exhausted = len(rows) < m * k
        if code is not None:
            rows = rows[roles[rows] == code]
        if len(rows) >= k or exhausted:
            return [int(i) for i in rows.tolist()]
    return None
