"""v1 storage methods, served by the store.

Wire shapes follow the reference exactly; its bugs are fixed where the client cannot tell:
inserting an existing id upserts (version + 1) instead of failing, deletes are idempotent,
``bump_access_counts`` skips missing ids (and does not bump versions), namespaces are
matched exactly, and ``flush_namespace`` also removes the namespace's ``turns:``,
``elevated:user:`` and ``dream:`` collections. Errors keep the reference ``message`` and add
a ``code``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import structlog

from protocol.v1_store import (
    BumpAccessCountsParams,
    DeleteBatchParams,
    DeleteParams,
    EnsureCollectionsParams,
    ExportedRecord,
    ExportMemoryResult,
    FlushParams,
    InsertTextParams,
    InsertTextResult,
    ListByMetaParams,
    ListCollectionParams,
    NamespaceParams,
    OkResult,
    ResultsResult,
    SearchResult,
    SearchTextCollectionsParams,
    SearchTextParams,
)
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.errors import (
    InvalidInput,
    ModelUnavailable,
)
from sidecar.memory.core.layout import GLOBAL as C_GLOBAL
from sidecar.memory.core.layout import tombstone_key
from sidecar.store import errors as se
from sidecar.store import names as N
from sidecar.store.aio import AsyncStore
from sidecar.store.names import in_namespace, normalized
from sidecar.store.service import StoreService
from sidecar.store.timestamps import check_metadata_ts
from sidecar.store.types import Hit, Record

TIER_DIRTY = "_tier_dirty"


def _svc(ctx: CallContext) -> StoreService:
    return ctx.app.service(StoreService)


async def _embed(svc: StoreService, texts: Sequence[str], kind: str) -> np.ndarray[Any, Any]:
    try:
        vecs = await svc.embed(texts, kind)
    except se.StoreError as exc:  # no embedder behind the store: the model is missing
        raise ModelUnavailable(f"embed {kind}: {exc.message}") from exc
    return np.asarray(vecs, dtype=np.float32)


def _fit(vec: np.ndarray[Any, Any], dims: int) -> np.ndarray[Any, Any]:
    """A vector for a ``dims``-sized collection: a Matryoshka prefix when smaller."""
    if dims < vec.shape[0]:
        return normalized(np.ascontiguousarray(vec[:dims], dtype=np.float32))
    return vec


def _result(hit: Hit | Record, score: float, collection: str | None) -> SearchResult:
    meta = dict(hit.metadata)
    if collection is not None:
        meta["collection"] = collection
    return SearchResult(id=hit.id, score=score, text=hit.text, metadata=meta, version=hit.version)


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


def _sorted_records(collection: str, records: list[Record]) -> list[Record]:
    """Reference order: authored collections by (source_doc, position, ordinal, id)."""
    if collection.startswith("authored:"):
        return sorted(
            records,
            key=lambda r: (
                r.metadata.get("source_doc")
                if isinstance(r.metadata.get("source_doc"), str)
                else "",
                _num(r.metadata.get("position")),
                _num(r.metadata.get("ordinal")),
                r.id,
            ),
        )
    return records  # the store lists in id (byte) order


def namespace_prefix(user_id: str, namespace: str) -> str:
    """The reference's memory namespace P: ``user:<namespace|userId>``."""
    if namespace:
        return namespace if namespace.startswith("user:") else "user:" + namespace
    return "user:" + user_id


def _store(ctx: CallContext) -> AsyncStore:
    return _svc(ctx).store


# A collection named by a request is refused (-32009, by the dispatcher's mapping of the
# store's InvalidInput) when missing, empty or not a valid name, in every method alike (the
# reference answered reads of "" with []).
_collection = N.validate_collection


def _namespace(value: str, what: str) -> str:
    """A namespace or user id named by a request (blank stays blank: "not given")."""
    return N.validate_name_part(value, what) if value else value


def _clean_ids(ids: Iterable[str] | None) -> list[str]:
    return [i for i in dict.fromkeys(ids or ()) if i]


log = structlog.get_logger(__name__)
methods = MethodTable()


@methods.method("ensure_collections")
async def ensure_collections(ctx: CallContext, params: EnsureCollectionsParams) -> OkResult:
    await _store(ctx).ensure_collections(params.collections or [])
    return OkResult(ok=True)


# Shared memory is never tombstoned by a namespace's forget (forget_items); a tombstone
# there is an earlier version's, and must not swallow an explicit write for every client.
_NEVER_TOMBSTONED = (C_GLOBAL,)


@methods.method("insert_text")
async def insert_text(ctx: CallContext, params: InsertTextParams) -> InsertTextResult:
    if not params.id.strip():
        raise InvalidInput("record id is required")
    store = _store(ctx)
    meta: dict[str, Any] = dict(params.metadata or {})
    check_metadata_ts(meta)  # a numeric ts is the record's time: in range
    if params.text:
        meta["text"] = params.text
    meta.setdefault("access_count", 0)
    if params.collection not in _NEVER_TOMBSTONED and await store.tombstoned_anywhere(
        [tombstone_key(params.collection, params.id)]
    ):
        # a forgotten record is not written again (a host re-sending its copy of a
        # forgotten turn must not bring it back), and the reply says that nothing was stored
        log.info("v1.insert_forgotten", collection=params.collection)
        return InsertTextResult(ok=True, stored=False, reason="forgotten")
    dims = store.store.dims_for(params.collection) if params.collection else 0
    vector = None
    if dims > 1:
        vec = (await _embed(_svc(ctx), [params.text], "document"))[0]
        vector = _fit(vec, dims)
    await store.put(params.collection, params.id, text=params.text, metadata=meta, vector=vector)
    return InsertTextResult(ok=True)


