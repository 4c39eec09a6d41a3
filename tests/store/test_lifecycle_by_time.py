"""``memory.list``, ``sessions.list`` and ``memory.stats`` read through the store's listing
by time give what the full scan of every record gave (the code they replaced, kept here as
the reference), pages and cursors included, on both backends."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

from sidecar.memory.core import layout as C
from sidecar.memory.core.scope import session_owner, sessions_of_namespace
from sidecar.memory.lifecycle import listing, session_index, stats
from sidecar.memory.lifecycle.timeline import split_stamps, timeline
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend
from sidecar.store.names import InvalidName
from sidecar.store.types import Record

NS = "ns"
SIDS = ("sA", "sB", "sC")


def _is_session_id(sid: str) -> bool:
    try:
        C.session_state(sid)
    except InvalidName:
        return False
    return True


def _sessions_by_scan(store: StoreBackend, namespace: str) -> list[str]:
    """``scope.sessions_of_namespace`` as it was: the sessions of ``turns:<ns>`` from
    every turn's metadata."""
    owners: dict[str, str | None] = {}
    for info in store.collections(prefix=C.SESSION_STATE_PREFIX):
        sid = C.session_id_of(info.name)
        if sid and _is_session_id(sid):
            owners[sid] = session_owner(store, sid)
    named: dict[str, None] = {}
    if namespace.startswith(C.SESSION_PREFIX):
        named[namespace[len(C.SESSION_PREFIX) :]] = None
    if store.collection(C.turns(namespace)) is not None:
        for rec in store.list_records(C.turns(namespace)):
            sid = rec.metadata.get("sessionId")
            if isinstance(sid, str) and _is_session_id(sid):
                named[sid] = None
    found = {sid: None for sid, owner in owners.items() if owner == namespace}
    for sid in named:
        if sid not in owners:
            owners[sid] = session_owner(store, sid)
        if owners[sid] in (None, namespace):
            found[sid] = None
    return list(found)


def _fill(store: StoreBackend, seed: int = 1) -> None:
    rng = random.Random(seed)
    v = [1.0, 0.0, 0.0, 0.0]
    store.put(C.session_state("sA"), C.INGEST_STATE_ID, metadata={"namespace": NS})
    store.put(C.session_state("sC"), C.INGEST_STATE_ID, metadata={"namespace": "other"})
    for i in range(120):
        sid = rng.choice(SIDS)
        meta: dict[str, Any] = {
            "sessionId": sid,
            "ts": rng.randrange(10**9, 10**9 + 9 * 86_400_000),
        }
        if rng.random() < 0.2:
            meta["superseded_by"] = "x"
        if rng.random() < 0.05:
            meta["type"] = C.TYPE_EDGE
        coll = rng.choice([C.user(NS), C.turns(NS), C.dream(NS), C.elevated_user(NS)])
        store.put(coll, f"m{i:03d}", text="t", metadata=meta, vector=v)
        store.put(C.session_raw(sid), f"m{i:03d}", text="t", metadata=meta, vector=v)
        if i % 9 == 0:
            level = rng.choice([1, 2, "x"])
            store.put(C.session_summary(sid), f"s{i}", metadata={**meta, "level": level}, vector=v)
            store.put(C.elevated_session(sid), f"g{i}", metadata=meta, vector=v)
    store.put(C.user(NS), "far", metadata={"ts": -5}, vector=v)  # outside the accepted range


