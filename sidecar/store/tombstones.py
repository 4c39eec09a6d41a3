"""Tombstones: the keys of forgotten records, per namespace, that keep an import or a
re-ingest from bringing them back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from sidecar.store import reads as _reads
from sidecar.store.rows import chunks
from sidecar.store.writer import Tx

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


def add_tombstones(
    store: SqliteState, namespace: str, keys: Iterable[str], reason: str = ""
) -> int:
    items = [str(k) for k in keys]

    def job(tx: Tx) -> int:
        tx.conn.executemany(
            "INSERT OR REPLACE INTO tombstones (namespace, key, reason, created_ms) "
            "VALUES (?, ?, ?, ?)",
            [(namespace, k, reason, tx.now_ms) for k in items],
        )
        return len(items)

    return store._result(store._submit(job))  # type: ignore[no-any-return]


def remove_tombstones(store: SqliteState, namespace: str, keys: Iterable[str] | None = None) -> int:
    items = None if keys is None else [str(k) for k in keys]

    def job(tx: Tx) -> int:
        if items is None:
            return tx.conn.execute(
                "DELETE FROM tombstones WHERE namespace = ?", (namespace,)
            ).rowcount
        n = 0
        for k in items:
            n += tx.conn.execute(
                "DELETE FROM tombstones WHERE namespace = ? AND key = ?", (namespace, k)
            ).rowcount
        return n

    return store._result(store._submit(job))  # type: ignore[no-any-return]


def tombstoned(store: SqliteState, namespace: str, keys: Iterable[str]) -> set[str]:
    return _tombstoned(store, keys, "namespace = ? AND ", (namespace,))


def tombstoned_anywhere(store: SqliteState, keys: Iterable[str]) -> set[str]:
    """The keys among ``keys`` tombstoned under any namespace."""
    return _tombstoned(store, keys, "", ())


def _tombstoned(
    store: SqliteState, keys: Iterable[str], scope: str, scope_args: tuple[str, ...]
) -> set[str]:
    """The keys among ``keys`` with a tombstone ``scope`` (a SQL condition) matches."""
    items = list(dict.fromkeys(str(k) for k in keys))
    out: set[str] = set()
    for part in chunks(items):
        marks = ",".join("?" * len(part))
        sql = f"SELECT key FROM tombstones WHERE {scope}key IN ({marks})"
        out.update(r[0] for r in _reads._read(store, sql, (*scope_args, *part)))
    return out


def list_tombstones(
    store: SqliteState, namespace: str | None = None
) -> list[tuple[str, str, str, int]]:
    """(namespace, key, reason, created_ms) sorted by namespace, key."""
    if namespace is None:
        return _reads._read(
            store, "SELECT namespace, key, reason, created_ms FROM tombstones ORDER BY 1, 2"
        )
    return _reads._read(
        store,
        "SELECT namespace, key, reason, created_ms FROM tombstones WHERE namespace = ? "
        "ORDER BY key",
        (namespace,),
    )