async def _query(ctx: CallContext, collections: Sequence[str], text: str) -> Any:
    """The query vector, or None when no searched collection holds vectors."""
    store = _store(ctx).store
    infos = [store.collection(c) for c in collections]
    if not any(i is not None and i.has_vectors for i in infos):
        return None
    return (await _embed(_svc(ctx), [text], "query"))[0]


@methods.method("search_text")
async def search_text(ctx: CallContext, params: SearchTextParams) -> ResultsResult:
    store = _store(ctx)
    if store.store.collection(_collection(params.collection)) is None:
        return ResultsResult(results=[])
    query = await _query(ctx, [params.collection], params.text)
    hits = await store.search(
        params.collection, query, params.k, exclude_ids=_clean_ids(params.exclude_ids)
    )
    return ResultsResult(results=[_result(h, h.score, h.collection) for h in hits])


@methods.method("search_text_collections")
async def search_text_collections(
    ctx: CallContext, params: SearchTextCollectionsParams
) -> ResultsResult:
    names = [_collection(c) for c in dict.fromkeys(params.collections or [])]
    store = _store(ctx)
    existing = [c for c in names if store.store.collection(c) is not None]
    if params.k <= 0 or not existing:
        return ResultsResult(results=[])
    query = await _query(ctx, existing, params.text)
    excl = {c: _clean_ids(ids) for c, ids in (params.exclude_by_collection or {}).items()}
    hits = await store.search_collections(existing, query, params.k, exclude_by_collection=excl)
    return ResultsResult(results=[_result(h, h.score, h.collection) for h in hits])


@methods.method("list_collection")
async def list_collection(ctx: CallContext, params: ListCollectionParams) -> ResultsResult:
    store = _store(ctx)
    if store.store.collection(_collection(params.collection)) is None:
        return ResultsResult(results=[])
    recs = await store.list_records(params.collection)
    recs = _sorted_records(params.collection, recs)
    return ResultsResult(results=[_result(r, 0.0, None) for r in recs])


@methods.method("list_by_meta")
async def list_by_meta(ctx: CallContext, params: ListByMetaParams) -> ResultsResult:
    store = _store(ctx)
    if store.store.collection(_collection(params.collection)) is None or not params.key:
        return ResultsResult(results=[])
    recs = await store.list_records(params.collection, where={params.key: params.value})
    recs = _sorted_records(params.collection, recs)
    return ResultsResult(results=[_result(r, 0.0, None) for r in recs])


async def _delete(ctx: CallContext, collection: str, ids: list[str]) -> OkResult:
    """Delete ``ids`` of ``collection``; a missing collection or no id is a no-op."""
    store = _store(ctx)
    if store.store.collection(_collection(collection)) is None or not ids:
        return OkResult(ok=True)
    await store.delete_many(collection, ids)
    await store.scrub_after_forget()
    return OkResult(ok=True)


@methods.method("delete")
async def delete(ctx: CallContext, params: DeleteParams) -> OkResult:
    return await _delete(ctx, params.collection, [params.id] if params.id else [])


@methods.method("delete_batch")
async def delete_batch(ctx: CallContext, params: DeleteBatchParams) -> OkResult:
    return await _delete(ctx, params.collection, _clean_ids(params.ids))


@methods.method("bump_access_counts")
async def bump_access_counts(ctx: CallContext, params: BumpAccessCountsParams) -> OkResult:
    store = _store(ctx)
    updates: dict[str, list[str]] = {}
    for u in params.updates or []:
        if store.store.collection(_collection(u.collection)) is not None:
            updates.setdefault(u.collection, []).extend(_clean_ids(u.ids))
    if updates:
        await store.increment(updates, "access_count")
    return OkResult(ok=True)


@methods.method("export_memory")
async def export_memory(ctx: CallContext, params: NamespaceParams) -> ExportMemoryResult:
    store = _store(ctx)
    prefix = namespace_prefix(
        _namespace(params.user_id, "userId"), _namespace(params.namespace, "namespace")
    )
    out: list[ExportedRecord] = []
    for info in store.collections(namespace=prefix):
        if info.name == TIER_DIRTY:
            continue
        for r in await store.list_records(info.name):
            out.append(
                ExportedRecord(collection=info.name, id=r.id, text=r.text, metadata=r.metadata)
            )
    return ExportMemoryResult(records=out)


@methods.method("flush_namespace")
async def flush_namespace(ctx: CallContext, params: NamespaceParams) -> OkResult:
    prefix = namespace_prefix(
        _namespace(params.user_id, "userId"), _namespace(params.namespace, "namespace")
    )
    if prefix == "user:":
        raise InvalidInput("namespace or userId is required")
    ns = prefix.removeprefix("user:")
    scopes = (prefix, f"turns:{ns}", f"elevated:user:{ns}", f"dream:{ns}")
    store = _store(ctx)
    doomed = [c.name for c in store.collections() if any(in_namespace(c.name, s) for s in scopes)]
    if doomed:
        await store.drop_collections(doomed)
        await store.scrub_after_forget()
    return OkResult(ok=True)


@methods.method("flush")
async def flush(ctx: CallContext, params: FlushParams) -> OkResult:
    svc = ctx.app.maybe_service(StoreService)
    if svc is not None and svc.ready:
        await svc.store.checkpoint()
    return OkResult(ok=True)


register = methods.register
