"""Forget a namespace: delete every record of it and leave tombstones.

``forget_namespace(svc, ns, include_sessions)`` removes, in one store transaction, the
collections that belong to the namespace (exact collection names; the namespace
``team`` never reaches ``turns:team:alice``, which belongs to ``team:alice``):

* ``turns:<ns>`` (raw history index), ``user:<ns>`` (durable memories),
  ``elevated:user:<ns>`` (guidance shards), ``dream:<ns>`` (promoted dream entries);
* with ``include_sessions``, every session of the namespace (sessions found in
  ``turns:<ns>``, sessions whose ingest state names the namespace, and ``<sid>`` when
  the namespace is the default ``session:<sid>``): ``session:``, ``session_raw:``,
  ``session_summary:``, ``session_edge:``, ``session_state:``, ``session_recall:``,
  ``elevated:session:``.

Before deleting, a tombstone is stored for every record under the namespace
(``store.add_tombstones(ns, [collections.tombstone_key(collection, id)])``). Ingest
skips tombstoned raw turns; dream promotion, markdown re-ingest and import should call
:func:`tombstoned_ids` (or ``store.tombstoned``) before writing a record of the namespace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sidecar.memory.core import layout as C
from sidecar.memory.core import scope
from sidecar.memory.core.errors import MemoryInputError
from sidecar.store.aio import AsyncStore
from sidecar.store.types import DropCollection

if TYPE_CHECKING:
    from sidecar.memory.service import MemoryService


@dataclass(slots=True)
class ForgetOutcome:
    deleted: int = 0
    collections: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    tombstones: int = 0


async def tombstoned_ids(
    store: AsyncStore, namespace: str, collection: str, ids: Iterable[str]
) -> set[str]:
    """The ids among ``ids`` that ``forget`` deleted from ``collection`` of ``namespace``."""
    wanted = list(ids)
    dead = await store.tombstoned(namespace, C.tombstone_keys(collection, wanted))
    return {i for i in wanted if C.tombstone_key(collection, i) in dead}


async def sessions_of_namespace(store: AsyncStore, namespace: str) -> list[str]:
    return await store.call(scope.sessions_of_namespace, store.store, namespace)


async def forget_namespace(
    svc: MemoryService, namespace: str, *, include_sessions: bool = False, dry_run: bool = False
) -> ForgetOutcome:
    """Forget the whole namespace (module doc); ``dry_run`` counts what would go."""
    if not isinstance(namespace, str) or not namespace.strip():
        raise MemoryInputError("namespace or userId is required")
    store = svc.store
    known = sorted(await sessions_of_namespace(store, namespace))
    # Hold the sessions' compaction and ingest locks, then the namespace's (in one global
    # order: no deadlock, also between daemons on one database), so a background compaction,
    # an ingest or a memory.update in flight, here or in another daemon, cannot write
    # shards, summaries, turns or facts into the collections after they are dropped.
    async with contextlib.AsyncExitStack() as held:
        for sid in known:
            await held.enter_async_context(svc.compaction_lock(sid))
        for sid in known:
            await held.enter_async_context(svc.ingest_lock(sid))
        await held.enter_async_context(svc.namespace_lock(namespace))
        return await _forget_locked(svc, namespace, known if include_sessions else [], dry_run)


async def _forget_locked(
    svc: MemoryService, namespace: str, sessions: list[str], dry_run: bool
) -> ForgetOutcome:
    store = svc.store
    scopes = [C.turns(namespace), C.user(namespace), C.elevated_user(namespace), C.dream(namespace)]
    exact: set[str] = set()
    for sid in sessions:
        exact.update(C.session_collections(sid))
    # Exact names only: "team" must never reach "turns:team:alice" (the namespace
    # "team:alice"), so no prefix matching here.
    exact.update(scopes)
    doomed = [info.name for info in store.collections() if info.name in exact]
    out = ForgetOutcome(collections=doomed, sessions=sessions)
    keys: list[str] = []
    for name in doomed:
        records = await store.list_records(name)
        out.deleted += len(records)
        keys.extend(C.tombstone_keys(name, [r.id for r in records]))
        if name.startswith(C.DREAM_PREFIX):  # dream ids are positional: block the content
            keys.extend(C.tombstone_key(name, C.content_tombstone_id(r.text)) for r in records)
    if dry_run:
        return out
    if keys:
        out.tombstones = await store.add_tombstones(namespace, keys, C.TOMBSTONE_REASON_FORGET)
    if doomed:
        await store.write([DropCollection(n) for n in doomed])
    svc.forget_sessions(sessions)
    from sidecar.memory.service import InvalidationEvent

    svc.publish(InvalidationEvent("forget", namespace=namespace))
    for sid in sessions:
        epoch = svc.barrier.advance(sid)
        svc.publish(InvalidationEvent("forget", session_id=sid, namespace=namespace, epoch=epoch))
    return out


def resurrection_guard(
    tombstones: Iterable[tuple[str, str, str, int]],
) -> Callable[[str, str, dict[str, Any]], bool]:
    """A predicate for imports: true for a record that ``forget`` (or a document delete)
    tombstoned, so an NDJSON import cannot bring it back.

    ``tombstones`` are the store's rows ``(namespace, key, reason, created_ms)``. Record
    keys are ``tombstone_key(collection, id)``; whole documents are tombstoned as
    ``authored:<sourceDoc>`` (authored) or ``tombstone_key("dream:<ns>", <sourceDoc>)``.
    """
    dead: set[tuple[str, str]] = set()
    dead_authored_docs: set[str] = set()
    for _ns, key, _reason, _ms in tombstones:
        parsed = C.parse_tombstone_key(key)
        if parsed is not None:
            dead.add(parsed)
        elif key.startswith("authored:"):
            dead_authored_docs.add(key[len("authored:") :])

    def skip(collection: str, record_id: str, metadata: dict[str, Any]) -> bool:
        if (collection, record_id) in dead:
            return True
        doc = metadata.get("source_doc")
        if not isinstance(doc, str):
            return False
        if (collection, doc) in dead:
            return True
        return collection in C.AUTHORED_COLLECTIONS and doc in dead_authored_docs

    return skip
