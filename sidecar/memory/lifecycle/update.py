"""``memory.update``: correct a durable fact, keeping the old text as superseded history.

The durable record keeps its id and gets the new text, a new vector, ``ts`` = now,
``revision`` + 1 and ``provenance_class: "user_update"``; its ``source_turn_id`` becomes
``corrects_turn_id``, since it no longer copies the turn (retrieval dedupes records that
stand for one turn, and would otherwise drop the correction or the original). The text it
had is written beside it in ``user:<ns>`` as ``<id>~v<revision>`` with ``superseded_by: <id>`` and
``superseded_at``; the raw turn it came from (``turns:<ns>``, ``session_raw:<sid>``)
keeps its text (history is lossless) and is marked ``superseded_by`` too. Ranking
multiplies a superseded record's score by ``superseded_factor`` (scoring), so the
correction outranks what it replaced while both stay listable and searchable.

Correcting a turn of ``turns:<ns>`` that was never admitted to durable memory creates its
durable copy (same id, ``<sid>:<turnId>``) with the new text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError, MemoryNotFound
from sidecar.memory.ingest.changes import superseded_marks
from sidecar.store.types import Op, Put, Record

if TYPE_CHECKING:
    from sidecar.memory.service import MemoryService

MAX_FACT_CHARS = 20_000
PROVENANCE_USER_UPDATE = "user_update"


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    record: Record
    previous: Record | None


def version_id(record_id: str, revision: int) -> str:
    return f"{record_id}~v{revision}"


def _revision(meta: dict[str, Any]) -> int:
    rev = meta.get("revision")
    return rev if isinstance(rev, int) and not isinstance(rev, bool) and rev > 0 else 1


async def update_fact(
    svc: MemoryService, namespace: str, collection: str, record_id: str, text: str
) -> UpdateOutcome:
    if not text.strip():
        raise MemoryInputError("text must not be blank")
    if len(text) > MAX_FACT_CHARS:
        raise MemoryInputError(f"text is longer than {MAX_FACT_CHARS} characters")
    durable, history = C.user(namespace), C.turns(namespace)
    if collection not in (durable, history):
        raise MemoryInputError(
            f"memory.update corrects durable facts ({durable}) or turns of {history}, "
            f"not records of {collection}"
        )
    # Read and written under the namespace lock: two updates of one fact keep both old
    # texts, and a forget (here or in another daemon) never sees its fact written back.
    async with svc.namespace_lock(namespace):
        return await _update_locked(svc, namespace, collection, record_id, text)


async def _update_locked(
    svc: MemoryService, namespace: str, collection: str, record_id: str, text: str
) -> UpdateOutcome:
    durable = C.user(namespace)
    store = svc.store
    source = await store.get(collection, record_id)
    if source is None:
        raise MemoryNotFound(f"no record {record_id!r} in {collection!r} for this namespace")
    if source.metadata.get(C.SUPERSEDED_BY):
        raise MemoryInputError(
            f"{record_id!r} is a superseded version; update {source.metadata[C.SUPERSEDED_BY]!r}"
        )
    current = await store.get(durable, record_id, include_vector=True)
    now = int(time.time() * 1000)
    vec = (await svc.embed([text], "document"))[0]
    base = dict((current or source).metadata)
    rev = _revision(base)
    meta = {
        **base,
        "ts": now,
        "updated_at": now,
        "revision": rev + (1 if current is not None else 0),
        "provenance_class": PROVENANCE_USER_UPDATE,
        "raw_history": False,
    }
    meta.pop(C.SUPERSEDED_BY, None)
    # No longer a copy of the turn: ranking must not fold it into the raw turn it corrects.
    turn = meta.pop("source_turn_id", None)
    if isinstance(turn, str):
        meta["corrects_turn_id"] = turn
    ops: list[Op] = [Put(durable, record_id, text, meta, vec)]
    previous: Put | None = None
    if current is not None:
        old_meta = {**current.metadata, C.SUPERSEDED_BY: record_id, C.SUPERSEDED_AT: now}
        previous = Put(durable, version_id(record_id, rev), current.text, old_meta, current.vector)
        ops.append(previous)
    # the raw copies keep their text and say that a correction replaced it
    sid = source.metadata.get("sessionId")
    ops += superseded_marks(namespace, record_id, sid, record_id, now, durable=False)
    await store.write(ops)
    _announce(svc, namespace, source)
    record = await store.get(durable, record_id)
    assert record is not None
    old = await store.get(durable, previous.id) if previous is not None else None
    return UpdateOutcome(record, old)


def _announce(svc: MemoryService, namespace: str, source: Record) -> None:
    from sidecar.memory.service import InvalidationEvent

    # Patched raw turns change in place: the caches reload the namespace's collections
    # and the session's.
    sid = source.metadata.get("sessionId")
    svc.publish(InvalidationEvent("update", namespace=namespace))
    if isinstance(sid, str) and sid:
        svc.publish(InvalidationEvent("update", session_id=sid, namespace=namespace))
