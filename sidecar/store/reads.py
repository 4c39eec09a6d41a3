"""Reading records back: the per-thread read connections, row fetching in chunks, damaged
records reported and skipped, and get / list / iterate."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from sidecar.store import names as N
from sidecar.store.common import matching
from sidecar.store.errors import StoreClosed
from sidecar.store.exact import F32
from sidecar.store.index import Row
from sidecar.store.rows import (
    NO_COLUMNS,
    BadRecord,
    Columns,
    Undecodable,
    chunks,
    lenient_text,
    record_meta,
    where_sql,
)
from sidecar.store.types import ListQuery, Record
from sidecar.store.writer import map_sqlite_error

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


# the columns a record is read with (_records decodes them in this order)
COLS = "rid, id, text, metadata, version, created_ms, updated_ms, ts_ms, seq"


def _rconn(store: SqliteState) -> sqlite3.Connection:
    if store._shut:
        raise StoreClosed("the store is closed")
    conn: sqlite3.Connection | None = getattr(store._local, "conn", None)
    if conn is None:
        try:
            conn = store._connect(read_only=True)
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, "read", str(store.db_path)) from exc
        store._local.conn = conn
        with store._readers_lock:
            store._readers.append(conn)
    return conn


def _read(store: SqliteState, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    try:
        return _rconn(store).execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise map_sqlite_error(exc, "read", str(store.db_path)) from exc


def _read_utf8(store: SqliteState, sql: str, params: Sequence[Any]) -> list[Any] | None:
    """:func:`_read` with sqlite3's own UTF-8 decoding, a C call per value where the
    connection's ``lenient_text`` is a Python one (a tenth of a view's page read); None
    when the query fails, as it does on a value that is not UTF-8."""
    conn = _rconn(store)
    conn.text_factory = str
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return None
    except sqlite3.Error as exc:
        raise map_sqlite_error(exc, "read", str(store.db_path)) from exc
    finally:
        conn.text_factory = lenient_text


def _fetch_rows(
    store: SqliteState, cid: int, max_vseq: int | None, after: int, limit: int
) -> list[Row]:
    if max_vseq is None:
        return _read(
            store,
            "SELECT rid, id, vector, vseq FROM records WHERE cid = ? AND rid > ? "
            "ORDER BY rid LIMIT ?",
            (cid, after, limit),
        )
    return _read(
        store,
        "SELECT rid, id, vector, vseq FROM records WHERE cid = ? AND rid > ? AND vseq <= ? "
        "ORDER BY rid LIMIT ?",
        (cid, after, max_vseq, limit),
    )


def _fetch_vectors(store: SqliteState, rids: Sequence[int]) -> dict[int, F32]:
    out: dict[int, F32] = {}
    for part in chunks(list(rids)):
        marks = ",".join("?" * len(part))
        for rid, blob in _read(
            store, f"SELECT rid, vector FROM records WHERE rid IN ({marks})", part
        ):
            if blob is not None:
                out[rid] = N.normalized(np.frombuffer(blob, dtype=np.float32))
    return out


def _records(
    store: SqliteState, name: str, rows: Iterable[Sequence[Any]], with_vector: bool
) -> list[Record]:
    """Records from rows; a damaged one is skipped and reported (never its content)."""
    out: list[Record] = []
    for row in rows:
        try:
            out.append(_row_to_record(store, name, row, with_vector))
        except BadRecord as exc:
            _report_bad(store, name, str(row[1]), str(exc))
    return out


def _report_bad(store: SqliteState, collection: str, record_id: str, why: str) -> None:
    key = (collection, record_id)
    if key not in store.bad_records:
        store.bad_records[key] = why
        log.error("store.bad_record", collection=collection, id=record_id[:200], error=why)


def _row_to_record(store: SqliteState, name: str, row: Sequence[Any], with_vector: bool) -> Record:
    _rid, rec_id, text, meta, version, created, updated, ts, seq = row[:9]
    if isinstance(text, Undecodable) or isinstance(rec_id, Undecodable):
        raise BadRecord("text is not UTF-8")
    vec = None
    if with_vector and row[9] is not None:
        vec = np.frombuffer(row[9], dtype=np.float32).copy()
    return Record(
        collection=name,
        id=rec_id,
        text=text,
        metadata=record_meta(meta),
        version=version,
        created_ms=created,
        updated_ms=updated,
        ts_ms=ts if ts is not None else created,
        seq=seq,
        vector=vec,
    )


def get(
    store: SqliteState, collection: str, record_id: str, *, include_vector: bool = False
) -> Record | None:
    store._guard()
    info = store._collections.get(collection)
    if info is None:
        return None
    rows = _read(
        store,
        f"SELECT {COLS}, vector FROM records WHERE cid = ? AND id = ?",
        (info.cid, record_id),
    )
    found = _records(store, info.name, rows[:1], include_vector)
    return found[0] if found else None


def get_many(
    store: SqliteState, collection: str, ids: Iterable[str], *, include_vectors: bool = False
) -> list[Record]:
    """Existing records among ``ids``, in id order."""
    store._guard()
    info = store._collections.get(collection)
    if info is None:
        return []
    rows = _rows_by_id(store, info.cid, f"{COLS}, vector", ids)
    out = _records(store, info.name, rows, include_vectors)
    out.sort(key=lambda r: r.id)
    return out


def _rows_by_id(store: SqliteState, cid: int, columns: str, ids: Iterable[str]) -> list[Any]:
    """``columns`` of the records of collection ``cid`` among ``ids`` (each id once),
    read in chunks of ``IN`` lists."""
    out: list[Any] = []
    for part in chunks(list(dict.fromkeys(ids))):
        marks = ",".join("?" * len(part))
        sql = f"SELECT {columns} FROM records WHERE cid = ? AND id IN ({marks})"
        out.extend(_read(store, sql, (cid, *part)))
    return out


def metadata_many(
    store: SqliteState, collection: str, ids: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The metadata of the existing records among ``ids`` (``StoreCore.metadata_many``):
    the id, text and metadata columns alone (no record built), a damaged record reported
    and left out as :func:`get_many` does."""
    store._guard()
    info = store._collections.get(collection)
    if info is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for rid, text, meta in _rows_by_id(store, info.cid, "id, text, metadata", ids):
        try:
            if isinstance(rid, Undecodable) or isinstance(text, Undecodable):
                raise BadRecord("text is not UTF-8")
            out[rid] = record_meta(meta)
        except BadRecord as exc:
            _report_bad(store, info.name, str(rid), str(exc))
    return out


