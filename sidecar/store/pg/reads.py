"""Reads of the PostgreSQL store: collections, records, counts, versions, tombstones.

Nothing is cached in the process: several daemons may write the same database, so every
read asks the server (a record by name is one indexed lookup; counts are kept per
collection row by the writes themselves).

A name, id or key holding a NUL character cannot be stored (validation refuses it, and
PostgreSQL text cannot hold one), so a read asking for one finds nothing, without asking
the server (which would refuse the parameter) — as a lookup in the SQLite store does."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sidecar.store import names as N
from sidecar.store.common import matching
from sidecar.store.pg.codec import COLS, metadata_of, record, text_of, where_sql
from sidecar.store.rows import NO_COLUMNS, Columns
from sidecar.store.types import CollectionInfo, CollectionState, ListQuery, Record

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

COLL = "SELECT cid, name, dims, kind, created_ms FROM collections"
BY_NAME = "r.cid = (SELECT cid FROM collections WHERE name = %s)"
# records of a collection by id (the ids' array, then the name): one lookup of the
# (cid, id) index per id. "BY_NAME AND r.id = ANY(ids)" let the planner, which does not
# know the cid, walk the collection's whole (cid, ts_ms, id) index instead: 18 ms for 150
# ids of a 100k collection, against 1.7 ms so.
BY_IDS = (
    "(r.cid, r.id) IN (SELECT c.cid, w.id FROM collections c, unnest(%s::text[]) AS w(id) "
    "WHERE c.name = %s)"
)


def nul(*values: str | None) -> bool:
    """True when a value holds NUL: it names nothing that exists."""
    return any(v is not None and "\x00" in v for v in values)


def storable(values: Iterable[str]) -> list[str]:
    return [v for v in dict.fromkeys(values) if "\x00" not in v]


def info(row: Any) -> CollectionInfo:
    cid, name, dims, kind, created = row[:5]
    return CollectionInfo(name, cid, dims, kind, created)


def collection(store: PgState, name: str) -> CollectionInfo | None:
    if nul(name):
        return None
    rows = store.db.read(COLL + " WHERE name = %s", (name,))
    return info(rows[0]) if rows else None


def collections(
    store: PgState, *, prefix: str | None = None, namespace: str | None = None
) -> list[CollectionInfo]:
    if nul(prefix, namespace):
        return []
    sql, params = COLL + " WHERE TRUE", []
    if prefix is not None:
        sql += " AND starts_with(name, %s)"
        params.append(prefix)
    if namespace is not None:
        sql += " AND (name = %s OR starts_with(name, %s))"
        params += [namespace, namespace + ":"]
    return [info(r) for r in store.db.read(sql + " ORDER BY name", params)]


def dims_for(store: PgState, name: str) -> int:
    found = collection(store, name)
    return found.dims if found else N.dims_for_collection(name, store.embed_dims)


def collection_versions(store: PgState, names: Iterable[str]) -> dict[str, int]:
    wanted = list(dict.fromkeys(names))
    query = storable(wanted)
    rows = store.db.read("SELECT name, version FROM collections WHERE name = ANY(%s)", (query,))
    found = dict(rows)
    return {n: int(found.get(n, 0)) for n in wanted}


def collection_states(store: PgState, names: Iterable[str]) -> dict[str, CollectionState]:
    """One query for every name. ``max_seq`` is the collection's version: writes take it
    last, under the collection row's lock, above every seq they leave (schema ``_FINISH``)."""
    wanted = list(dict.fromkeys(names))
    rows = store.db.read(
        "SELECT name, cid, version, n_records, removals FROM collections WHERE name = ANY(%s)",
        (storable(wanted),),
    )
    found = {
        r[0]: CollectionState(int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[2])) for r in rows
    }
    return {n: found.get(n) or CollectionState() for n in wanted}


# ---- counts --------------------------------------------------------------------------------


def _sum(store: PgState, where: str, params: list[Any]) -> int:
    if nul(*params):
        return 0
    rows = store.db.read(f"SELECT coalesce(sum(n_records), 0) FROM collections{where}", params)
    return int(rows[0][0])


def count(store: PgState, collection: str) -> int:
    return _sum(store, " WHERE name = %s", [collection])


def count_prefix(store: PgState, prefix: str) -> int:
    return _sum(store, " WHERE starts_with(name, %s)", [prefix])


def count_namespace(store: PgState, namespace: str) -> int:
    return _sum(store, " WHERE name = %s OR starts_with(name, %s)", [namespace, namespace + ":"])


def total_records(store: PgState) -> int:
    return _sum(store, "", [])


def max_seq(store: PgState) -> int:
    rows = store.db.read("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM seq")
    return int(rows[0][0])


# ---- records -------------------------------------------------------------------------------


def _cols(with_vector: bool) -> str:
    return COLS + (", r.embedding" if with_vector else "")


def get(
    store: PgState, collection: str, record_id: str, *, include_vector: bool = False
) -> Record | None:
    store._guard()
    if nul(collection, record_id):
        return None
    rows = store.db.read(
        f"SELECT {_cols(include_vector)} FROM records r WHERE {BY_NAME} AND r.id = %s",
        (collection, record_id),
        binary=True,
    )
    return record(collection, rows[0], include_vector) if rows else None


