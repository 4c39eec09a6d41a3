"""``memory.stats``: what the memory holds, per namespace, counted from what is stored.

Counts follow ``memory.list``'s scopes: ``durable`` (``user:<ns>``, superseded versions
counted apart), ``history`` (``turns:<ns>``, both roles), ``summary`` (the summaries of the
namespace's sessions, by DAG level: 1 = summaries of turns, n = summaries of level n - 1),
``elevated`` (``elevated:user:<ns>`` and the sessions' guidance shards), ``dream``. The
timeline counts those records by their ``ts`` per calendar bucket (UTC), contiguous from
the first bucket to the last so that gaps show (``timeline.py``: at most 260 buckets, the
newest; records dated outside the accepted range are counted apart). Authored rules are
global (per tier). The size on disk is the data directory's files. Nothing is embedded and
no vector is read.

Counted by the store, not by reading records (docs/store.md "Listing by time"): the counts
per collection and the sessions' are one ``time_spans`` query, the durable facts not
superseded a ``count_by_time`` (index entries), the timeline a ``time_histogram`` (GROUP
BY day over the time index), the sessions from ``scope.sessions_of_namespace``.
Only the summaries are read (their DAG level is in their metadata).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from protocol.memory_stats import AuthoredStats, SummaryLevel
from sidecar.memory.core import layout as C
from sidecar.memory.core.scope import sessions_of_namespace
from sidecar.memory.lifecycle.timeline import (
    DAY_MS,
    MAX_BUCKETS,
    Bucket,
    TimelineRow,
    timeline,
    timeline_of_days,
)
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend
from sidecar.store.record_keys import MARK_SUPERSEDED
from sidecar.store.timestamps import TS_MAX_MS, TS_MIN_MS
from sidecar.store.types import Record, TimeQuery

__all__ = ["MAX_BUCKETS", "Bucket", "TimelineRow", "memory_stats", "timeline"]
_NAMESPACE_PREFIXES = (C.TURNS_PREFIX, C.USER_PREFIX, C.ELEVATED_USER_PREFIX, C.DREAM_PREFIX)


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
    summary_levels: list[SummaryLevel] = field(default_factory=list)  # by level, rising
    first_ts: int | None = None
    last_ts: int | None = None
    timeline: list[TimelineRow] = field(default_factory=list)
    earlier: int = 0
    out_of_range: int = 0  # records whose ts is outside the accepted range: not charted

    @property
    def depth(self) -> int:
        return max((lv.level for lv in self.summary_levels), default=0)

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
class DiskUsage:
    """Bytes on disk, named as ``memory.stats`` answers them (:class:`DiskStats`)."""

    database_bytes: int
    wal_bytes: int
    index_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.database_bytes + self.wal_bytes + self.index_bytes


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


def _records(store: StoreBackend, name: str) -> list[Record]:
    if store.collection(name) is None:
        return []
    return list(store.iter_records(name, include_vectors=False))


def _levels(store: StoreBackend, names: list[str]) -> list[SummaryLevel]:
    levels: Counter[int] = Counter()
    for name in names:
        for rec in store.iter_records(name, include_vectors=False):
            level = rec.metadata.get("level")
            levels[level if isinstance(level, int) and level > 0 else 1] += 1
    return [SummaryLevel(level=lv, count=n) for lv, n in sorted(levels.items())]


def namespace_stats(store: StoreBackend, namespace: str, bucket: Bucket) -> NamespaceStats:
    out = NamespaceStats(namespace)
    sessions = sorted(sessions_of_namespace(store, namespace))
    own = [C.user(namespace), C.turns(namespace), C.dream(namespace), C.elevated_user(namespace)]
    summaries = [C.session_summary(sid) for sid in sessions]
    shards = [C.elevated_session(sid) for sid in sessions]
    raws = [C.session_raw(sid) for sid in sessions]
    spans = store.time_spans([*own, *summaries, *shards, *raws])
    out.durable = store.count_by_time(TimeQuery((own[0],), exclude_marks=MARK_SUPERSEDED))
    out.superseded = spans[own[0]].count - out.durable
    out.history = spans[own[1]].count
    out.dream = spans[own[2]].count
    out.elevated = spans[own[3]].count + sum(spans[n].count for n in shards)
    out.summary = sum(spans[n].count for n in summaries)
    out.sessions = sum(
        1 for s, r in zip(summaries, raws, strict=True) if spans[s].count or spans[r].count
    )
    out.summary_levels = _levels(store, [n for n in summaries if spans[n].count])
    hist = store.time_histogram(
        [*own, *summaries, *shards], width_ms=DAY_MS, lo_ms=TS_MIN_MS, hi_ms=TS_MAX_MS
    )
    out.out_of_range = hist.outside
    out.first_ts, out.last_ts = hist.first_ms, hist.last_ms
    out.timeline, out.earlier = timeline_of_days(hist.buckets, bucket)
    return out


def authored_stats(store: StoreBackend) -> AuthoredStats:
    docs: set[str] = set()
    tiers: dict[str, int] = {}
    for tier, name in C.AUTHORED_TIERS.items():
        records = _records(store, name)
        tiers[tier] = len(records)
        docs.update(str(r.metadata.get("source_doc", "")) for r in records)
    docs.discard("")
    return AuthoredStats(
        documents=len(docs), hard=tiers["hard"], soft=tiers["soft"], variant=tiers["variant"]
    )


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
        records=store.total_records(),
        collections=len(infos),
        disk=disk_usage(store),
        bucket=bucket,
    )


async def memory_stats(
    store: AsyncStore, namespaces: list[str] | None = None, bucket: Bucket = "month"
) -> MemoryStats:
    """Statistics of the given namespaces (every namespace when None)."""
    return await store.call(_collect, store.store, namespaces, bucket)
