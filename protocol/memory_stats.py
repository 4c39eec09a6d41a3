"""v2 ``memory.stats``: what the memory holds, per namespace, and the store's size."""

from __future__ import annotations

from typing import Literal

from protocol.base import MethodSchema, Params, WireStruct

StatsBucket = Literal["day", "week", "month"]


class MemoryStatsParams(Params):
    """``namespace`` (or ``userId``) limits the answer to one namespace; without either,
    every namespace that has records. ``bucket`` is the timeline's calendar unit (UTC;
    weeks are ISO weeks starting on Monday)."""

    namespace: str | None = None
    user_id: str | None = None
    bucket: StatsBucket = "month"


class SummaryLevel(WireStruct):
    """Summaries at one level of the summary DAG: 1 summarizes turns, n summarizes
    level n - 1."""

    level: int
    count: int


class TimelineBucket(WireStruct):
    """Records whose ``ts`` falls in the bucket starting at ``startMs`` (``label``:
    2026-11, 2026-W48 or 2026-11-25)."""

    label: str
    start_ms: int
    records: int


class NamespaceStats(WireStruct):
    """Records per ``memory.list`` scope (``durable`` without, ``superseded`` the replaced
    versions of durable facts), the sessions with stored turns or summaries, the summaries
    per DAG level and ``depth`` (the highest level, 0 without summaries), the first and
    last ``ts`` (null when empty), and the timeline: contiguous buckets, oldest first, at
    most 260 (the newest; ``earlier`` counts records older than the first bucket returned).
    ``outOfRange`` counts records whose ``ts`` is outside the accepted range (epoch
    milliseconds from 1970-01-01 to 9999-12-31, stored before ingest checked it): counted in
    their scope, left out of the timeline and of ``firstTs``/``lastTs``."""

    namespace: str
    records: int
    durable: int
    superseded: int
    history: int
    summary: int
    elevated: int
    dream: int
    sessions: int
    depth: int
    summary_levels: list[SummaryLevel]
    first_ts: int | None
    last_ts: int | None
    timeline: list[TimelineBucket]
    earlier: int
    out_of_range: int = 0


class AuthoredStats(WireStruct):
    """Authored rules (global): documents and nodes per tier."""

    documents: int
    hard: int
    soft: int
    variant: int


class DiskStats(WireStruct):
    """Bytes on disk: the database, its WAL (-wal and -shm) and the saved indexes."""

    database_bytes: int
    wal_bytes: int
    index_bytes: int
    total_bytes: int


class MemoryStatsResult(WireStruct):
    """``records`` and ``collections`` count the whole store (every collection)."""

    namespaces: list[NamespaceStats]
    authored: AuthoredStats
    records: int
    collections: int
    disk: DiskStats
    bucket: StatsBucket


METHODS: dict[str, MethodSchema] = {
    "memory.stats": MethodSchema(
        MemoryStatsParams,
        MemoryStatsResult,
        "what the memory holds per namespace (records per scope, sessions, summary depth, "
        "a timeline), authored rules per tier and the size on disk",
    ),
}
