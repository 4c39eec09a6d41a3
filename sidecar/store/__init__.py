"""Durable storage: SQLite source of truth with derived hnswlib/numpy vector indexes.

Public surface (see docs/store.md):

* :class:`Store` (sync; ``Store.open(data_dir, embed_dims=..., fingerprint=...)``) and
  :class:`AsyncStore` (asyncio façade);
* value types :class:`Record`, :class:`Hit`, :class:`CollectionInfo`, write operations
  :class:`Put`, :class:`Patch`, :class:`Delete`, :class:`DropCollection`;
* errors in :mod:`sidecar.store.errors`;
* naming rules :func:`dims_for_collection`, :func:`in_namespace`;
* :func:`sidecar.store.backend.reembed` for ``libravdb reembed`` (either backend).
"""

from sidecar.store.aio import AsyncStore
from sidecar.store.errors import (
    CorruptStore,
    FingerprintMismatch,
    InvalidInput,
    NotFound,
    SchemaTooNew,
    SessionLocked,
    StorageUnavailable,
    StoreClosed,
    StoreError,
    StoreLocked,
    UnfinishedReembed,
    VersionConflict,
)
from sidecar.store.names import dims_for_collection, in_namespace
from sidecar.store.store import Store
from sidecar.store.types import (
    CollectionInfo,
    CollectionState,
    Delete,
    DropCollection,
    ExportStats,
    Hit,
    ImportStats,
    IndexStatus,
    Op,
    OpResult,
    Patch,
    Put,
    Record,
    TimeHistogram,
    TimeKey,
    TimeQuery,
    TimeRange,
    TimeSpan,
)

__all__ = [
    "AsyncStore",
    "CollectionInfo",
    "CollectionState",
    "CorruptStore",
    "Delete",
    "DropCollection",
    "ExportStats",
    "FingerprintMismatch",
    "Hit",
    "ImportStats",
    "IndexStatus",
    "InvalidInput",
    "NotFound",
    "Op",
    "OpResult",
    "Patch",
    "Put",
    "Record",
    "SchemaTooNew",
    "SessionLocked",
    "StorageUnavailable",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "TimeHistogram",
    "TimeKey",
    "TimeQuery",
    "TimeRange",
    "TimeSpan",
    "UnfinishedReembed",
    "VersionConflict",
    "dims_for_collection",
    "in_namespace",
]
