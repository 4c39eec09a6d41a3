"""Which collections belong to a namespace: its own scopes and, optionally, its sessions.

Shared by ``forget`` (what to delete) and ``libravdb export --user`` (what to write). Plain
functions over a synchronous store backend (``StoreBackend``); the daemon runs them in the
store's read pool.
"""

from __future__ import annotations

from sidecar.memory.core import layout as C
from sidecar.store.interface import StoreBackend


def sessions_of_namespace(store: StoreBackend, namespace: str) -> list[str]:
    """Sessions of the namespace: ``<sid>`` of a default ``session:<sid>`` namespace, the
    sessions named in ``turns:<ns>``, and those whose state records the namespace (v2
    ingest state, or the v1 session state's ``userId``)."""
    found: dict[str, None] = {}
    if namespace.startswith(C.SESSION_PREFIX):
        found[namespace[len(C.SESSION_PREFIX) :]] = None
    if store.collection(C.turns(namespace)) is not None:
        for rec in store.list_records(C.turns(namespace)):
            sid = rec.metadata.get("sessionId")
            if isinstance(sid, str) and sid:
                found[sid] = None
    for info in store.collections(prefix=C.SESSION_STATE_PREFIX):
        states = store.get_many(info.name, [C.INGEST_STATE_ID, C.SESSION_STATE_ID])
        if any(
            s.metadata.get("namespace" if s.id == C.INGEST_STATE_ID else "userId") == namespace
            for s in states
        ):
            sid = C.session_id_of(info.name)
            if sid:
                found[sid] = None
    return list(found)


def namespace_collections(
    store: StoreBackend, namespace: str, *, include_sessions: bool
) -> tuple[list[str], list[str]]:
    """(existing collections of the namespace, its sessions).

    Exact names only: the namespace ``team`` never reaches ``turns:team:alice``, which
    belongs to the namespace ``team:alice``.
    """
    sessions = sessions_of_namespace(store, namespace) if include_sessions else []
    wanted = set(C.namespace_collections(namespace))
    for sid in sessions:
        wanted.update(C.session_collections(sid))
    return [info.name for info in store.collections() if info.name in wanted], sessions


def known_namespaces(store: StoreBackend) -> list[str]:
    """Namespaces that have a raw history or durable memories, sorted."""
    found: set[str] = set()
    for prefix in (C.TURNS_PREFIX, C.USER_PREFIX):
        for info in store.collections(prefix=prefix):
            found.add(info.name[len(prefix) :])
    return sorted(found)
