"""v2 ``memory.list`` and ``memory.update``: see what the memory keeps, correct a fact.

The logic lives in ``sidecar.memory.lifecycle`` (``listing``, ``update``, behind
:class:`NamespaceMemory`, which resolves the namespace as for ``memory.get``); these
handlers decode and shape the results.
"""

from __future__ import annotations

from protocol.memory import (
    MemoryListParams,
    MemoryListResult,
    MemoryUpdateParams,
    MemoryUpdateResult,
)
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import memory_record_out
from sidecar.errors import InvalidInput
from sidecar.memory.lifecycle.listing import ListQuery
from sidecar.memory.lifecycle.namespace_memory import NamespaceMemory
from sidecar.memory.service import Address

methods = MethodTable()


@methods.method("memory.list")
async def memory_list(ctx: CallContext, params: MemoryListParams) -> MemoryListResult:
    page = await ctx.app.service(NamespaceMemory).listing(
        Address(params.namespace, params.user_id, params.session_id),
        lambda ns: ListQuery(
            namespace=ns,
            scope=params.scope,
            session_id=params.session_id.strip() if params.session_id else None,
            since=params.since,
            until=params.until,
            limit=params.limit,
            cursor=params.cursor or None,
            include_superseded=params.include_superseded,
        ),
    )
    return MemoryListResult(
        records=[memory_record_out(r) for r in page.items],
        total=page.total,
        next_cursor=page.next_cursor,
    )


@methods.method("memory.update")
async def memory_update(ctx: CallContext, params: MemoryUpdateParams) -> MemoryUpdateResult:
    if not params.collection.strip() or not params.id.strip():
        raise InvalidInput("collection and id are required")
    out = await ctx.app.service(NamespaceMemory).update(
        Address(params.namespace, params.user_id), params.collection, params.id, params.text
    )
    return MemoryUpdateResult(
        record=memory_record_out(out.record),
        previous=memory_record_out(out.previous) if out.previous is not None else None,
    )


register = methods.register
