"""Listing by time on the PostgreSQL store (docs/store.md, "Listing by time").

What ``sidecar.store.by_time`` plans, read from two indexes (schema 4):
``records_cid_time (cid, ts_ms DESC, id) INCLUDE (marks)`` and
``records_cid_session_time (cid, session_key, ts_ms DESC, id) INCLUDE (marks) WHERE
session_key IS NOT NULL``. Each read is one statement (one snapshot): a page's ranges are
the parts of one ``UNION ALL``, each ``LIMIT``ed, so a page reads at most ``limit`` rows per
collection whatever its size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sidecar.store import by_time
from sidecar.store.pg.codec import COLS, record
from sidecar.store.pg.reads import storable
from sidecar.store.time_reads import SKIP_SCAN
from sidecar.store.types import Record, TimeHistogram, TimeKey, TimeQuery, TimeSpan

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

_CID = "(SELECT cid FROM collections WHERE name = %s)"


def _scope(session: str | None, marks: int) -> tuple[str, list[Any]]:
    return by_time.scope_sql(session, marks, column="r.", mark="%s")


def _cids(store: PgState, names: Sequence[str]) -> dict[str, int]:
    items = storable(names)
    if not items:
        return {}
    rows = store.db.read("SELECT name, cid FROM collections WHERE name = ANY(%s)", (items,))
    return {name: int(cid) for name, cid in rows}


def list_by_time(
    store: PgState, query: TimeQuery, after: TimeKey | None, limit: int
) -> list[Record]:
    names = tuple(storable(query.collections))
    plan = by_time.plan(dataclasses.replace(query, collections=names), after, limit)
    if plan is None or not (plan.ranges or plan.tie):
        return []
    where, scope_args = _scope(plan.session, plan.exclude_marks)
    parts: list[str] = []
    args: list[Any] = []
    for i, r in enumerate(plan.ranges):
        parts.append(
            f"(SELECT {COLS}, {i} FROM records r WHERE r.cid = {_CID}{where} "
            "AND r.ts_ms BETWEEN %s AND %s ORDER BY r.ts_ms DESC, r.id LIMIT %s)"
        )
        args += [r.collection, *scope_args, r.lower, r.upper, limit]
    if plan.tie is not None:
        t = plan.tie
        parts.append(
            f"(SELECT {COLS}, -1 FROM records r WHERE r.cid = {_CID}{where} "
            "AND r.ts_ms = %s AND r.id > %s ORDER BY r.id LIMIT %s)"
        )
        # no id holds NUL: the ids after "a\x00..." are the ids after "a" (list_records)
        args += [t.collection, *scope_args, t.ts_ms, t.after_id.split("\x00", 1)[0], limit]
    rows = store.db.read(" UNION ALL ".join(parts), args, binary=True)
    found: list[Record] = []
    for row in rows:
        part = int(row[10])
        name = plan.tie.collection if part < 0 and plan.tie else plan.ranges[part].collection
        found.append(record(name, row[:10], False))
    return by_time.merge(found, limit)


def count_by_time(store: PgState, query: TimeQuery) -> int:
    cids = list(_cids(store, query.collections).values())
    if not cids:
        return 0
    where, args = _scope(query.session, query.exclude_marks)
    rows = store.db.read(
        f"SELECT count(*) FROM records r WHERE r.cid = ANY(%s){where} "
        "AND r.ts_ms BETWEEN %s AND %s",
        (cids, *args, query.since_ms, query.until_ms),
    )
    return int(rows[0][0])


def time_spans(store: PgState, names: list[str]) -> dict[str, TimeSpan]:
    out: dict[str, TimeSpan] = {}
    items = storable(names)
    if not items:
        return out
    # counts from the collection rows (kept by every write), times from two index seeks
    rows = store.db.read(
        "SELECT c.name, c.n_records, "
        "(SELECT min(r.ts_ms) FROM records r WHERE r.cid = c.cid), "
        "(SELECT max(r.ts_ms) FROM records r WHERE r.cid = c.cid) "
        "FROM collections c WHERE c.name = ANY(%s)",
        (items,),
    )
    for name, n, first, last in rows:
        if n and first is not None:
            out[name] = TimeSpan(int(n), int(first), int(last))
    return out


def time_histogram(store: PgState, names: list[str], width: int, lo: int, hi: int) -> TimeHistogram:
    cids = list(_cids(store, names).values())
    if not cids:
        return TimeHistogram()
    rows = store.db.read(
        "SELECT r.ts_ms / %s::bigint, count(*), min(r.ts_ms), max(r.ts_ms) FROM records r "
        "WHERE r.cid = ANY(%s) AND r.ts_ms BETWEEN %s AND %s GROUP BY 1 ORDER BY 1",
        (width, cids, lo, hi),
    )
    outside = store.db.read(
        "SELECT (SELECT count(*) FROM records r WHERE r.cid = ANY(%s) AND r.ts_ms < %s) "
        "+ (SELECT count(*) FROM records r WHERE r.cid = ANY(%s) AND r.ts_ms > %s)",
        (cids, lo, cids, hi),
    )
    buckets = {int(k): int(n) for k, n, _, _ in rows}
    first = min((int(a) for _, _, a, _ in rows), default=None)
    last = max((int(b) for _, _, _, b in rows), default=None)
    return TimeHistogram(buckets, int(outside[0][0]), first, last)


def session_keys(store: PgState, collection: str) -> list[str]:
    store._guard()
    if "\x00" in collection:
        return []
    cids = _cids(store, [collection])
    if not cids:
        return []
    cid = cids[collection]
    return [r[0] for r in store.db.read(SKIP_SCAN, (cid, cid))]
