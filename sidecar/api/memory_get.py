"""v2 ``memory.get``: one record by collection and id, within the caller's namespace.

A host's ``memory_get`` tool reads what ``search`` found. The collection must be one that
a search in the same namespace reads, so a request cannot reach another namespace's
memory by naming its collection: :class:`NamespaceMemory` resolves the namespace from
``namespace``/``userId`` or from the session, and serves a session collection only when
that session belongs to it.
"""

from __future__ import annotations

from protocol.assemble import MemoryGetParams, MemoryGetResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import memory_record_out
from sidecar.errors import InvalidInput
from sidecar.memory.lifecycle.namespace_memory import NamespaceMemory
from sidecar.memory.service import Address

methods = MethodTable()


@methods.method("memory.get")
async def memory_get(ctx: CallContext, params: MemoryGetParams) -> MemoryGetResult:
    if not params.collection.strip() or not params.id.strip():
        raise InvalidInput("collection and id are required")
    record = await ctx.app.service(NamespaceMemory).get(
        Address(params.namespace, params.user_id, params.session_id), params.collection, params.id
    )
    return MemoryGetResult(record=memory_record_out(record))


register = methods.register
