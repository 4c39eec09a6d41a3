"""What the store derives from a record's metadata to find it without reading it: its
session and its marks (beside its time, ``ts_ms``: ``names.ts_from_metadata``).

Both are columns of ``records``, written with every put, patch and increment and filled by
a migration from the records stored before (SQLite schema 5, PostgreSQL schema 4), so the
listings of ``memory.list``, ``sessions.list`` and ``memory.stats`` read an index range
instead of every record of a namespace (docs/store.md, "Listing by time"):

* ``session_key``: ``metadata["sessionId"]`` when it is a string of at most
  :data:`MAX_SESSION_KEY_BYTES` bytes without NUL (longer ones name no session a
  collection could have; PostgreSQL text cannot hold NUL), else NULL.
* ``marks``: bits for the records a listing leaves out: :data:`MARK_SUPERSEDED` when
  ``metadata["superseded_by"]`` is truthy (an earlier version of a corrected fact, or a
  turn a later one replaced), :data:`MARK_INTERNAL` when ``metadata["type"]`` is a
  session's bookkeeping (its state, a coverage edge). Computed here, in Python, so the
  truthiness is Python's on both backends, whatever JSON the value is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from sidecar.store.names import MAX_COLLECTION_BYTES, ts_from_metadata

SESSION_FIELD = "sessionId"
# a longer value cannot be the session id of a collection name (``session_raw:<sid>``)
MAX_SESSION_KEY_BYTES = MAX_COLLECTION_BYTES
MARK_SUPERSEDED = 1
MARK_INTERNAL = 2
SUPERSEDED_FIELD = "superseded_by"
TYPE_FIELD = "type"
INTERNAL_TYPES = ("session_state", "coverage_edge")
# metadata keys whose change changes a derived column (increment checks its key)
DERIVED_FROM = frozenset({"ts", SESSION_FIELD, SUPERSEDED_FIELD, TYPE_FIELD})


def storable_session(value: object) -> str | None:
    """``value`` as a session key, or None when no record can carry it as one."""
    if not isinstance(value, str) or "\x00" in value:
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: not text a name can hold
        return None
    return value if size <= MAX_SESSION_KEY_BYTES else None


def session_key(metadata: Mapping[str, Any]) -> str | None:
    return storable_session(metadata.get(SESSION_FIELD))


def record_marks(metadata: Mapping[str, Any]) -> int:
    marks = 0
    if metadata.get(SUPERSEDED_FIELD):
        marks |= MARK_SUPERSEDED
    kind = metadata.get(TYPE_FIELD)
    if isinstance(kind, str) and kind in INTERNAL_TYPES:
        marks |= MARK_INTERNAL
    return marks


def derived_columns(metadata: Mapping[str, Any], created_ms: int) -> tuple[int, str | None, int]:
    """What a write stores beside a record's metadata, derived from it: ``ts_ms``,
    ``session_key``, ``marks`` (a patch or an increment recomputes them)."""
    return ts_from_metadata(metadata, created_ms), session_key(metadata), record_marks(metadata)


def backfill(
    read: Callable[[int], list[Any]], write: Callable[[list[tuple[str | None, int, int]]], object]
) -> None:
    """Fill ``session_key`` and ``marks`` of the records stored before those columns
    existed (the migration that adds them): ``read(after)`` gives the next batch of
    ``(rid, metadata)`` rows in rid order, ``write`` stores ``(session_key, marks, rid)``
    for the records that have either."""
    after = 0
    while rows := read(after):
        updates = [(*_stored_keys(raw), rid) for rid, raw in rows]
        write([u for u in updates if u[0] is not None or u[1]])
        after = rows[-1][0]


def _stored_keys(raw: bytes | str) -> tuple[str | None, int]:
    """``session_key`` and ``marks`` of a stored metadata document (none for a damaged one)."""
    try:
        decoded = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        decoded = {}
    meta = decoded if isinstance(decoded, dict) else {}
    return session_key(meta), record_marks(meta)
