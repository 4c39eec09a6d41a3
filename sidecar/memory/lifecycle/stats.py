"""``memory.stats``: what the memory holds, per namespace, counted from what is stored.

Counts follow ``memory.list``'s scopes: ``durable`` (``user:<ns>``, superseded versions
counted apart), ``history`` (``turns:<ns>``, both roles), ``summary`` (the summaries of the
namespace's sessions, by DAG level: 1 = summaries of turns, n = summaries of level n - 1),
``elevated`` (``elevated:user:<ns>`` and the sessions' guidance shards), ``dream``. The
timeline counts those records by their ``ts`` per calendar bucket (UTC), contiguous from
the first bucket to the last so that gaps show. Authored rules are global (per tier). The
size on disk is the data directory's files. Nothing is embedded and no vector is read.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from sidecar.memory.core import layout as C
from sidecar.memory.core.scope import sessions_of_namespace
from sidecar.memory.lifecycle.listing import record_ts
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Record

Bucket = Literal["day", "week", "month"]
# A timeline longer than this keeps its newest buckets; older records are counted in
# ``earlier`` (ten years of months, five of weeks, eight months of days).
MAX_BUCKETS = 260
_NAMESPACE_PREFIXES = (C.TURNS_PREFIX, C.USER_PREFIX, C.ELEVATED_USER_PREFIX, C.DREAM_PREFIX)


@dataclass(frozen=True, slots=True)
class TimelineRow:
    label: str  # 2026-11 (month), 2026-W48 (ISO week), 2026-11-25 (day)
    start_ms: int
    records: int


@dataclass(slots=True)
class NamespaceStats:
    namespace: str
    durable: int = 0
    superseded: int = 0
    history: int = 0
    summary: int = 0
    elevated: int = 0
    dream: int = 0
    sessions: int = 0
    summary_levels: dict[int, int] = field(default_factory=dict)
    first_ts: int | None = None
    last_ts: int | None = None
    timeline: list[TimelineRow] = field(default_factory=list)
    earlier: int = 0

    @property
    def depth(self) -> int:
        return max(self.summary_levels, default=0)

    @property
    def records(self) -> int:
        return (
            self.durable
            + self.superseded
            + self.history
            + self.summary
            + self.elevated
            + (self.dream)
        )


@dataclass(frozen=True, slots=True)
class AuthoredStats:
    documents: int
    hard: int
    soft: int
    variant: int


@dataclass(frozen=True, slots=True)
class DiskUsage:
    database: int
    wal: int
    indexes: int

    @property
    def total(self) -> int:
        return self.database + self.wal + self.indexes


@dataclass(frozen=True, slots=True)
class MemoryStats:
    namespaces: list[NamespaceStats]
    authored: AuthoredStats
    records: int  # every record of the store, all collections
    collections: int
    disk: DiskUsage
    bucket: Bucket


def stats_namespaces(store: StoreBackend) -> list[str]:
    """Every namespace with a scope of its own (history, durable, elevated, dream)."""
    found = {
        info.name[len(prefix) :]
        for prefix in _NAMESPACE_PREFIXES
        for info in store.collections(prefix=prefix)
    }
    return sorted(found)


def bucket_start(ts_ms: int, bucket: Bucket) -> dt.datetime:
    day = dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.UTC).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    if bucket == "day":
        return day
    if bucket == "week":
        return day - dt.timedelta(days=day.weekday())
    return day.replace(day=1)


def _next_bucket(start: dt.datetime, bucket: Bucket) -> dt.datetime:
    if bucket == "day":
        return start + dt.timedelta(days=1)
    if bucket == "week":
        return start + dt.timedelta(days=7)
    return (start + dt.timedelta(days=32)).replace(day=1)


def bucket_label(start: dt.datetime, bucket: Bucket) -> str:
    if bucket == "day":
        return start.strftime("%Y-%m-%d")
    if bucket == "week":
        year, week, _ = start.isocalendar()
        return f"{year}-W{week:02d}"
    return start.strftime("%Y-%m")


def timeline(stamps: Iterable[int], bucket: Bucket) -> tuple[list[TimelineRow], int]:
    """(contiguous rows from the first bucket to the last, records before the rows kept)."""
    counts = Counter(bucket_start(ts, bucket) for ts in stamps)
    if not counts:
        return [], 0
    rows: list[TimelineRow] = []
    at, last = min(counts), max(counts)
    while at <= last:
        rows.append(
            TimelineRow(bucket_label(at, bucket), int(at.timestamp() * 1000), counts.get(at, 0))
        )
        at = _next_bucket(at, bucket)
    kept = rows[-MAX_BUCKETS:]
    return kept, sum(r.records for r in rows[: len(rows) - len(kept)])


def _records(store: StoreBackend, name: str) -> list[Record]:
    if store.collection(name) is None:
        return []
    return list(store.iter_records(name, include_vectors=False))


def namespace_stats(store: StoreBackend, namespace: str, bucket: Bucket) -> NamespaceStats:
    out = NamespaceStats(namespace)
    stamps: list[int] = []
    for rec in _records(store, C.user(namespace)):
        if rec.metadata.get(C.SUPERSEDED_BY):
            out.superseded += 1
        else:
            out.durable += 1
        stamps.append(record_ts(rec))
    history = _records(store, C.turns(namespace))
    out.history = len(history)
    stamps += [record_ts(r) for r in history]
    dream = _records(store, C.dream(namespace))
    out.dream = len(dream)
    stamps += [record_ts(r) for r in dream]
    elevated = _records(store, C.elevated_user(namespace))
    levels: Counter[int] = Counter()
    for sid in sorted(sessions_of_namespace(store, namespace)):
        summaries = _records(store, C.session_summary(sid))
        if summaries or store.count(C.session_raw(sid)):
            out.sessions += 1
        for rec in summaries:
            level = rec.metadata.get("level")
            levels[level if isinstance(level, int) and level > 0 else 1] += 1
            stamps.append(record_ts(rec))
        out.summary += len(summaries)
        elevated += _records(store, C.elevated_session(sid))
    out.elevated = len(elevated)
    stamps += [record_ts(r) for r in elevated]
    out.summary_levels = dict(sorted(levels.items()))
    if stamps:
        out.first_ts, out.last_ts = min(stamps), max(stamps)
    out.timeline, out.earlier = timeline(stamps, bucket)
    return out


def authored_stats(store: StoreBackend) -> AuthoredStats:
    docs: set[str] = set()
    tiers: dict[str, int] = {}
    for tier, name in C.AUTHORED_TIERS.items():
        records = _records(store, name)
        tiers[tier] = len(records)
        docs.update(str(r.metadata.get("source_doc", "")) for r in records)
    docs.discard("")
    return AuthoredStats(len(docs), tiers["hard"], tiers["soft"], tiers["variant"])


def disk_usage(store: StoreBackend) -> DiskUsage:
    """Space the store takes (``wal``: SQLite's log; 0 on PostgreSQL, whose WAL is the
    server's)."""
    used = store.storage_bytes()
    return DiskUsage(used.database, used.log, used.indexes)


def _collect(store: StoreBackend, namespaces: list[str] | None, bucket: Bucket) -> MemoryStats:
    names = stats_namespaces(store) if namespaces is None else namespaces
    infos = store.collections()
    return MemoryStats(
        namespaces=[namespace_stats(store, ns, bucket) for ns in names],
        authored=authored_stats(store),
        records=sum(store.count(i.name) for i in infos),
        collections=len(infos),
        disk=disk_usage(store),
        bucket=bucket,
    )


async def memory_stats(
    store: AsyncStore, namespaces: list[str] | None = None, bucket: Bucket = "month"
) -> MemoryStats:
    """Statistics of the given namespaces (every namespace when None)."""
    return await store.call(_collect, store.store, namespaces, bucket)
