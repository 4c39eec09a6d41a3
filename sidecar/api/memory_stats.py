"""v2 ``memory.stats``: counts of what the memory holds, per namespace.

The logic lives in ``sidecar.memory.lifecycle.stats``, behind :class:`NamespaceMemory`
(the namespace named by ``namespace`` or ``userId``, else all), whose result names the
protocol's fields (its ``depth``, ``records`` and ``totalBytes`` are properties).
"""

from __future__ import annotations

from protocol.memory_stats import MemoryStatsParams, MemoryStatsResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields
from sidecar.memory.lifecycle.namespace_memory import NamespaceMemory
from sidecar.memory.service import Address

methods = MethodTable()


@methods.method("memory.stats")
async def memory_stats(ctx: CallContext, params: MemoryStatsParams) -> MemoryStatsResult:
    out = await ctx.app.service(NamespaceMemory).stats(
        Address(params.namespace, params.user_id), params.bucket
    )
    return copy_fields(out, MemoryStatsResult)


register = methods.register
