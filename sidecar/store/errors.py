"""Errors raised by the store.

Every error the store raises on purpose is a :class:`StoreError`. The API layer maps the
subclasses to JSON-RPC error codes (``code`` attribute is a stable machine-readable name,
``data`` carries structured detail). Nothing is written when one of these is raised by a
write: every write is a transaction that is rolled back on error.
"""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Base class of every error raised by :mod:`sidecar.store`."""

    code = "store_error"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, Any] = data

    def __str__(self) -> str:
        return self.message


class InvalidInput(StoreError):
    """Bad collection name, id, metadata, vector or argument. Nothing was written."""

    code = "invalid_input"


class NotFound(StoreError):
    """The record (or collection) does not exist."""

    code = "not_found"


class VersionConflict(StoreError):
    """A compare-and-swap (``if_version``) did not match the stored version."""

    code = "version_conflict"

    def __init__(self, collection: str, record_id: str, expected: int, actual: int | None) -> None:
        found = "absent" if actual is None else f"at version {actual}"
        super().__init__(
            f"version conflict on {collection}/{record_id}: expected version {expected}, "
            f"record is {found}",
            collection=collection,
            id=record_id,
            expected=expected,
            actual=actual,
        )


class FingerprintMismatch(StoreError):
    """The store was written by a different embedding model than the current one."""

    code = "fingerprint_mismatch"

    def __init__(self, data_dir: str, stored: str, current: str) -> None:
        super().__init__(
            f"embedding profile mismatch: store fingerprint {stored} does not match current "
            f"fingerprint {current}. The vectors in {data_dir} were made by another embedding "
            f"model; run `libravdb reembed` to re-embed every record with the current model "
            f"(or start the daemon with the model that wrote the store).",
            data_dir=data_dir,
            stored=stored,
            current=current,
            command="libravdb reembed",
        )


class StoreLocked(StoreError):
    """Another process holds the data directory's lock."""

    code = "store_locked"

    def __init__(self, data_dir: str, holder_pid: int | None) -> None:
        who = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(
            f"data directory {data_dir} is in use by {who} (lock file {data_dir}/LOCK); "
            f"only one daemon may serve a data directory",
            data_dir=data_dir,
            pid=holder_pid,
        )


class StorageUnavailable(StoreError):
    """The disk refused the write (read-only, full, I/O error). The store is unchanged."""

    code = "storage_unavailable"


class StoreClosed(StoreError):
    """The store was closed."""

    code = "store_closed"


class SchemaTooNew(StoreError):
    """The database was written by a newer version of the daemon."""

    code = "schema_too_new"
