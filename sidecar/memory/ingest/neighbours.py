"""The stored neighbours of a batch's new turns, read before the batch is written.

Ingest gates each new turn on the cosines of its nearest stored turns and durable
memories, and matches a change of fact against the nearest earlier user turns. Three
ways, cheapest first for the collection's size:

* a small collection (relative to the batch): one matrix product over its stored
  vectors, exact;
* a large one whose view retrieval holds with a ready in-process graph
  (:class:`ViewNeighbours`, assembly/view_neighbours.py): the graph proposes twice the
  neighbours wanted and each is scored exactly from its stored float32 vector. The
  store's own index of such a collection is a float32 graph that nothing else loads
  once retrieval has its int8 ones (1.6 GB each at 1M memories);
* otherwise the store's index, one search per turn.

The proposals are asked for in the event loop (retrieval's lock is an asyncio one) and
handed to the worker thread that reads the store (:class:`Proposals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from sidecar.store.interface import StoreBackend
from sidecar.store.names import metadata_matches
from sidecar.store.types import Hit, Record

F32 = np.ndarray[Any, np.dtype[np.float32]]

MATRIX_MIN_ROWS = 2_000  # always score this many stored neighbours exactly in one matmul
MATRIX_ROWS_PER_TURN = 64  # ...or up to this many per new turn of the batch
#: A filtered neighbour search first asks for these multiples of k, unfiltered.
FILTER_OVERSAMPLE = (4, 32)


class ViewNeighbours(Protocol):
    """Retrieval's proposals (``Retrieval.neighbour_ids``): for each vector, ids of the
    nearest records of a collection (of ``role`` only), best first, at least ``k`` unless
    the collection holds fewer; None when it has no view to ask."""

    async def neighbour_ids(
        self, name: str, vecs: F32, k: int, role: str | None
    ) -> list[list[str]] | None: ...


#: collection -> role asked -> one list of proposed ids per vector
Proposals = Mapping[tuple[str, str | None], list[list[str]]]


async def proposals(
    source: ViewNeighbours | None, asks: Sequence[tuple[str, int, str | None]], vecs: F32
) -> dict[tuple[str, str | None], list[list[str]]]:
    """The proposals of ``source`` for each ``(collection, k, role)`` of ``asks`` it can
    answer."""
    out: dict[tuple[str, str | None], list[list[str]]] = {}
    if source is None or not len(vecs):
        return out
    for name, k, role in asks:
        if k > 0 and (got := await source.neighbour_ids(name, vecs, k, role)) is not None:
            out[(name, role)] = got
    return out


def neighbour_scores(
    store: StoreBackend,
    collection: str,
    vecs: F32,
    k: int,
    role: str | None,
    proposed: Proposals,
) -> list[list[float]]:
    """Top-``k`` cosine scores of each row of ``vecs`` against ``collection``'s records
    (``role``: of that role only), best first (module doc)."""
    n = len(vecs)
    if store.collection(collection) is None or k <= 0:
        return [[] for _ in range(n)]
    where = _where(role)
    count = store.count(collection)
    if count <= max(MATRIX_MIN_ROWS, MATRIX_ROWS_PER_TURN * n):
        recs = store.list_records(collection, where=where, include_vectors=True)
        rows = [r.vector for r in recs if r.vector is not None]
        if not rows:
            return [[] for _ in range(n)]
        mat = np.asarray(np.stack(rows), dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1)
        norms[norms < 1e-12] = np.inf
        qn = np.linalg.norm(vecs, axis=1)
        qn[qn < 1e-12] = np.inf
        scores = (vecs @ mat.T) / qn[:, None] / norms[None, :]
        kk = min(k, scores.shape[1])
        top = -np.partition(-scores, kk - 1, axis=1)[:, :kk]
        return [sorted((float(x) for x in row), reverse=True) for row in top]
    ids = proposed.get((collection, role))
    if ids is not None:
        pairs = zip(vecs, ids, strict=True)
        return [[h.score for h in rescored(store, collection, v, k, role, i)] for v, i in pairs]
    return [[h.score for h in _filtered_top(store, collection, v, k, where, count)] for v in vecs]


def neighbour_hits(
    store: StoreBackend,
    collection: str,
    vec: F32,
    k: int,
    role: str | None,
    proposed: list[str] | None,
) -> list[Hit]:
    """The ``k`` nearest records of ``collection`` (``role``: of that role) as hits, best
    first: ``proposed`` ones scored exactly, else the store's search."""
    if proposed is not None:
        return rescored(store, collection, vec, k, role, proposed)
    return store.search(collection, vec, k, where=_where(role))


def rescored(
    store: StoreBackend, collection: str, vec: F32, k: int, role: str | None, ids: list[str]
) -> list[Hit]:
    """The best ``k`` of the records ``ids`` (those of ``role`` still there), by cosine to
    ``vec`` from their stored vectors, as the store's search orders hits (score desc, id
    asc)."""
    where = _where(role)
    recs = store.get_many(collection, ids, include_vectors=True)
    keep = [r for r in recs if where is None or metadata_matches(r.metadata, where.items())]
    q = np.asarray(vec, dtype=np.float32)
    qn = float(np.linalg.norm(q))
    hits = [_hit(r, _cosine(q, qn, r.vector)) for r in keep]
    hits.sort(key=lambda h: (-h.score, h.id))
    return hits[:k]


def _cosine(q: F32, qn: float, vector: Any) -> float:
    # not compaction's quality.cosine: ingest is a layer below compaction (test_layers)
    if vector is None or qn <= 1e-12:
        return 0.0
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    vn = float(np.linalg.norm(v))
    if vn <= 1e-12 or v.shape != q.shape:
        return 0.0
    return float(q @ v) / qn / vn


def _hit(r: Record, score: float) -> Hit:
    return Hit(r.collection, r.id, r.text, r.metadata, r.version, score, r.created_ms, r.ts_ms)


def _where(role: str | None) -> dict[str, Any] | None:
    return None if role is None else {"role": role}


def _filtered_top(
    store: StoreBackend,
    collection: str,
    vec: F32,
    k: int,
    where: Mapping[str, Any] | None,
    count: int,
) -> list[Hit]:
    """The top ``k`` records matching ``where`` (metadata equality); ``count``: the
    collection's record count.

    A filtered store search materialises the allowed set (a scan of the whole collection,
    hundreds of milliseconds at 50k records), so the matching records are first taken
    from unfiltered searches for ``m * k`` records, ``m`` in :data:`FILTER_OVERSAMPLE`:
    when at least ``k`` of those match, they are exactly the top ``k`` of the matching
    records (the search is ordered by score). Otherwise the filtered search answers."""
    if not where:
        return store.search(collection, vec, k)
    if count > FILTER_OVERSAMPLE[0] * k:
        for m in FILTER_OVERSAMPLE:
            hits = store.search(collection, vec, m * k)
            ok = [h for h in hits if metadata_matches(h.metadata, where.items())]
            if len(ok) >= k:
                return ok[:k]
            if len(hits) < m * k:  # the whole collection was searched
                return ok
    return store.search(collection, vec, k, where=where)
