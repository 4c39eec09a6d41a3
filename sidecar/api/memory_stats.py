"""v2 ``memory.stats``: counts of what the memory holds, per namespace.

The logic lives in ``sidecar.memory.lifecycle.stats``, behind :class:`NamespaceMemory`
(the namespace named by ``namespace`` or ``userId``, else all); this handler shapes the
result.
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
from sidecar.api.wire import copy_fields
from sidecar.memory.lifecycle import stats
from sidecar.memory.lifecycle.namespace_memory import NamespaceMemory
from sidecar.memory.service import Address

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
        timeline=[copy_fields(r, TimelineBucket) for r in ns.timeline],
        earlier=ns.earlier,
        out_of_range=ns.out_of_range,
    )


@methods.method("memory.stats")
async def memory_stats(ctx: CallContext, params: MemoryStatsParams) -> MemoryStatsResult:
    out = await ctx.app.service(NamespaceMemory).stats(
        Address(params.namespace, params.user_id), params.bucket
    )
    return MemoryStatsResult(
        namespaces=[_namespace_out(ns) for ns in out.namespaces],
        authored=copy_fields(out.authored, AuthoredStats),
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