def list_records(store: SqliteState, collection: str, query: ListQuery) -> list[Record]:
    """Records of a collection in id order (byte order of UTF-8, like Go's sort).

    ``where``: metadata equality (all pairs must match); ``after_id`` pages.
    """
    where, time_range, limit, after_id = query.where, query.time_range, query.limit, query.after_id
    include_vectors = query.include_vectors
    store._guard()
    info = store._collections.get(collection)
    if info is None:
        return []
    clause, params, post = where_sql(where, time_range)
    sql = f"SELECT {COLS}, vector FROM records WHERE cid = ?{clause}"
    args: list[Any] = [info.cid, *params]
    if after_id is not None:
        sql += " AND id > ?"
        args.append(after_id)
    sql += " ORDER BY id"
    if limit is not None and limit > 0 and not post:
        sql += " LIMIT ?"
        args.append(limit)
    rows = _read(store, sql, args)
    return matching(_records(store, info.name, rows, include_vectors), post, limit)


COLUMNS = (
    "SELECT id, text, metadata, version, created_ms, updated_ms, coalesce(ts_ms, created_ms), "
    "seq, vector FROM records WHERE cid = ?"
)


def columns(store: SqliteState, collection: str, after_id: str | None, limit: int) -> Columns:
    """The records after ``after_id`` (``limit`` at most) as columns (``StoreCore.columns``);
    a damaged one is skipped and reported, as :func:`list_records` does."""
    info = store._collections.get(collection)
    if info is None:
        return NO_COLUMNS
    sql = COLUMNS
    args: list[Any] = [info.cid]
    if after_id is not None:
        sql += " AND id > ?"
        args.append(after_id)
    sql += " ORDER BY id LIMIT ?"
    args.append(limit)
    rows = _read_utf8(store, sql, args)
    if rows is None:  # a value is not UTF-8: read with the connection's lenient decoding
        rows = _read(store, sql, args)
    if not rows:
        return NO_COLUMNS
    cols = list(zip(*rows, strict=True))
    # text_factory marks a value that is not UTF-8 with its own type: a set of the types
    # finds one at C speed
    if any(set(map(type, cols[k])) != {str} for k in range(3)):
        good = []
        for r in rows:
            if isinstance(r[0], Undecodable) or isinstance(r[1], Undecodable):
                _report_bad(store, info.name, str(r[0]), "text is not UTF-8")
            elif isinstance(r[2], Undecodable):
                _report_bad(store, info.name, str(r[0]), "metadata is not UTF-8")
            else:
                good.append(r)
        if not good:
            return NO_COLUMNS
        cols = list(zip(*good, strict=True))
    return Columns(*cols)


def changed_since(
    store: SqliteState, collection: str, after: int, include_vectors: bool, limit: int | None
) -> list[Record]:
    """Records whose ``seq`` is greater than ``after``, in ``seq`` order (index
    ``records_cid_seq``: a range of the collection's entries, O(changes)); the arguments
    are checked (``StoreCore.changed_since``)."""
    info = store._collections.get(collection)
    if info is None:
        return []
    vec = "vector" if include_vectors else "NULL"
    sql = (
        f"SELECT {COLS}, {vec} FROM records INDEXED BY records_cid_seq "
        "WHERE cid = ? AND seq > ? ORDER BY seq"
    )
    args: list[Any] = [info.cid, after]
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    return _records(store, info.name, _read(store, sql, args), include_vectors)
