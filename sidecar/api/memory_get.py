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
from sidecar.memory.core import layout as C
from sidecar.memory.ingest.sessions import named_namespace, request_namespace, session_namespace
from sidecar.store.aio import AsyncStore

# Per-session collections a search reads (not the state, edges or v1 active view).
_SESSION_PREFIXES = (C.SESSION_SUMMARY_PREFIX, C.SESSION_RAW_PREFIX, C.ELEVATED_SESSION_PREFIX)


async def _readable(store: AsyncStore, ns: str, collection: str) -> bool:
    if collection in (*C.namespace_collections(ns), C.GLOBAL, *C.AUTHORED_COLLECTIONS):
        return True
    sid = C.session_id_of(collection) if collection.startswith(_SESSION_PREFIXES) else None
    return sid is not None and await session_namespace(store, sid, None, None) == ns


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
    allowed = await _readable(svc.store, ns, params.collection)
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
