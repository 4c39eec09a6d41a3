"""Dream-diary promotion into ``dream:<namespace>``.

Entries (parsed by the host, or from raw diary text by
:func:`sidecar.memory.lifecycle.dream.parse_dream_diary`) are gated by
:func:`sidecar.memory.lifecycle.dream.gate_entries` (text >= 16 bytes, score >= 0.6, recall >= 2,
unique >= 2). In ONE store transaction the accepted entries (embedded in one batch call)
replace every earlier record of the same ``source_doc`` in the collection, **also when every
entry is rejected** (the reference kept stale entries then). Ids are
``<sourceDoc>#dream#%06d`` numbered over the accepted entries.

Stored metadata: the entry's own ``metadata`` first, then force-set ``source_doc``,
``source_root``, ``source_path``, ``source_kind`` (default ``dream``), ``file_hash``,
``source_size``, ``source_mtime_ms``, ``ingest_version``, ``hash_backend`` (the reference
writes these even when empty/zero), ``source_type: "dream"``, ``dream_score``,
``dream_recall_count``, ``dream_unique_queries``, ``dream_section``, ``dream_line`` (the
real file line when known, see :func:`resolve_source_line`), ``dream_index`` (1-based
candidate index), ``dream_promoted_at`` (ms), ``authored: true``,
``type: "dream_promotion"``, ``access_count: 0``, ``text``.

**Tombstones** (``forget``, convention of :mod:`sidecar.memory.core.layout`): an accepted
entry is not written when the tombstone namespace ``<ns>`` holds its content key
``tombstone_key("dream:<ns>", content_tombstone_id(text))`` (forget writes one per dream
record; ids are positional, so they cannot identify an entry across diary edits) or the
whole-diary key ``tombstone_key("dream:<ns>", sourceDoc)``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.memory.core import layout as collections
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.lifecycle.dream import DreamEntry, RejectedEntry, dream_entry_id, gate_entries
from sidecar.store.timestamps import metadata_ts_problem
from sidecar.store.types import Delete, Put

if TYPE_CHECKING:
    from sidecar.store.service import StoreService


class DreamInputError(MemoryInputError):
    """Unacceptable input (blank userId/sourceDoc); nothing was written."""


def dream_collection(namespace: str) -> str:
    return collections.dream(namespace)


def document_tombstone_key(namespace: str, source_doc: str) -> str:
    """Tombstone key forgetting a whole diary: ``["dream:<ns>","<sourceDoc>"]``."""
    return collections.tombstone_key(dream_collection(namespace), source_doc)


@dataclass(frozen=True, slots=True)
class DreamProvenance:
    root: str = ""
    path: str = ""
    kind: str = ""  # "" = "dream"
    file_hash: str = ""
    size: int = 0
    mtime_ms: int = 0
    ingest_version: int = 0
    hash_backend: str = ""


@dataclass(slots=True)
class PromoteReport:
    collection: str
    promoted: int = 0
    rejected: int = 0
    removed: int = 0
    suppressed: int = 0
    ids: list[str] = field(default_factory=list)
    rejections: tuple[RejectedEntry, ...] = ()


class DreamService:
    """Promote dream entries. One per daemon (built in ``sidecar.services``)."""

    def __init__(self, svc: StoreService) -> None:
        self.svc = svc
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def _lock(self, key: tuple[str, str]) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    async def promote(
        self,
        namespace: str,
        source_doc: str,
        entries: Sequence[DreamEntry],
        provenance: DreamProvenance | None = None,
    ) -> PromoteReport:
        ns, sd = namespace.strip(), source_doc.strip()
        if not ns:
            raise DreamInputError("userId is required")
        if not sd:
            raise DreamInputError("sourceDoc is required")
        for i, e in enumerate(entries):
            problem = metadata_ts_problem(e.metadata)  # a numeric ts is the record's time
            if problem is not None:
                raise DreamInputError(f"entries[{i}].{problem}")
        prov = provenance or DreamProvenance()
        coll = dream_collection(ns)
        gated = gate_entries(entries)
        report = PromoteReport(coll, rejected=len(gated.rejected), rejections=gated.rejected)
        store = self.svc.store
        async with self._lock((coll, sd)):
            old: list[str] = []
            if store.store.collection(coll) is not None:
                old = [r.id for r in await store.list_records(coll, where={"source_doc": sd})]
            accepted = list(enumerate(gated.accepted))
            if accepted:
                # Forgotten entries are matched by content: ids are positions in the diary,
                # so a new bullet above an old one would shift every id after it.
                keys = [
                    collections.tombstone_key(coll, collections.content_tombstone_id(e.text))
                    for _, e in accepted
                ]
                doc_key = document_tombstone_key(ns, sd)
                found = await store.tombstoned(ns, [*keys, doc_key])
                pairs = zip(accepted, keys, strict=True)
                kept = [] if doc_key in found else [p for p, key in pairs if key not in found]
                report.suppressed = len(accepted) - len(kept)
                # Survivors are numbered afresh, as the reference numbers accepted entries.
                accepted = [(n, e) for n, (_, e) in enumerate(kept)]
            now_ms = time.time_ns() // 1_000_000
            puts: list[Put] = []
            if accepted:
                vecs = np.asarray(
                    await self.svc.embed([e.text.strip() for _, e in accepted], "document"),
                    dtype=np.float32,
                )
                if vecs.ndim != 2 or vecs.shape[0] != len(accepted):
                    raise RuntimeError(f"embedder returned {vecs.shape} for {len(accepted)} texts")
                for row, (i, e) in enumerate(accepted):
                    rid = dream_entry_id(sd, i)
                    puts.append(
                        Put(coll, rid, e.text.strip(), _metadata(sd, prov, e, now_ms), vecs[row])
                    )
            new_ids = {p.id for p in puts}
            deletes = [Delete(coll, rid) for rid in old if rid not in new_ids]
            if deletes or puts:
                await store.write([*deletes, *puts])
            report.promoted = len(puts)
            report.removed = len(old) - len(new_ids & set(old))
            report.ids = [p.id for p in puts]
        return report


def _metadata(sd: str, prov: DreamProvenance, e: DreamEntry, now_ms: int) -> dict[str, Any]:
    meta: dict[str, Any] = dict(e.metadata)
    meta.update(
        source_doc=sd,
        source_root=prov.root,
        source_path=prov.path,
        source_kind=prov.kind.strip() or "dream",
        file_hash=prov.file_hash,
        source_size=int(prov.size),
        source_mtime_ms=int(prov.mtime_ms),
        ingest_version=int(prov.ingest_version),
        hash_backend=prov.hash_backend,
        source_type="dream",
        dream_score=float(e.score),
        dream_recall_count=int(e.recall_count),
        dream_unique_queries=int(e.unique_queries),
        dream_section=e.section,
        dream_line=int(e.line),
        dream_index=int(e.index),
        dream_promoted_at=now_ms,
        authored=True,
        type="dream_promotion",
        access_count=0,
        text=e.text.strip(),
    )
    return meta
