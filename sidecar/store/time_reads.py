"""Listing by time on the SQLite store (docs/store.md, "Listing by time").

What ``sidecar.store.by_time`` plans, read from two indexes (schema 5):
``records_cid_time (cid, ts_ms DESC, id, marks)`` and ``records_cid_session_time (cid,
session_key, ts_ms DESC, id, marks) WHERE session_key IS NOT NULL``. Both carry ``marks``,
so the records a listing leaves out (superseded, internal) are skipped in the index, and a
count is a scan of index entries only (no table row is read). A page reads at most
``limit`` rows per collection, plus the continuation's tie.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sidecar.store import by_time
from sidecar.store import reads as _reads
from sidecar.store.rows import chunks
from sidecar.store.types import Record, TimeHistogram, TimeKey, TimeQuery, TimeSpan

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

TIME_INDEX = "records_cid_time"
SESSION_INDEX = "records_cid_session_time"


def _cids(store: SqliteState, names: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        info = store._collections.get(name)
        if info is not None:
            out[name] = info.cid
    return out


def _scope(session: str | None, marks: int) -> tuple[str, list[Any], str]:
    """(the WHERE clauses after ``cid = ?``, their parameters, the index to read)."""
    sql, args = by_time.scope_sql(session, marks, column="", mark="?")
    return sql, args, TIME_INDEX if session is None else SESSION_INDEX


def list_by_time(
    store: SqliteState, query: TimeQuery, after: TimeKey | None, limit: int
) -> list[Record]:
    cids = _cids(store, query.collections)
    plan = by_time.plan(dataclasses.replace(query, collections=tuple(cids)), after, limit)
    if plan is None:
        return []
    where, args, index = _scope(plan.session, plan.exclude_marks)
    # (collection, the rest of its WHERE and its order, their parameters): each range, then
    # the continuation's tie
    reads: list[tuple[str, str, tuple[Any, ...]]] = [
        (r.collection, "ts_ms BETWEEN ? AND ? ORDER BY ts_ms DESC, id", (r.lower, r.upper))
        for r in plan.ranges
    ]
    if plan.tie is not None:
        t = plan.tie
        reads.append((t.collection, "ts_ms = ? AND id > ? ORDER BY id", (t.ts_ms, t.after_id)))
    found: list[Record] = []
    for name, clause, bounds in reads:
        rows = _reads._read(
            store,
            f"SELECT {_reads.COLS} FROM records INDEXED BY {index} WHERE cid = ?{where} "
            f"AND {clause} LIMIT ?",
            (cids[name], *args, *bounds, limit),
        )
        found += _reads._records(store, name, rows, False)
    return by_time.merge(found, limit)


def count_by_time(store: SqliteState, query: TimeQuery) -> int:
    where, args, index = _scope(query.session, query.exclude_marks)
    total = 0
    for cid in _cids(store, query.collections).values():
        rows = _reads._read(
            store,
            f"SELECT count(*) FROM records INDEXED BY {index} WHERE cid = ?{where} "
            "AND ts_ms BETWEEN ? AND ?",
            (cid, *args, query.since_ms, query.until_ms),
        )
        total += int(rows[0][0])
    return total


def time_spans(store: SqliteState, names: list[str]) -> dict[str, TimeSpan]:
    """Counts from the store's per-collection counters, the first and last time from two
    index seeks per collection (one statement): O(collections), whatever their sizes."""
    by_cid = {cid: name for name, cid in _cids(store, names).items()}
    out: dict[str, TimeSpan] = {}
    for part in chunks(list(by_cid), 5000):
        rows = _reads._read(
            store,
            f"SELECT c.value, (SELECT min(ts_ms) FROM records INDEXED BY {TIME_INDEX} "
            f"WHERE cid = c.value), (SELECT max(ts_ms) FROM records INDEXED BY {TIME_INDEX} "
            "WHERE cid = c.value) FROM json_each(?) c",
            (json.dumps(list(part)),),
        )
        for cid, first, last in rows:
            n = store._counts.get(cid, 0)
            if n and first is not None:
                out[by_cid[cid]] = TimeSpan(n, first, last)
    return out


def time_histogram(
    store: SqliteState, names: list[str], width: int, lo: int, hi: int
) -> TimeHistogram:
    buckets: dict[int, int] = {}
    outside = 0
    first: int | None = None
    last: int | None = None
    for cid in _cids(store, names).values():
        for key, n, a, b in _reads._read(
            store,
            f"SELECT ts_ms / ?, count(*), min(ts_ms), max(ts_ms) FROM records "
            f"INDEXED BY {TIME_INDEX} WHERE cid = ? AND ts_ms BETWEEN ? AND ? GROUP BY 1",
            (width, cid, lo, hi),
        ):
            buckets[int(key)] = buckets.get(int(key), 0) + int(n)
            first = a if first is None else min(first, a)
            last = b if last is None else max(last, b)
        rows = _reads._read(
            store,
            f"SELECT (SELECT count(*) FROM records INDEXED BY {TIME_INDEX} WHERE cid = ? "
            f"AND ts_ms < ?) + (SELECT count(*) FROM records INDEXED BY {TIME_INDEX} "
            "WHERE cid = ? AND ts_ms > ?)",
            (cid, lo, cid, hi),
        )
        outside += int(rows[0][0])
    return TimeHistogram(dict(sorted(buckets.items())), outside, first, last)


def session_keys(store: SqliteState, collection: str) -> list[str]:
    """The distinct session keys of a collection's records, sorted (byte order): one index
    seek per session (a loose scan of ``records_cid_session_time``)."""
    store._guard()
    info = store._collections.get(collection)
    if info is None:
        return []
    rows = _reads._read(store, _SKIP_SCAN.replace("%s", "?"), (info.cid, info.cid))
    return [r[0] for r in rows]


# a loose index scan: the next key after the last one, until none (both backends)
_SKIP_SCAN = (
    "WITH RECURSIVE s(k) AS ("
    "SELECT (SELECT min(session_key) FROM records WHERE cid = %s AND session_key IS NOT NULL) "
    "UNION ALL SELECT (SELECT min(session_key) FROM records WHERE cid = %s "
    "AND session_key > s.k) FROM s WHERE s.k IS NOT NULL) "
    "SELECT k FROM s WHERE k IS NOT NULL"
)
SKIP_SCAN = _SKIP_SCAN
