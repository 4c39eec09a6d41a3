"""v1 storage methods of the reference daemon, wire-exact.

Names, camelCase params, defaults and result shapes follow the reference so the published
OpenClaw plugin works unchanged. Absent or ``null`` params take their zero value, as in the
reference (Go decodes into zero-valued structs).
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.base import MethodSchema, WireStruct


class OkResult(WireStruct):
    ok: bool = True


class InsertTextResult(WireStruct):
    """``{ok: true}`` as the reference answers; when the record was forgotten (a
    ``forget`` tombstoned it) nothing is stored and the reply says so with ``stored:
    false`` and ``reason: "forgotten"``: a host re-sending a forgotten copy gets no error,
    and a caller that meant to write it learns that it was not written."""

    ok: bool = True
    stored: bool | msgspec.UnsetType = msgspec.UNSET
    reason: str | msgspec.UnsetType = msgspec.UNSET


class SearchResult(WireStruct):
    """``{id, score, text, metadata, version}``; metadata echoes every stored key (with the
    duplicated ``text`` and ``access_count``); searches add ``metadata.collection``."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any]
    version: int


class ResultsResult(WireStruct):
    results: list[SearchResult]


class EnsureCollectionsParams(WireStruct):
    collections: list[str] | None = None


class InsertTextParams(WireStruct):
    collection: str = ""
    id: str = ""
    text: str = ""
    metadata: dict[str, Any] | None = None


class SearchTextParams(WireStruct):
    collection: str = ""
    text: str = ""
    k: int = 0
    exclude_ids: list[str] | None = None


class SearchTextCollectionsParams(WireStruct):
    collections: list[str] | None = None
    text: str = ""
    k: int = 0
    exclude_by_collection: dict[str, list[str]] | None = None


class ListCollectionParams(WireStruct):
    collection: str = ""


class ListByMetaParams(WireStruct):
    collection: str = ""
    key: str = ""
    value: str = ""


class DeleteParams(WireStruct):
    collection: str = ""
    id: str = ""


class DeleteBatchParams(WireStruct):
    collection: str = ""
    ids: list[str] | None = None


class AccessUpdate(WireStruct):
    collection: str = ""
    ids: list[str] | None = None


class BumpAccessCountsParams(WireStruct):
    updates: list[AccessUpdate] | None = None


class NamespaceParams(WireStruct):
    user_id: str = ""
    namespace: str = ""


class ExportedRecord(WireStruct):
    collection: str
    id: str
    text: str
    metadata: dict[str, Any]


class ExportMemoryResult(WireStruct):
    records: list[ExportedRecord] = msgspec.field(default_factory=list)


class FlushParams(WireStruct):
    """``flush`` ignores its params."""


METHODS: dict[str, MethodSchema] = {
    "ensure_collections": MethodSchema(
        EnsureCollectionsParams, OkResult, "v1: create collections (dims by name); idempotent"
    ),
    "insert_text": MethodSchema(
        InsertTextParams,
        InsertTextResult,
        "v1: embed a document and upsert it (version +1 on repeat); a forgotten record is "
        "not written back (stored: false)",
    ),
    "search_text": MethodSchema(
        SearchTextParams, ResultsResult, "v1: top-k cosine search of one collection"
    ),
    "search_text_collections": MethodSchema(
        SearchTextCollectionsParams,
        ResultsResult,
        "v1: search several collections, merged top-k (score, collection, id)",
    ),
    "list_collection": MethodSchema(
        ListCollectionParams, ResultsResult, "v1: every record of a collection (score 0)"
    ),
    "list_by_meta": MethodSchema(
        ListByMetaParams, ResultsResult, "v1: records whose metadata[key] equals the string value"
    ),
    "delete": MethodSchema(DeleteParams, OkResult, "v1: delete one record (idempotent)"),
    "delete_batch": MethodSchema(
        DeleteBatchParams, OkResult, "v1: delete records in one transaction (idempotent)"
    ),
    "bump_access_counts": MethodSchema(
        BumpAccessCountsParams, OkResult, "v1: access_count + 1 per id; missing ids are skipped"
    ),
    "export_memory": MethodSchema(
        NamespaceParams, ExportMemoryResult, "v1: records of a user's memory namespace"
    ),
    "flush_namespace": MethodSchema(
        NamespaceParams, OkResult, "v1: delete a user's memory namespace (exact match)"
    ),
    "flush": MethodSchema(FlushParams, OkResult, "v1: persist (checkpoint the indexes)"),
}
