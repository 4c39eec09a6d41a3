"""Listing by time (docs/store.md): ``list_by_time``, ``count_by_time``, ``time_spans``,
``time_histogram`` and ``session_keys`` on both backends, against the plain answer read
from every record (the full scan the lifecycle listings did before), on a randomized store
that every write path touched (put, patch, increment, delete, drop); and the migration of
a store written before the derived columns existed."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sidecar.store.backend import open_store
from sidecar.store.by_time import INT64_MAX, key_of
from sidecar.store.errors import InvalidInput
from sidecar.store.interface import StoreBackend
from sidecar.store.record_keys import MARK_INTERNAL, MARK_SUPERSEDED, record_marks, session_key
from sidecar.store.store import DB_NAME
from sidecar.store.types import Record, TimeKey, TimeQuery, TimeSpan
from tests.store.conftest import Location

COLLS = ("turns:a", "user:a", "user:b", "session_raw:s1")
SESSIONS = ("s1", "s2", "s3")


def _meta(rng: random.Random) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.7:
        meta["ts"] = rng.choice([rng.randrange(990, 1010), str(rng.randrange(990, 1010))])
    elif roll < 0.75:
        meta["ts"] = rng.choice([-5, 1.5e3, "x", None, True])
    sid = rng.random()
    if sid < 0.8:
        meta["sessionId"] = rng.choice(SESSIONS)
    elif sid < 0.85:
        meta["sessionId"] = rng.choice([7, "", "x" * 300, None])
    sup = rng.random()
    if sup < 0.15:
        meta["superseded_by"] = rng.choice(["v2", 1, [1], True])
    elif sup < 0.2:
        meta["superseded_by"] = rng.choice(["", 0, [], None, False])
    if rng.random() < 0.1:
        meta["type"] = rng.choice(["session_state", "coverage_edge", "turn", 3])
    return meta


def _fill(store: StoreBackend, seed: int = 7, n: int = 160) -> None:
    rng = random.Random(seed)
    for i in range(n):
        coll = rng.choice(COLLS)
        vec = [1.0, float(i % 5), 0.0, 1.0]
        store.put(coll, f"r{rng.randrange(n):03d}", text="t", metadata=_meta(rng), vector=vec)
    for coll in COLLS:  # every write path that changes a derived column
        ids = [r.id for r in store.list_records(coll)]
        for rid in rng.sample(ids, min(6, len(ids))):
            store.patch(coll, rid, _meta(rng))
        store.patch(coll, ids[0], {"superseded_by": "later", "sessionId": "s2"})
        store.patch(coll, ids[1], {"superseded_by": None, "type": None})
        store.increment({coll: ids[:5]})
        store.increment({coll: ids[5:7]}, key="ts")
        store.delete_many(coll, rng.sample(ids, 3))
    store.put("user:gone", "x", metadata={"sessionId": "s1"}, vector=[1, 0, 0, 0])
    store.drop_collections(["user:gone"])


def _all(store: StoreBackend, names: tuple[str, ...]) -> list[Record]:
    found = [r for n in names for r in store.list_records(n)]
    for r in found:  # the columns follow the metadata as Python reads it
        assert r.ts_ms == _ts(r)
    return found


def _ts(rec: Record) -> int:
    from sidecar.store.names import ts_from_metadata

    return ts_from_metadata(rec.metadata, rec.created_ms)


def _expected(store: StoreBackend, q: TimeQuery) -> list[Record]:
    lo = -(2**63) if q.since_ms is None else q.since_ms
    hi = INT64_MAX if q.until_ms is None else q.until_ms
    out = [
        r
        for r in _all(store, tuple(dict.fromkeys(q.collections)))
        if lo <= r.ts_ms <= hi
        and not record_marks(r.metadata) & q.exclude_marks
        and (q.session is None or r.metadata.get("sessionId") == q.session)
    ]
    return sorted(out, key=lambda r: (-r.ts_ms, r.collection, r.id))


def _ids(records: list[Record]) -> list[tuple[str, str]]:
    return [(r.collection, r.id) for r in records]


def _queries(rng: random.Random, n: int) -> list[TimeQuery]:
    out = [TimeQuery(COLLS), TimeQuery(("user:a",), exclude_marks=MARK_SUPERSEDED)]
    for _ in range(n):
        names = tuple(rng.sample([*COLLS, "user:missing"], rng.randrange(1, 4)))
        since = rng.choice([None, rng.randrange(985, 1010)])
        until = rng.choice([None, rng.randrange(995, 1015), 2**70])
        out.append(
            TimeQuery(
                names,
                rng.choice([None, None, *SESSIONS, "nobody"]),
                since,
                until,
                rng.choice([0, MARK_SUPERSEDED, MARK_INTERNAL, 3]),
            )
        )
    return out


def test_listing_by_time_equals_the_full_scan(store: StoreBackend) -> None:
    _fill(store)
    rng = random.Random(3)
    for q in _queries(rng, 30):
        want = _expected(store, q)
        assert store.count_by_time(q) == len(want), q
        limit = rng.randrange(1, 8)
        got: list[Record] = []
        after: TimeKey | None = None
        while True:
            page = store.list_by_time(q, after=after, limit=limit)
            assert len(page) <= limit
            got += page
            if len(page) < limit:
                break
            after = key_of(page[-1])
        assert _ids(got) == _ids(want), q
        assert [r.metadata for r in got] == [r.metadata for r in want]
        # a key that names no record continues at its place in the order
        if want:
            mid = want[len(want) // 2]
            key = TimeKey(mid.ts_ms, mid.collection, mid.id + "\x00")
            rest = store.list_by_time(q, after=key, limit=10_000)
            assert _ids(rest) == _ids(want[len(want) // 2 + 1 :])
    assert store.list_by_time(TimeQuery(COLLS), after=TimeKey(-(2**70), "", ""), limit=5) == []
    top = store.list_by_time(TimeQuery(COLLS), after=TimeKey(2**70, "", ""), limit=5)
    assert _ids(top) == _ids(_expected(store, TimeQuery(COLLS))[:5])


def test_spans_histogram_and_session_keys_equal_the_full_scan(store: StoreBackend) -> None:
    _fill(store, seed=11)
    names = [*COLLS, "user:missing"]
    spans = store.time_spans(names)
    for name in names:
        recs = _all(store, (name,))
        stamps = [r.ts_ms for r in recs]
        want = TimeSpan(len(recs), min(stamps, default=None), max(stamps, default=None))
        assert spans[name] == want, name
        keys = {session_key(r.metadata) for r in recs} - {None}
        assert store.session_keys(name) == sorted(keys, key=lambda k: k.encode())
    for width, lo, hi in ((1, 0, INT64_MAX), (3, 995, 1004), (1000, 0, 10)):
        hist = store.time_histogram(list(COLLS), width_ms=width, lo_ms=lo, hi_ms=hi)
        stamps = [r.ts_ms for r in _all(store, COLLS)]
        inside = [t for t in stamps if lo <= t <= hi]
        assert hist.buckets == dict(sorted(Counter(t // width for t in inside).items()))
        assert hist.outside == len(stamps) - len(inside)
        assert (hist.first_ms, hist.last_ms) == (
            min(inside, default=None),
            max(inside, default=None),
        )


def test_arguments_are_checked(store: StoreBackend) -> None:
    store.put("user:a", "x", metadata={"ts": 5, "sessionId": "s"}, vector=[1, 0, 0, 0])
    for bad in (0, 10_001, True, "5"):
        with pytest.raises(InvalidInput):
            store.list_by_time(TimeQuery(("user:a",)), limit=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        store.count_by_time(TimeQuery("user:a"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        store.time_histogram(["user:a"], width_ms=0, lo_ms=0, hi_ms=5)
    # no record can carry these: nothing, and no error
    assert store.count_by_time(TimeQuery(("user:a",), session="s" * 300)) == 0
    assert store.list_by_time(TimeQuery(("user:a",), session="a\x00b")) == []
    assert store.count_by_time(TimeQuery(("user:a",), since_ms=9, until_ms=3)) == 0
    assert store.session_keys("user:nothing") == []


# ---- a store written before the derived columns existed -------------------------------------


def _downgrade(location: Location) -> None:
    """Turn a closed store into what the previous schema left: no derived columns, the old
    time index, the previous schema version."""
    if isinstance(location, Path):
        conn = sqlite3.connect(location / DB_NAME, isolation_level=None)
        for stmt in (
            "DROP INDEX records_cid_time",
            "DROP INDEX records_cid_session_time",
            "ALTER TABLE records DROP COLUMN session_key",
            "ALTER TABLE records DROP COLUMN marks",
            "CREATE INDEX records_cid_ts ON records (cid, ts_ms)",
            "PRAGMA user_version = 4",
        ):
            conn.execute(stmt)
        conn.close()
        return
    with psycopg.connect(str(location), autocommit=True) as pg:
        for stmt in (
            "SET search_path TO libravdb, public",
            "DROP INDEX records_cid_time",
            "DROP INDEX records_cid_session_time",
            "ALTER TABLE records DROP COLUMN session_key, DROP COLUMN marks",
            "CREATE INDEX records_cid_ts ON records (cid, ts_ms)",
            "DROP TABLE saved_parts",  # and what came after version 4 (v6 dropped v5's table)
            "DELETE FROM schema_version WHERE version >= 4",
        ):
            pg.execute(stmt)


def test_an_old_schema_store_is_migrated(location: Location) -> None:
    with open_store(location, embed_dims=4, fingerprint="fp-test") as store:
        _fill(store, seed=5)
        version = store.stats()["schema"]
        before = {q: _ids(_expected(store, q)) for q in _queries(random.Random(9), 12)}
    _downgrade(location)
    with open_store(location, embed_dims=4, fingerprint="fp-test") as store:
        assert store.stats()["schema"] == version
        for q, want in before.items():
            assert _ids(store.list_by_time(q, limit=10_000)) == want, q
            assert store.count_by_time(q) == len(want)
