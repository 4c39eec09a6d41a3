"""What forgetting one thing also takes, and what it must leave to others.

* **Versions are the record's own.** ``memory.update`` keeps the text a durable record had
  beside it as ``<id>~v<n>`` (``superseded_by: <id>``). Forgetting the record deletes
  every version: the old text of a corrected fact is the fact too.
* **A superseded statement is another fact.** Ingest marks an earlier statement
  ``superseded_by`` a later turn that says the fact changed ("I moved to Lisbon in May."
  by "I moved to Porto in June.", or the same change said again). Forgetting the later
  turn keeps the earlier one and clears the mark it left, so the earlier statement is
  listed and ranked as current again. (Forget used to take every record so marked as an
  old version of the turn, deleting the Lisbon fact with the Porto one.)

Marks are only made for turns that state a change (``changes.is_change``), so only such
turns are looked up for them: the lookup filters a namespace's history by metadata, too
slow to run for every turn of a large forget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sidecar.memory.core import layout as C
from sidecar.memory.ingest.changes import cleared_marks, is_change
from sidecar.store.aio import AsyncStore
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Delete, Patch, Record

_PAGE = 200


def version_prefix(record_id: str) -> str:
    """Ids of a record's versions start with this (``update.version_id``)."""
    return f"{record_id}~v"


def _versions_sync(backend: StoreBackend, collection: str, record_id: str) -> list[str]:
    # Versions sort right after the prefix: a keyed range read, not a metadata scan.
    prefix, out, after = version_prefix(record_id), [], version_prefix(record_id)
    while True:
        page = backend.list_records(collection, after_id=after, limit=_PAGE)
        mine = [r for r in page if r.id.startswith(prefix)]
        out += [
            r.id
            for r in mine
            if r.id[len(prefix) :].isdigit() and r.metadata.get(C.SUPERSEDED_BY) == record_id
        ]
        if len(mine) < _PAGE:
            return out
        after = page[-1].id


async def version_deletes(store: AsyncStore, targets: Iterable[tuple[str, str]]) -> list[Delete]:
    """Deletes of the ``memory.update`` versions of each (collection, record id)."""
    out: list[Delete] = []
    for coll, rid in dict.fromkeys(targets):
        if store.store.collection(coll) is None:
            continue
        ids = await store.call(_versions_sync, store.store, coll, rid)
        out += [Delete(coll, i) for i in ids]
    return out


async def marks_to_clear(
    store: AsyncStore,
    namespace: str,
    forgotten: Sequence[tuple[str, Record]],
    doomed: set[tuple[str, str]],
) -> list[Patch]:
    """Patches clearing the ``superseded_by`` marks that the forgotten (session, raw turn)
    pairs left on the namespace's other statements (marked with the turn's namespace index
    id ``<sid>:<turnId>``)."""
    history = C.turns(namespace)
    if store.store.collection(history) is None:
        return []
    out: list[Patch] = []
    for sid, raw in forgotten:
        if not is_change(raw.text):
            continue
        by = C.namespace_turn_id(sid, raw.id)
        for rec in await store.list_records(history, where={C.SUPERSEDED_BY: by}):
            if (history, rec.id) in doomed:
                continue
            patches = cleared_marks(namespace, rec.id, rec.metadata.get("sessionId"))
            out += [p for p in patches if (p.collection, p.id) not in doomed]
    return out