def get_many(
    store: PgState, collection: str, ids: Iterable[str], *, include_vectors: bool = False
) -> list[Record]:
    """Existing records among ``ids``, in id order."""
    store._guard()
    wanted = storable(ids)
    if not wanted or nul(collection):
        return []
    rows = store.db.read(
        f"SELECT {_cols(include_vectors)} FROM records r WHERE {BY_IDS} ORDER BY r.id",
        (wanted, collection),
        binary=True,
    )
    return [record(collection, row, include_vectors) for row in rows]


def metadata_many(store: PgState, collection: str, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The metadata of the existing records among ``ids`` (``StoreCore.metadata_many``)."""
    store._guard()
    wanted = storable(ids)
    if not wanted or nul(collection):
        return {}
    rows = store.db.read(
        f"SELECT r.id, r.metadata FROM records r WHERE {BY_IDS}",
        (wanted, collection),
        binary=True,
    )
    return {rid: metadata_of(meta) for rid, meta in rows}


def list_records(store: PgState, collection: str, query: ListQuery) -> list[Record]:
    """Records of a collection in id order (byte order), filtered in SQL."""
    where, time_range, limit, after_id = query.where, query.time_range, query.limit, query.after_id
    include_vectors = query.include_vectors
    store._guard()
    if nul(collection):
        return []
    clause, params, post = where_sql(where, time_range)
    sql = f"SELECT {_cols(include_vectors)} FROM records r WHERE {BY_NAME}{clause}"
    args: list[Any] = [collection, *params]
    if after_id is not None:
        sql += " AND r.id > %s"
        # no id holds NUL: every id after "a\x00..." is after "a" (byte order)
        args.append(after_id.split("\x00", 1)[0])
    sql += " ORDER BY r.id"
    if limit is not None and limit > 0 and not post:
        sql += " LIMIT %s"
        args.append(limit)
    rows = store.db.read(sql, args, binary=True)
    return matching([record(collection, row, include_vectors) for row in rows], post, limit)


def columns(store: PgState, collection: str, after_id: str | None, limit: int) -> Columns:
    """The records after ``after_id`` (``limit`` at most) as columns (``StoreCore.columns``)."""
    if nul(collection):
        return NO_COLUMNS
    sql = (
        "SELECT r.id, r.text, r.metadata, r.version, r.created_ms, r.updated_ms, r.ts_ms, "
        f"r.seq, r.embedding, r.text_raw FROM records r WHERE {BY_NAME}"
    )
    args: list[Any] = [collection]
    if after_id is not None:
        sql += " AND r.id > %s"
        args.append(after_id.split("\x00", 1)[0])  # as list_records
    rows = store.db.read(sql + " ORDER BY r.id LIMIT %s", [*args, limit], binary=True)
    if not rows:
        return NO_COLUMNS
    ids, texts, metas, versions, created, updated, ts, seqs, vecs, raws = zip(*rows, strict=True)
    if any(raw is not None for raw in raws):  # texts holding NUL (codec.split_text)
        texts = tuple(text_of(t, raw) for t, raw in zip(texts, raws, strict=True))
    vectors = tuple(None if v is None else v.tobytes() for v in vecs)
    return Columns(ids, texts, metas, versions, created, updated, ts, seqs, vectors)


def changed_since(
    store: PgState, collection: str, after: int, include_vectors: bool, limit: int | None
) -> list[Record]:
    """Records whose ``seq`` is greater than ``after``, in ``seq`` order (index
    ``records_cid_seq``: a range of the collection's entries, O(changes)); the arguments
    are checked (``StoreCore.changed_since``)."""
    if nul(collection):
        return []
    sql = f"SELECT {_cols(include_vectors)} FROM records r WHERE {BY_NAME} AND r.seq > %s "
    sql += "ORDER BY r.seq"
    args: list[Any] = [collection, after]
    if limit is not None:
        sql += " LIMIT %s"
        args.append(limit)
    rows = store.db.read(sql, args, binary=True)
    return [record(collection, row, include_vectors) for row in rows]


# ---- tombstones ------------------------------------------------------------------------------


def tombstoned(store: PgState, namespace: str, keys: Iterable[str]) -> set[str]:
    items = storable(str(k) for k in keys)
    if not items or nul(namespace):
        return set()
    rows = store.db.read(
        "SELECT key FROM tombstones WHERE namespace = %s AND key = ANY(%s)", (namespace, items)
    )
    return {r[0] for r in rows}


def tombstoned_anywhere(store: PgState, keys: Iterable[str]) -> set[str]:
    items = storable(str(k) for k in keys)
    if not items:
        return set()
    return {r[0] for r in store.db.read("SELECT key FROM tombstones WHERE key = ANY(%s)", (items,))}


def list_tombstones(
    store: PgState, namespace: str | None = None
) -> list[tuple[str, str, str, int]]:
    """(namespace, key, reason, created_ms) sorted by namespace, key."""
    sql = "SELECT namespace, key, reason, created_ms FROM tombstones"
    if nul(namespace):
        return []
    if namespace is None:
        rows = store.db.read(sql + " ORDER BY 1, 2")
    else:
        rows = store.db.read(sql + " WHERE namespace = %s ORDER BY key", (namespace,))
    return [tuple(r) for r in rows]