def _old_page(store: StoreBackend, q: listing.ListQuery, sessions: list[str]) -> listing.ListPage:
    names = {
        "durable": [C.user(NS)],
        "history": [C.turns(NS)],
        "dream": [C.dream(NS)],
        "summary": [C.session_summary(s) for s in sessions],
        "elevated": [C.elevated_user(NS), *(C.elevated_session(s) for s in sessions)],
    }[q.scope]

    def ok(r: Record) -> bool:
        ts = listing.record_ts(r)
        return (
            r.metadata.get("type") not in (C.TYPE_SESSION_STATE, C.TYPE_EDGE)
            and (not q.session_id or r.metadata.get("sessionId") == q.session_id)
            and (q.include_superseded or not r.metadata.get(C.SUPERSEDED_BY))
            and (q.since is None or ts >= q.since)
            and (q.until is None or ts <= q.until)
        )

    found = sorted((r for n in names for r in store.list_records(n) if ok(r)), key=listing._key)
    after = listing.decode_cursor(q.cursor) if q.cursor else None
    start = (
        0
        if after is None
        else next((i for i, r in enumerate(found) if listing._key(r) > after), len(found))
    )
    page = found[start : start + q.limit]
    more = start + len(page) < len(found)
    cursor = listing.encode_cursor(listing._key(page[-1])) if more and page else ""
    return listing.ListPage(page, len(found), cursor)


def test_memory_list_pages_as_the_full_scan_did(store: StoreBackend) -> None:
    _fill(store)
    aio = AsyncStore(store, read_threads=1)
    rng = random.Random(2)
    sessions = sorted(_sessions_by_scan(store, NS))
    for _ in range(25):
        scope = rng.choice(["durable", "history", "summary", "elevated", "dream"])
        sid = rng.choice([None, None, "sA", "sB"])
        q = listing.ListQuery(
            NS,
            scope,
            sid,
            rng.choice([None, 10**9 + 86_400_000]),
            rng.choice([None, 10**9 + 6 * 86_400_000]),
            rng.randrange(1, 15),
            None,
            rng.random() < 0.5,
        )
        for _page in range(40):
            old = _old_page(store, q, [sid] if sid else sessions)
            new = asyncio.run(listing.list_memory(aio, q))
            assert [(r.collection, r.id) for r in new.items] == [
                (r.collection, r.id) for r in old.items
            ]
            assert (new.total, new.next_cursor) == (old.total, old.next_cursor)
            if not new.next_cursor:
                break
            q = listing.ListQuery(**{**_fields(q), "cursor": new.next_cursor})
    aio._pool.shutdown()


def _fields(q: listing.ListQuery) -> dict[str, Any]:
    return {k: getattr(q, k) for k in q.__slots__}


def test_sessions_and_stats_as_the_full_scan_counted(store: StoreBackend) -> None:
    _fill(store, seed=4)
    sessions = sorted(_sessions_by_scan(store, NS))
    assert sorted(sessions_of_namespace(store, NS)) == sessions
    got = {s.session_id: s for s in session_index.summarize_sessions(store, sessions)}
    for sid in sessions:
        stamps = [listing.record_ts(r) for r in store.list_records(C.session_raw(sid))]
        s = got[sid]
        assert (s.turn_count, s.first_ts, s.last_ts) == (len(stamps), min(stamps), max(stamps))
        assert s.summary_count == len(store.list_records(C.session_summary(sid)))
    out = stats.namespace_stats(store, NS, "day")
    user = store.list_records(C.user(NS))
    assert out.superseded == sum(1 for r in user if r.metadata.get(C.SUPERSEDED_BY))
    assert out.durable == len(user) - out.superseded
    shown = [C.user(NS), C.turns(NS), C.dream(NS), C.elevated_user(NS)]
    shown += [C.session_summary(s) for s in sessions] + [C.elevated_session(s) for s in sessions]
    stamps = [listing.record_ts(r) for n in shown for r in store.list_records(n)]
    dated, outside = split_stamps(stamps)
    assert (out.first_ts, out.last_ts, out.out_of_range) == (min(dated), max(dated), outside)
    for bucket in ("day", "week", "month"):
        b = stats.namespace_stats(store, NS, bucket)
        assert (b.timeline, b.earlier) == timeline(dated, bucket)
    levels: Counter[int] = Counter()
    for sid in sessions:
        for r in store.list_records(C.session_summary(sid)):
            lv = r.metadata.get("level")
            levels[lv if isinstance(lv, int) and lv > 0 else 1] += 1
    assert {lv.level: lv.count for lv in out.summary_levels} == dict(sorted(levels.items()))
    assert out.sessions == len(sessions)
