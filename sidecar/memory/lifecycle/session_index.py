"""``sessions.list``: a namespace's sessions, most recently active first.

A session's facts come from what is stored, not from counters: the turns are the records
of ``session_raw:<sid>`` (both roles, v1 and v2 sessions alike, and what ``forget`` left),
the summaries are the records of ``session_summary:<sid>``. Nothing is embedded and no
vector is read. Pages are keyset-paged on ``(last turn desc, session id)``, so a session
that becomes active while a client pages moves to the front and never shifts the pages
still to come.

Nothing here reads a record it does not show: the sessions of a namespace come from the
sessions' states and the distinct session keys of ``turns:<ns>`` (``session_keys``, one
index seek per session), and every session's turn count, first and last turn and summary
count from one aggregate query (``time_spans``), so a page costs O(sessions), never
O(records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.memory.core import layout as C
from sidecar.memory.core.cursor import Page
from sidecar.memory.core.cursor import decode_cursor as parts_of
from sidecar.memory.core.cursor import encode_cursor as cursor_of
from sidecar.memory.core.scope import sessions_of_namespace
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend

SortKey = tuple[int, str]


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    turn_count: int
    first_ts: int | None
    last_ts: int | None
    summary_count: int

    @property
    def sort_key(self) -> SortKey:
        return (-(self.last_ts or 0), self.session_id)


SessionsPage = Page[SessionSummary]


def encode_cursor(key: SortKey) -> str:
    return cursor_of((-key[0], key[1]))


def decode_cursor(cursor: str) -> SortKey:
    last, sid = parts_of(cursor, (int, str), "sessions.list")
    return (-last, sid)


async def namespace_sessions(store: AsyncStore, namespace: str) -> list[str]:
    return await store.call(sessions_of_namespace, store.store, namespace)


def summarize_sessions(store: StoreBackend, sessions: Sequence[str]) -> list[SessionSummary]:
    """Each session's turns (its raw history: count, first and last time) and summaries,
    in one aggregate query; a session with neither (a name only: the default namespace's
    own session before anything was stored, or one whose every turn was forgotten) is
    left out."""
    raws = {sid: C.session_raw(sid) for sid in sessions}
    sums = {sid: C.session_summary(sid) for sid in sessions}
    spans = store.time_spans([*raws.values(), *sums.values()])
    out: list[SessionSummary] = []
    for sid in sessions:
        turns, summaries = spans[raws[sid]], spans[sums[sid]].count
        if turns.count == 0 and summaries == 0:
            continue
        out.append(SessionSummary(sid, turns.count, turns.first_ms, turns.last_ms, summaries))
    return out


def _all_sessions(store: StoreBackend, namespace: str, since: int | None) -> list[SessionSummary]:
    kept = summarize_sessions(store, sessions_of_namespace(store, namespace))
    if since is not None:
        kept = [s for s in kept if s.last_ts is not None and s.last_ts >= since]
    kept.sort(key=lambda s: s.sort_key)
    return kept


async def list_sessions(
    store: AsyncStore,
    namespace: str,
    *,
    limit: int = 20,
    cursor: str | None = None,
    since: int | None = None,
) -> SessionsPage:
    after = decode_cursor(cursor) if cursor else None
    ordered = await store.call(_all_sessions, store.store, namespace, since)
    start = 0
    if after is not None:
        start = next((i for i, s in enumerate(ordered) if s.sort_key > after), len(ordered))
    page = ordered[start : start + limit]
    more = start + len(page) < len(ordered)
    next_cursor = encode_cursor(page[-1].sort_key) if more and page else ""
    return SessionsPage(page, len(ordered), next_cursor)
