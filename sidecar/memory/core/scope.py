"""Who owns a session, and which collections belong to a namespace: its own scopes and,
optionally, its sessions.

Shared by every request that names a session (``session_owner``: ingest, assemble,
search, memory.*, v1 ``insert_session_turn``), ``forget`` (what to delete) and ``libravdb
export --user`` (what to write). Plain functions over a synchronous store backend
(``StoreBackend``); the daemon runs them in the store's read pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.memory.core import layout as C
from sidecar.store.interface import StoreBackend
from sidecar.store.names import InvalidName
from sidecar.store.types import Record


def _named(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _earliest_turn(store: StoreBackend, session_id: str) -> Record | None:
    """The session's first stored turn (raw history, else the v1 active view)."""
    for coll in (C.session_raw(session_id), C.session(session_id)):
        first = store.changed_since(coll, 0, include_vectors=False, limit=1)
        if first:
            return first[0]
    return None


def session_owner(store: StoreBackend, session_id: str) -> str | None:
    """The namespace a session belongs to, from what is stored (its first writer's):

    1. the namespace its first v2 ``ingest`` recorded (``__ingest_state__``);
    2. else the ``userId`` its first v1 ``insert_session_turn`` recorded
       (``__session_state__``);
    3. else the ``userId`` of its earliest stored turn: v1 sessions that an older daemon
       stored have a state without it, their turns carry it (read only in that case, so
       no migration is needed);
    4. else, when v1 stored anything for it (a state or a turn without a user), its
       default namespace ``session:<sid>``: a session nobody named belongs to the
       requests that name none, never to the first one that names somebody;
    5. else None: nothing is stored, the first writer claims it.

    Only these two state records count: a commit marker alone claims nothing.
    """
    states = {
        r.id: r
        for r in store.get_many(
            C.session_state(session_id), [C.INGEST_STATE_ID, C.SESSION_STATE_ID]
        )
    }
    ingest, v1 = states.get(C.INGEST_STATE_ID), states.get(C.SESSION_STATE_ID)
    owner = _named(ingest.metadata, "namespace") if ingest is not None else None
    if owner is None and v1 is not None:
        owner = _named(v1.metadata, "userId")
    if owner is not None:
        return owner
    turn = _earliest_turn(store, session_id)
    if turn is not None:
        owner = _named(turn.metadata, "userId")
    if owner is None and (v1 is not None or turn is not None):
        owner = C.default_namespace(session_id)
    return owner


def sessions_of_namespace(store: StoreBackend, namespace: str) -> list[str]:
    """The sessions :func:`session_owner` gives to the namespace (found through the
    sessions' states), and the sessions nobody owns yet that it names: ``<sid>`` of a
    default ``session:<sid>`` namespace and the sessions of ``turns:<ns>`` records. A
    namespace spelled like another session's default (``session:<sid>`` for a session
    alice owns) never reaches that session."""
    owners: dict[str, str | None] = {}
    for info in store.collections(prefix=C.SESSION_STATE_PREFIX):
        sid = C.session_id_of(info.name)
        if sid and _is_session_id(sid):
            owners[sid] = session_owner(store, sid)
    named: dict[str, None] = {}
    if namespace.startswith(C.SESSION_PREFIX):
        named[namespace[len(C.SESSION_PREFIX) :]] = None
    # the sessions of turns:<ns>, from the store's session keys (an index read, not every
    # turn); a v1 record's metadata can name anything, a session id no collection can have
    for sid in store.session_keys(C.turns(namespace)):
        if _is_session_id(sid):
            named[sid] = None
    found = {sid: None for sid, owner in owners.items() if owner == namespace}
    for sid in named:
        if sid not in owners:
            owners[sid] = session_owner(store, sid)
        if owners[sid] in (None, namespace):
            found[sid] = None
    return list(found)


def _is_session_id(sid: str) -> bool:
    try:
        C.session_state(sid)
    except InvalidName:
        return False
    return True


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
