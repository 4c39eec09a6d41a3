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

    def __init__(
        self,
        data_dir: str,
        stored: str,
        current: str,
        *,
        stored_model: str = "",
        current_model: str = "",
        pending_target: str = "",
    ) -> None:
        pending = (
            f" (an unfinished `libravdb reembed` towards model {_fp(pending_target)} is "
            "also pending)"
            if pending_target and pending_target != current
            else ""
        )
        super().__init__(
            f"embedding model mismatch: the vectors in {data_dir} were made by "
            f"{_model(stored_model, stored)}, but the daemon is configured with "
            f"{_model(current_model, current)}{pending}. Run `libravdb reembed` to re-embed "
            "every record with the configured model, or configure the model that wrote the "
            "store.",
            data_dir=data_dir,
            stored=stored,
            current=current,
            stored_model=stored_model,
            current_model=current_model,
            command="libravdb reembed",
        )


class UnfinishedReembed(FingerprintMismatch):
    """A ``libravdb reembed`` to the configured model was interrupted before it switched."""

    code = "unfinished_reembed"

    def __init__(
        self,
        data_dir: str,
        model: str,
        target: str,
        *,
        done: int = 0,
        total: int = 0,
        legacy: bool = False,
    ) -> None:
        what = _model(model, target)
        if legacy:
            detail = (
                f"an earlier version's `libravdb reembed` towards {what} stopped half way and "
                f"left the vectors in {data_dir} mixed. Run `libravdb reembed` with that model "
                "configured to finish it"
            )
        else:
            detail = (
                f"`libravdb reembed` towards {what} was interrupted ({done} of {total} records "
                f"staged) and the store in {data_dir} still holds the previous model's vectors. "
                "Run `libravdb reembed` again to finish it (it resumes), or configure the "
                "previous model to keep serving the old vectors"
            )
        StoreError.__init__(
            self,
            f"unfinished re-embed: {detail}.",
            data_dir=data_dir,
            target=target,
            target_model=model,
            staged=done,
            total=total,
            command="libravdb reembed",
        )


def _fp(fingerprint: str) -> str:
    return fingerprint or "?"


def _model(name: str, fingerprint: str) -> str:
    return (
        f"{name} (fingerprint {_fp(fingerprint)})"
        if name
        else (f"the model with fingerprint {_fp(fingerprint)}")
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


class SessionLocked(StoreLocked):
    """A session lock (``Store.session_lock``) stayed taken for the whole timeout."""

    code = "store_locked"

    def __init__(self, key: str, timeout: float | None, where: str) -> None:
        StoreError.__init__(
            self,
            f"session lock {key!r} on {where} is held by another worker or daemon "
            f"(waited {timeout or 0:g} s); try again when it finishes",
            key=key,
            timeout=timeout,
        )


class CorruptStore(StoreError):
    """SQLite says the database file is not a database or is damaged."""

    code = "corrupt_store"

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"the store's database {path} is damaged ({detail}). Nothing was changed. "
            f"Restore the data directory from a backup (or `libravdb import` an export "
            f"into a new one), or move {path} aside to start with an empty store.",
            path=path,
            detail=detail,
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

    @classmethod
    def refuse(cls, found: int, supported: int) -> None:
        """Raise it when the database's schema ``found`` is newer than ``supported``."""
        if found > supported:
            raise cls(
                f"the database has schema version {found}, newer than this daemon supports "
                f"({supported}); upgrade the daemon",
                found=found,
                supported=supported,
            )
