"""v2 ``memory.get``: one record by collection and id, within the caller's namespace.

A host's ``memory_get`` tool reads what ``search`` found. The collection must be one that
a search in the same namespace reads, so a request cannot reach another namespace's
memory by naming its collection: the namespace comes from ``namespace``/``userId`` or from
the session, and a session collection is served only when that session belongs to it.
"""

from __future__ import annotations

from protocol.assemble import MemoryGetParams, MemoryGetResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.sessions import memory_service
from sidecar.api.wire import memory_record_out
from sidecar.errors import InvalidInput, NotFound
from sidecar.memory.core import ownership
from sidecar.memory.lifecycle.forget_items import readable_by
from sidecar.memory.service import MemoryService

methods = MethodTable()


async def reader_namespace(
    svc: MemoryService, namespace: str | None, user_id: str | None, session_id: str | None
) -> str:
    """The namespace a memory.* request works in: named, or its session's
    (:func:`sidecar.memory.core.ownership.reader_namespace`)."""
    sid = session_id.strip() if session_id else ""
    return await ownership.reader_namespace(svc.store, sid, namespace, user_id)


@methods.method("memory.get")
async def memory_get(ctx: CallContext, params: MemoryGetParams) -> MemoryGetResult:
    if not params.collection.strip() or not params.id.strip():
        raise InvalidInput("collection and id are required")
    svc = memory_service(ctx)
    ns = await reader_namespace(svc, params.namespace, params.user_id, params.session_id)
    allowed = await readable_by(svc.store, ns, params.collection)
    record = await svc.store.get(params.collection, params.id) if allowed else None
    if record is None:
        # The same answer for "not yours" and "absent": existence is not revealed.
        raise NotFound(f"no record {params.id!r} in {params.collection!r} for this namespace")
    return MemoryGetResult(record=memory_record_out(record))


register = methods.register
