"""Vector search in SQL: exact for small collections, the HNSW funnel for large ones.

* **Exact** (no valid ANN index, ``k <= 0``, or a filter that leaves at most
  :data:`SMALL_SET` records): every candidate row of the collection is scored with the full
  vector, ``ORDER BY score DESC, id``: a sequential pass over the collection's rows is exact
  by construction.
* **Funnel** (the collection has its HNSW index, see ``indexes.py``): a ``MATERIALIZED``
  CTE takes ``k x oversample`` candidates (``k x`` :data:`HALFVEC_OVERSAMPLE` from a
  full-dimension index) from the partial HNSW index on the re-normalized ANN tier
  (``halfvec``), with the collection, the filters and the exclusions in its ``WHERE``
  (iterative index scans keep going until enough rows pass them); the outer query re-ranks
  those candidates by the exact full-dimension cosine and keeps ``k``. One query, one
  round trip.

Scores are full-dimension cosines in [-1, 1]; a zero vector scores 0 (pgvector's ``<=>``
gives NaN for it); ties break by id in byte order: the SQLite store's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.store import names as N
from sidecar.store.common import unscored_hits
from sidecar.store.index import EXACT_POOL_LIMIT, scaled_ef
from sidecar.store.pg import reads as _reads
from sidecar.store.pg.codec import COLS, hit, where_sql
from sidecar.store.pg.indexes import ann_dims_for, ann_expr
from sidecar.store.pg.reads import info, nul, storable
from sidecar.store.search import query_unit
from sidecar.store.types import CollectionInfo, Hit, ListQuery, SearchFilter, TimeRange

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

# A filtered search whose filter leaves at most this many records is scored exactly.
SMALL_SET = EXACT_POOL_LIMIT
# Candidates per result the funnel takes when the index holds the full dimension (only
# half precision is coarser): ``oversample`` (4) is for a truncated Matryoshka tier, as on
# SQLite, which takes none then. At 100k records, k = 50, on a loaded machine: 2 gave
# 99.3 % of the top 50 that 4 gives, in 5.1 instead of 9.1 ms p50 (1 gave 98.5 %, 2.7 ms).
HALFVEC_OVERSAMPLE = 2
SCORE = "coalesce(nullif(1 - (r.embedding <=> %s), 'NaN'), 0)"

# The collection and whether its ANN index (for this store's tier) is built and valid.
_COLL = (
    "SELECT c.cid, c.name, c.dims, c.kind, c.created_ms, EXISTS ("
    " SELECT 1 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
    " WHERE x.indrelid = 'records'::regclass AND x.indisvalid AND i.relname ="
    " 'records_ann_c' || c.cid || '_d' || (CASE WHEN c.dims = %s THEN %s ELSE c.dims END)"
    "), c.n_records FROM collections c WHERE c.name = %s"
)


def _score(value: Any) -> float:
    s = float(value)
    return -1.0 if s < -1.0 else (1.0 if s > 1.0 else s)


def search(store: PgState, collection: str, vector: Any, k: int, f: SearchFilter) -> list[Hit]:
    """Top ``k`` records by cosine similarity (score desc, id asc); ``k <= 0`` = all."""
    exclude_ids, where, time_range = f.exclude_ids, f.where, f.time_range
    store._guard()
    if nul(collection):
        return []
    rows = store.db.read(_COLL, (store.embed_dims, store.ann_dims, collection))
    if not rows:
        return []
    coll, has_ann, size = info(rows[0]), bool(rows[0][5]), int(rows[0][6])
    excluded = storable(exclude_ids)
    if not coll.has_vectors:
        return _unscored(store, collection, k, excluded, where, time_range)
    q = query_unit(coll, vector)
    if not q.any():  # a zero query: every score is 0
        return _unscored(store, collection, k, excluded, where, time_range)
    clause, params, post = where_sql(where, time_range)
    filtered = bool(where) or time_range is not None
    if excluded:
        clause += " AND NOT (r.id = ANY(%s))"
        params.append(excluded)
    funnel = has_ann and k > 0 and not post
    if funnel and filtered:
        funnel = _more_than(store, coll.cid, clause, params, SMALL_SET)
    if funnel:
        hits = _funnel(store, coll, size, q, k, clause, params, filtered)
        if len(hits) == k or not filtered:
            return hits
        # the index scan gave up (hnsw.max_scan_tuples) before finding k rows that pass a
        # filter matching few of a large collection's records: score them all instead
    return _exact(store, coll.name, coll.cid, q, k, clause, params, post)


def _unscored(
    store: PgState,
    collection: str,
    k: int,
    excluded: Sequence[str],
    where: Mapping[str, Any] | None,
    time_range: TimeRange | None,
) -> list[Hit]:
    """Vectorless collections and zero queries: score 0 for all, so id order."""
    recs = _reads.list_records(store, collection, ListQuery(where, time_range))
    return unscored_hits(recs, excluded, k)


def _more_than(store: PgState, cid: int, clause: str, params: list[Any], limit: int) -> bool:
    rows = store.db.read(
        f"SELECT count(*) FROM (SELECT 1 FROM records r WHERE r.cid = %s{clause} "
        f"LIMIT {limit + 1}) s",
        [cid, *params],
    )
    return int(rows[0][0]) > limit


def _exact(
    store: PgState,
    name: str,
    cid: int,
    q: Any,
    k: int,
    clause: str,
    params: list[Any],
    post: list[tuple[str, Any]],
) -> list[Hit]:
    sql = (
        f"SELECT {COLS}, {SCORE} AS score FROM records r WHERE r.cid = %s{clause} "
        "ORDER BY score DESC, r.id"
    )
    if k > 0 and not post:
        sql += f" LIMIT {int(k)}"
    rows = store.db.read(sql, [q, cid, *params], binary=True)
    hits = [hit(name, row, _score(row[10])) for row in rows]
    if post:
        hits = [h for h in hits if N.metadata_matches(h.metadata, post)]
        if k > 0:
            hits = hits[:k]
    return hits


def _funnel(
    store: PgState,
    coll: CollectionInfo,
    size: int,
    q: Any,
    k: int,
    clause: str,
    params: list[Any],
    filtered: bool,
) -> list[Hit]:
    cid, dims = coll.cid, coll.dims
    ann = ann_dims_for(store, dims)
    q_ann = q if ann == dims else N.normalized(np.ascontiguousarray(q[:ann]))
    n = max(k, k * (store.params.oversample if ann < dims else HALFVEC_OVERSAMPLE))
    # cid and the dims are literals: the planner matches a partial index only when it can
    # prove the query's predicate implies the index's (a parameter would not do).
    sql = (
        f"WITH cand AS MATERIALIZED (SELECT r.rid FROM records r WHERE r.cid = {int(cid)}"
        f"{clause} ORDER BY {ann_expr(ann, dims)} <#> %s::halfvec({ann}) LIMIT {n}) "
        f"SELECT {COLS}, {SCORE} AS score FROM cand JOIN records r ON r.rid = cand.rid "
        f"ORDER BY score DESC, r.id LIMIT {int(k)}"
    )
    args = [*params, q_ann, q]
    # a larger graph is searched wider (the session's default is the configured value)
    ef = scaled_ef(store.params.ef_search, size, n)
    setup = [f"SET LOCAL hnsw.ef_search = {ef}"] if ef != store.params.ef_search else []
    if filtered:
        setup += _INDEX_PLAN
    if not setup:
        rows = store.db.read(sql, args, binary=True)
    else:
        rows = store.db.call(lambda conn: _with_settings(conn, setup, sql, args))
    return [hit(coll.name, row, _score(row[10])) for row in rows]


# The planner cannot estimate a jsonb containment filter (it guesses a row or so) and then
# prefers fetching every match (GIN bitmap, or a sequential scan) and sorting them all:
# 17 ms instead of 1-2 ms for 5 000 matches of 10 000. The filtered set is known to be
# large here (SMALL_SET), so the HNSW scan with the filter applied as it goes is the plan.
_INDEX_PLAN = (
    "SET LOCAL enable_seqscan = off",
    "SET LOCAL enable_bitmapscan = off",
    "SET LOCAL enable_sort = off",
)


def _with_settings(conn: Any, setup: Sequence[str], sql: str, args: list[Any]) -> list[Any]:
    with conn.transaction(), conn.pipeline():  # one round trip for the SETs and the query
        for stmt in setup:
            conn.execute(stmt)
        cur = conn.execute(sql, args, binary=True)
    return list(cur.fetchall())
