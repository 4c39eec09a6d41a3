"""v2 ``sessions.list``: the sessions of a namespace, most recently active first."""

from __future__ import annotations

from typing import Annotated

import msgspec

from protocol.base import MethodSchema, Params, WireStruct

MAX_SESSIONS_LIMIT = 500


class SessionsListParams(Params):
    """One page of the namespace's sessions, newest activity first.

    ``since`` keeps sessions whose last turn is at or after it (epoch ms). ``cursor`` is
    the ``nextCursor`` of the previous page."""

    namespace: str | None = None
    user_id: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_SESSIONS_LIMIT)] = 20
    cursor: str | None = None
    since: int | None = None


class SessionInfo(WireStruct):
    """One session: its stored turns (``session_raw:<sid>``, both roles), the times of
    its first and last turn (epoch ms; null when none is left) and its summaries."""

    session_id: str
    turn_count: int
    first_ts: int | None
    last_ts: int | None
    summary_count: int


class SessionsListResult(WireStruct):
    """``total`` counts every session that matches (all pages); ``nextCursor`` is "" on
    the last page."""

    namespace: str
    sessions: list[SessionInfo]
    total: int
    next_cursor: str


METHODS: dict[str, MethodSchema] = {
    "sessions.list": MethodSchema(
        SessionsListParams,
        SessionsListResult,
        "list a namespace's sessions, most recently active first, with their turn and "
        "summary counts, a page at a time",
    ),
}
