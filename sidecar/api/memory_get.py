"""v2 ``memory.get``: one record by collection and id, within the caller's namespace.

A host's ``memory_get`` tool reads what ``search`` found. The collection must be one that
a search in the same namespace reads, so a request cannot reach another namespace's
memory by naming its collection: the namespace comes from ``namespace``/``userId`` or from
the session, and a session collection is served only when that session belongs to it.
"""

from __future__ import annotations

from protocol.assemble import MemoryGetParams, MemoryGetResult, MemoryRecord
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.sessions import memory_service
from sidecar.assembly.cache import scope_of
from sidecar.errors import InvalidInput, NotFound
from sidecar.memory.ingest.sessions import named_namespace, request_namespace
from sidecar.memory.lifecycle.forget_items import readable_by

methods = MethodTable()


@methods.method("memory.get")
async def memory_get(ctx: CallContext, params: MemoryGetParams) -> MemoryGetResult:
    if not params.collection.strip() or not params.id.strip():
        raise InvalidInput("collection and id are required")
    svc = memory_service(ctx)
    named = named_namespace(params.namespace, params.user_id)
    sid = params.session_id.strip() if params.session_id else ""
    if named is None and not sid:
        raise InvalidInput("namespace, userId or sessionId is required")
    ns = await request_namespace(svc.store, sid, params.namespace, params.user_id)
    allowed = await readable_by(svc.store, ns, params.collection)
    record = await svc.store.get(params.collection, params.id) if allowed else None
    if record is None:
        # The same answer for "not yours" and "absent": existence is not revealed.
        raise NotFound(f"no record {params.id!r} in {params.collection!r} for this namespace")
    meta = record.metadata
    scope, kind = scope_of(record.collection)
    ts = meta.get("ts")
    return MemoryGetResult(
        record=MemoryRecord(
            collection=record.collection,
            id=record.id,
            text=record.text,
            kind=kind if kind else scope,
            role=str(meta.get("role") or ""),
            session_id=str(meta.get("sessionId") or ""),
            ts=int(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None,
            metadata=dict(meta),
        )
    )


register = methods.register
