"""``memory.list``: one page of a namespace's records of one scope, newest first.

Pages are keyset-paged on ``(ts desc, collection, id)``: the cursor names the last record
of a page, so records added while a client pages through never shift a page (new ones,
being newer, come before the first page).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.lifecycle.forget import sessions_of_namespace
from sidecar.store.aio import AsyncStore
from sidecar.store.names import explicit_ts
from sidecar.store.types import Record

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


@dataclass(frozen=True, slots=True)
class ListPage:
    records: list[Record]
    total: int
    next_cursor: str


def record_ts(rec: Record) -> int:
    ts = explicit_ts(rec.metadata)
    return rec.created_ms if ts is None else ts


def _key(rec: Record) -> SortKey:
    return (-record_ts(rec), rec.collection, rec.id)


def encode_cursor(key: SortKey) -> str:
    raw = json.dumps([-key[0], key[1], key[2]], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> SortKey:
    try:
        pad = "=" * (-len(cursor) % 4)
        ts, coll, rid = json.loads(base64.urlsafe_b64decode(cursor + pad))
        if isinstance(ts, int) and isinstance(coll, str) and isinstance(rid, str):
            return (-ts, coll, rid)
    except (ValueError, TypeError):
        pass
    raise MemoryInputError("cursor is not one that memory.list returned")


async def _collections(store: AsyncStore, q: ListQuery) -> list[str]:
    ns = q.namespace
    if q.scope == "durable":
        return [C.user(ns)]
    if q.scope == "history":
        return [C.turns(ns)]
    if q.scope == "dream":
        return [C.dream(ns)]
    sessions = [q.session_id] if q.session_id else await sessions_of_namespace(store, ns)
    if q.scope == "summary":
        return [C.session_summary(s) for s in sorted(sessions)]
    if q.scope == "elevated":
        return [C.elevated_user(ns), *(C.elevated_session(s) for s in sorted(sessions))]
    raise MemoryInputError(f"unknown scope {q.scope!r}")


def _matches(rec: Record, q: ListQuery) -> bool:
    if rec.metadata.get("type") in (C.TYPE_SESSION_STATE, C.TYPE_EDGE):
        return False
    if q.session_id and rec.metadata.get("sessionId") != q.session_id:
        return False
    if not q.include_superseded and rec.metadata.get(C.SUPERSEDED_BY):
        return False
    ts = record_ts(rec)
    return (q.since is None or ts >= q.since) and (q.until is None or ts <= q.until)


async def list_memory(store: AsyncStore, q: ListQuery) -> ListPage:
    if q.since is not None and q.until is not None and q.since > q.until:
        raise MemoryInputError("since must be <= until")
    after = decode_cursor(q.cursor) if q.cursor else None
    found: list[Record] = []
    for name in await _collections(store, q):
        if store.store.collection(name) is not None:
            found += [r for r in await store.list_records(name) if _matches(r, q)]
    found.sort(key=_key)
    start = 0 if after is None else _first_after(found, after)
    page = found[start : start + q.limit]
    more = start + len(page) < len(found)
    return ListPage(page, len(found), encode_cursor(_key(page[-1])) if more and page else "")


def _first_after(ordered: Sequence[Record], after: SortKey) -> int:
    for i, rec in enumerate(ordered):
        if _key(rec) > after:
            return i
    return len(ordered)
