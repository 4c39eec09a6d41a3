"""``memory.list``: one page of a namespace's records of one scope, newest first.

Pages are keyset-paged on ``(ts desc, collection, id)``: the cursor names the last record
of a page, so records added while a client pages through never shift a page (new ones,
being newer, come before the first page).

A page is read from the store's listing by time (``StoreBackend.list_by_time``: an index
range per collection, ``limit + 1`` rows at most, docs/store.md "Listing by time") and the
total is a count of index entries (``count_by_time``); no call reads the whole scope. The
records left out (a session's bookkeeping, superseded versions) are the store's
``record_keys`` marks. The cursor is the same ``[ts, collection, id]`` as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.memory.core import layout as C
from sidecar.memory.core.cursor import Page
from sidecar.memory.core.cursor import decode_cursor as parts_of
from sidecar.memory.core.cursor import encode_cursor as cursor_of
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.lifecycle.session_index import namespace_sessions
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend
from sidecar.store.names import explicit_ts
from sidecar.store.record_keys import MARK_INTERNAL, MARK_SUPERSEDED
from sidecar.store.types import Record, TimeKey, TimeQuery

SortKey = tuple[int, str, str]


@dataclass(frozen=True, slots=True)
class ListQuery:
    namespace: str
    scope: str = "durable"
    session_id: str | None = None
    since: int | None = None
    until: int | None = None
    limit: int = 50
    cursor: str | None = None
    include_superseded: bool = False


ListPage = Page[Record]


def record_ts(rec: Record) -> int:
    ts = explicit_ts(rec.metadata)
    return rec.created_ms if ts is None else ts


def _key(rec: Record) -> SortKey:
    return (-record_ts(rec), rec.collection, rec.id)


def encode_cursor(key: SortKey) -> str:
    return cursor_of((-key[0], key[1], key[2]))


def decode_cursor(cursor: str) -> SortKey:
    ts, coll, rid = parts_of(cursor, (int, str, str), "memory.list")
    return (-ts, coll, rid)


async def _collections(store: AsyncStore, q: ListQuery) -> list[str]:
    ns = q.namespace
    if q.scope == "durable":
        return [C.user(ns)]
    if q.scope == "history":
        return [C.turns(ns)]
    if q.scope == "dream":
        return [C.dream(ns)]
    sessions = [q.session_id] if q.session_id else await namespace_sessions(store, ns)
    if q.scope == "summary":
        return [C.session_summary(s) for s in sorted(sessions)]
    if q.scope == "elevated":
        return [C.elevated_user(ns), *(C.elevated_session(s) for s in sorted(sessions))]
    raise MemoryInputError(f"unknown scope {q.scope!r}")


def time_query(names: Sequence[str], q: ListQuery) -> TimeQuery:
    """What ``memory.list`` lists of ``names``: no session bookkeeping, no superseded
    version unless asked, the session's and time range's records only."""
    marks = MARK_INTERNAL | (0 if q.include_superseded else MARK_SUPERSEDED)
    return TimeQuery(tuple(names), q.session_id or None, q.since, q.until, marks)


def _page(
    store: StoreBackend, query: TimeQuery, after: SortKey | None, limit: int
) -> tuple[list[Record], int]:
    key = None if after is None else TimeKey(-after[0], after[1], after[2])
    return store.list_by_time(query, after=key, limit=limit + 1), store.count_by_time(query)


async def list_memory(store: AsyncStore, q: ListQuery) -> ListPage:
    if q.since is not None and q.until is not None and q.since > q.until:
        raise MemoryInputError("since must be <= until")
    after = decode_cursor(q.cursor) if q.cursor else None
    query = time_query(await _collections(store, q), q)
    found, total = await store.call(_page, store.store, query, after, q.limit)
    page = found[: q.limit]
    more = len(found) > len(page)
    return ListPage(page, total, encode_cursor(_key(page[-1])) if more and page else "")
