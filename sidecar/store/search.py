"""Vector search over a store's collections: an exact scan for small or filtered sets, the
hnswlib index otherwise, with the hits read back from SQLite."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from sidecar.store import graph_lazy as _lazy
from sidecar.store import names as N
from sidecar.store import reads as _reads
from sidecar.store.common import unscored_hits
from sidecar.store.exact import F32, Candidate, top_candidates
from sidecar.store.index import NeedScan, NotLoaded, VectorIndex, decode_rows
from sidecar.store.rows import (
    SQL_MAX_VARS,
    BadRecord,
    Undecodable,
    chunks,
    decode_meta,
    hit_order,
    hit_sql,
    record_meta,
    where_sql,
)
from sidecar.store.types import CollectionInfo, Hit, ListQuery, SearchFilter, TimeRange

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


def _query_vector(store: SqliteState, info: CollectionInfo, vector: Any) -> F32:
    return query_unit(info, vector)


def query_unit(info: CollectionInfo, vector: Any) -> F32:
    """The query as a unit vector of the collection's dimension (a longer query gives its
    re-normalized prefix; a zero or tiny query gives zeros). Shared by both backends."""
    arr = N.float32_row(vector, "query vector")
    if arr.shape[0] > info.dims and info.dims > 1:
        arr = arr[: info.dims]  # Matryoshka: a tier collection takes the query's prefix
    if arr.shape[0] == info.dims:
        # Fast path (every search pays it): one dot product checks finiteness (a NaN or
        # infinity makes it non-finite) and gives the norm. Unusual magnitudes, where a
        # float32 sum of squares could overflow or underflow, take the careful path.
        ss = float(np.dot(arr, arr))
        if 1e-20 < ss < 1e30:
            out: F32 = arr * np.float32(1.0 / math.sqrt(ss))
            return out
    arr = N.as_vector(arr, info.dims, info.name)
    norm = float(np.linalg.norm(arr.astype(np.float64)))  # no float32 overflow
    if norm < 1e-12:
        return np.zeros(info.dims, dtype=np.float32)  # a zero query scores 0 everywhere
    unit: F32 = (arr / norm).astype(np.float32)
    return unit


def _ids_to_rids(store: SqliteState, cid: int, ids: Iterable[str]) -> set[int]:
    wanted = list(dict.fromkeys(ids))
    out: set[int] = set()
    for part in chunks(wanted):
        marks = ",".join("?" * len(part))
        out.update(
            r[0]
            for r in _reads._read(
                store, f"SELECT rid FROM records WHERE cid = ? AND id IN ({marks})", (cid, *part)
            )
        )
    return out


def _allowed_rids(
    store: SqliteState,
    cid: int,
    where: Mapping[str, Any] | None,
    time_range: TimeRange | None,
) -> set[int] | None:
    if not where and time_range is None:
        return None
    clause, params, post = where_sql(where, time_range)
    if not post:
        return {
            r[0]
            for r in _reads._read(
                store, f"SELECT rid FROM records WHERE cid = ?{clause}", (cid, *params)
            )
        }
    rows = _reads._read(
        store, f"SELECT rid, metadata FROM records WHERE cid = ?{clause}", (cid, *params)
    )
    return {rid for rid, raw in rows if N.metadata_matches(decode_meta(raw), post)}


def _index(store: SqliteState, cid: int) -> VectorIndex | None:
    idx = store._indexes.get(cid)
    if idx is not None:
        idx.last_used = time.monotonic()
        if not idx.loaded and not idx.broken:
            _lazy.ensure_loaded(store, idx)
    return idx


def _scan(
    store: SqliteState,
    info: CollectionInfo,
    q: F32,
    k: int,
    exclude: set[int],
    allowed: set[int] | None,
) -> list[Candidate]:
    """Exact search straight from SQLite (broken index, k <= 0 on big collections)."""
    best: list[Candidate] = []
    after = 0
    while rows := _reads._fetch_rows(store, info.cid, None, after, 20_000):
        after = rows[-1][0]
        keep = [r for r in rows if r[0] not in exclude and (allowed is None or r[0] in allowed)]
        if not keep:
            continue
        rids, ids, units, _v = decode_rows(keep, info.dims)
        part = top_candidates(rids, (units @ q).astype(np.float32), ids, k)
        best = sorted(best + part, key=lambda c: (-c[1], c[2]))
        if k > 0:
            best = best[:k]
    return best


def search(store: SqliteState, collection: str, vector: Any, k: int, f: SearchFilter) -> list[Hit]:
    """Top ``k`` records by cosine similarity (score desc, id asc); ``k <= 0`` = all.

    A missing collection gives ``[]``. Vectorless collections score every record 0.
    """
    exclude_ids, where, time_range = f.exclude_ids, f.where, f.time_range
    store._guard()
    info = store._collections.get(collection)
    if info is None:
        return []
    excluded_ids = list(exclude_ids)
    if not info.has_vectors:
        recs = _reads.list_records(store, collection, ListQuery(where, time_range))
        return unscored_hits(recs, excluded_ids, k)
    q = _query_vector(store, info, vector)
    exclude = _ids_to_rids(store, info.cid, excluded_ids) if excluded_ids else set()
    allowed = _allowed_rids(store, info.cid, where, time_range)
    if allowed is not None and not allowed:
        return []
    idx = _index(store, info.cid)
    cands: list[Candidate]
    if idx is None or idx.broken or k <= 0:
        cands = _scan(store, info, q, k, exclude, allowed)
    else:
        fetch = functools.partial(_reads._fetch_vectors, store)
        try:
            try:
                cands = idx.search(q, k, exclude, allowed, fetch)
            except NotLoaded:  # unloaded since _index (idle, repaired): once more
                _lazy.ensure_loaded(store, idx)
                cands = idx.search(q, k, exclude, allowed, fetch)
        except NeedScan:
            cands = _scan(store, info, q, k, exclude, allowed)
    return _materialize(store, info, cands, k)


def _materialize(
    store: SqliteState, info: CollectionInfo, cands: list[Candidate], k: int
) -> list[Hit]:
    """Hits (text, metadata from SQLite) for the top ``k`` candidates, score desc, id asc."""
    scores: dict[int, float] = {}
    for rid, score, _id in cands:
        scores[rid] = -1.0 if score < -1.0 else (1.0 if score > 1.0 else score)
    if k > 0 and len(scores) > k:
        # Keep every candidate tied with the k-th score so that ties resolve by id.
        ranked = sorted(scores.values(), reverse=True)
        cut = ranked[k - 1]
        scores = {rid: s for rid, s in scores.items() if s >= cut}
    if not scores:
        return []
    name = info.name
    rids = list(scores)
    if len(rids) <= SQL_MAX_VARS:
        rows = _reads._read(store, hit_sql(len(rids)), rids)
    else:
        rows = []
        for part in chunks(rids):
            rows += _reads._read(store, hit_sql(len(part)), part)
    hits: list[Hit] = []
    for rid, rec_id, text, meta, version, created, ts in rows:
        try:
            if isinstance(text, Undecodable):
                raise BadRecord("text is not UTF-8")
            decoded = record_meta(meta)
        except BadRecord as exc:
            _reads._report_bad(store, name, str(rec_id), str(exc))
            continue
        hits.append(
            Hit(
                name,
                rec_id,
                text,
                decoded,
                version,
                scores[rid],
                created,
                created if ts is None else ts,
            )
        )
    hits.sort(key=hit_order)
    return hits[:k] if k > 0 else hits
