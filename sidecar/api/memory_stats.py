"""v2 ``memory.stats``: counts of what the memory holds, per namespace.

The logic lives in ``sidecar.memory.lifecycle.stats``; this handler picks the namespaces
(the one named by ``namespace`` or ``userId``, else all) and shapes the result.
"""

from __future__ import annotations

from protocol.memory_stats import (
    AuthoredStats,
    DiskStats,
    MemoryStatsParams,
    MemoryStatsResult,
    NamespaceStats,
    SummaryLevel,
    TimelineBucket,
)
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.sessions import memory_service
from sidecar.memory.core import layout as C
from sidecar.memory.ingest.sessions import named_namespace
from sidecar.memory.lifecycle import stats

methods = MethodTable()


def _namespace_out(ns: stats.NamespaceStats) -> NamespaceStats:
    return NamespaceStats(
        namespace=ns.namespace,
        records=ns.records,
        durable=ns.durable,
        superseded=ns.superseded,
        history=ns.history,
        summary=ns.summary,
        elevated=ns.elevated,
        dream=ns.dream,
        sessions=ns.sessions,
        depth=ns.depth,
        summary_levels=[SummaryLevel(level=k, count=v) for k, v in ns.summary_levels.items()],
        first_ts=ns.first_ts,
        last_ts=ns.last_ts,
        timeline=[
            TimelineBucket(label=r.label, start_ms=r.start_ms, records=r.records)
            for r in ns.timeline
        ],
        earlier=ns.earlier,
        out_of_range=ns.out_of_range,
    )


@methods.method("memory.stats")
async def memory_stats(ctx: CallContext, params: MemoryStatsParams) -> MemoryStatsResult:
    named = named_namespace(params.namespace, params.user_id)
    if named is not None:
        C.user(named)  # refuses a name no collection could have, like every memory.* call
    svc = memory_service(ctx)
    out = await stats.memory_stats(
        svc.store, None if named is None else [named], bucket=params.bucket
    )
    return MemoryStatsResult(
        namespaces=[_namespace_out(ns) for ns in out.namespaces],
        authored=AuthoredStats(
            documents=out.authored.documents,
            hard=out.authored.hard,
            soft=out.authored.soft,
            variant=out.authored.variant,
        ),
        records=out.records,
        collections=out.collections,
        disk=DiskStats(
            database_bytes=out.disk.database,
            wal_bytes=out.disk.wal,
            index_bytes=out.disk.indexes,
            total_bytes=out.disk.total,
        ),
        bucket=out.bucket,
    )


register = methods.register
