"""Authored markdown documents in the store.

A document (``sourceDoc``) is parsed by :func:`sidecar.memory.authored.markdown.parse_document` into
nodes of three tiers, stored as records ``<sourceDoc>#%06d``:

* ``authored:hard`` / ``authored:soft``: vectorless (text in metadata, never embedded);
* ``authored:variant``: embedded, all variant nodes of the document in one batch call.

Only core documents yield hard nodes (the parser's rule: the caller's ``core`` flag or
frontmatter ``core: true``).

**Atomic replace.** Ingest lists the document's stored records (``source_doc`` equality in
the three collections), then writes ONE store transaction that deletes the records the new
version no longer has and upserts the new nodes (``access_count`` of a surviving id is
kept). A failure (bad input, embedder, disk) writes nothing: the old version stays whole.
Ingests of the same document are serialized in-process. When the stored records already
equal the new ones (same ids, texts and metadata), nothing is embedded or written.

**Tombstones** (``forget``): before writing, the store's tombstones are checked; a node
is not written when

* tombstone namespace ``authored`` holds key ``authored:<sourceDoc>`` (the whole
  document is forgotten), or
* tombstone namespace ``authored`` holds the record's key
  :func:`sidecar.memory.core.layout.tombstone_key` (``["authored:<tier>","<id>"]``).

Suppressed nodes are counted, never written; stale stored records are still removed.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.memory.authored.markdown import (
    DEFAULT_TOKENIZER_ID,
    AuthoredDocument,
    Tier,
    parse_document,
)
from sidecar.memory.core.callbacks import Listeners
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.core.layout import (
    AUTHORED_COLLECTIONS,
    AUTHORED_HARD,
    AUTHORED_SOFT,
    AUTHORED_TIERS,
    AUTHORED_VARIANT,
    tombstone_keys,
)
from sidecar.memory.core.progress import PROGRESS_CHUNK, Progress, no_progress
from sidecar.store.types import Delete, Put, Record

if TYPE_CHECKING:
    from sidecar.store.aio import AsyncStore
    from sidecar.store.service import StoreService

TIER_COLLECTION = {
    Tier.HARD: AUTHORED_HARD,
    Tier.SOFT: AUTHORED_SOFT,
    Tier.VARIANT: AUTHORED_VARIANT,
}
TOMBSTONE_NAMESPACE = "authored"
SOURCE_KINDS = ("generic", "obsidian")
# Keys that change without the document changing; ignored by the "unchanged" comparison.
_VOLATILE = frozenset({"access_count"})


class AuthoredInputError(MemoryInputError):
    """Unacceptable input (e.g. a blank sourceDoc); nothing was written."""


def document_tombstone_key(source_doc: str) -> str:
    return f"authored:{source_doc}"


def normalize_source_kind(kind: str) -> str:
    """``generic`` or ``obsidian`` (case-insensitive); anything else non-empty is generic."""
    k = kind.strip().lower()
    if not k:
        return ""
    return k if k in SOURCE_KINDS else "generic"


@dataclass(frozen=True, slots=True)
class SourceMeta:
    """Provenance stored with every node; empty strings and zero numbers are omitted."""

    root: str = ""
    path: str = ""
    kind: str = ""
    file_hash: str = ""
    size: int = 0
    mtime_ms: int = 0
    ingest_version: int = 0
    hash_backend: str = ""

    def metadata(self, *, kind_default: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (
            ("source_root", self.root),
            ("source_path", self.path),
            ("source_kind", self.kind or kind_default),
            ("file_hash", self.file_hash),
            ("hash_backend", self.hash_backend),
        ):
            if value:
                out[key] = value
        for key, num in (
            ("source_size", self.size),
            ("source_mtime_ms", self.mtime_ms),
            ("ingest_version", self.ingest_version),
        ):
            if num > 0:
                out[key] = int(num)
        return out


@dataclass(slots=True)
class IngestReport:
    source_doc: str
    core: bool
    cache_key: str
    hard: int = 0
    soft: int = 0
    variant: int = 0
    removed: int = 0
    suppressed: int = 0
    unchanged: bool = False
    hop_targets: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> int:
        return self.hard + self.soft + self.variant


@dataclass(frozen=True, slots=True)
class _Planned:
    collection: str
    id: str
    text: str
    metadata: dict[str, Any]


def _comparable(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k not in _VOLATILE}


class AuthoredService:
    """Ingest / delete authored documents. One per daemon (built in ``sidecar.services``)."""

    def __init__(self, svc: StoreService) -> None:
        self.svc = svc
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._listeners: Listeners[list[str]] = Listeners("authored.listener_failed")

    def subscribe(self, listener: Callable[[list[str]], None]) -> Callable[[], None]:
        """Call ``listener(collections)`` after every authored write (ingest or delete)
        with the collections it changed; returns an unsubscribe function. Listeners run
        synchronously and must not block."""
        return self._listeners.add(listener)

    def _changed(self, ops: Sequence[Put | Delete]) -> None:
        self._listeners.notify(sorted({op.collection for op in ops}))

    def _lock(self, source_doc: str) -> asyncio.Lock:
        lock = self._locks.get(source_doc)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[source_doc] = lock
        return lock

    @property
    def store(self) -> AsyncStore:
        return self.svc.store

    async def stored_records(self, source_doc: str) -> list[Record]:
        """The document's records in the three authored collections."""
        store = self.store
        out: list[Record] = []
        for coll in AUTHORED_COLLECTIONS:
            if store.store.collection(coll) is not None:
                out += await store.list_records(coll, where={"source_doc": source_doc})
        return out

    @staticmethod
    def parse(
        source_doc: str,
        text: str,
        *,
        core: bool | None = None,
        tokenizer_id: str = "",
    ) -> AuthoredDocument:
        sd = source_doc.strip()
        if not sd:
            raise AuthoredInputError("sourceDoc is required")
        if "\x00" in text:
            raise AuthoredInputError("text must not contain NUL characters")
        return parse_document(
            sd, text, core_doc=core, tokenizer_id=tokenizer_id or DEFAULT_TOKENIZER_ID
        )

    async def ingest(
        self,
        source_doc: str,
        text: str,
        *,
        core: bool | None = None,
        tokenizer_id: str = "",
        source: SourceMeta | None = None,
        dry_run: bool = False,
        progress: Progress = no_progress,
    ) -> IngestReport:
        """Parse and atomically replace the document (module doc). ``progress`` hears
        about the embedding of a long document's notes, step by step."""
        doc = self.parse(source_doc, text, core=core, tokenizer_id=tokenizer_id)
        sd = doc.source_doc
        src = (source or SourceMeta()).metadata()
        if "source_kind" in src:
            src["source_kind"] = normalize_source_kind(str(src["source_kind"]))
        planned: list[_Planned] = []
        for node in doc.nodes:
            meta = doc.node_metadata(node)
            meta.update(src)
            meta["text"] = node.text
            meta["access_count"] = 0
            planned.append(_Planned(TIER_COLLECTION[node.tier], node.id, node.text, meta))
        report = IngestReport(sd, doc.core, doc.cache_key, hop_targets=list(doc.hop_targets))
        if dry_run:
            _count(report, planned)
            return report

        store = self.store
        async with self._lock(sd):
            old = await self.stored_records(sd)
            planned, report.suppressed = await self._unsuppressed(sd, planned)
            _count(report, planned)
            old_keys = {(r.collection, r.id): r for r in old}
            new_keys = {(p.collection, p.id) for p in planned}
            if set(old_keys) == new_keys and all(
                old_keys[(p.collection, p.id)].text == p.text
                and _comparable(old_keys[(p.collection, p.id)].metadata) == _comparable(p.metadata)
                for p in planned
            ):
                report.unchanged = True
                return report
            vectors = await self._embed_variants(planned, progress)
            ops: list[Put | Delete] = [
                Delete(c, i) for (c, i) in old_keys if (c, i) not in new_keys
            ]
            for p in planned:
                prior = old_keys.get((p.collection, p.id))
                meta = p.metadata
                if prior is not None and isinstance(prior.metadata.get("access_count"), int):
                    meta = {**meta, "access_count": prior.metadata["access_count"]}
                ops.append(Put(p.collection, p.id, p.text, meta, vectors.get(p.id)))
            report.removed = len(old_keys) - len(new_keys & set(old_keys))
            if ops:
                await store.write(ops)
                self._changed(ops)
        return report

    async def _unsuppressed(
        self, source_doc: str, planned: list[_Planned]
    ) -> tuple[list[_Planned], int]:
        store = self.store
        if await store.tombstoned(TOMBSTONE_NAMESPACE, [document_tombstone_key(source_doc)]):
            return [], len(planned)
        keep: list[_Planned] = []
        for coll in AUTHORED_COLLECTIONS:
            ids = [p.id for p in planned if p.collection == coll]
            dead: set[str] = set()
            if ids:
                keys = dict(zip(tombstone_keys(coll, ids), ids, strict=True))
                dead = {keys[k] for k in await store.tombstoned(TOMBSTONE_NAMESPACE, keys)}
            keep += [p for p in planned if p.collection == coll and p.id not in dead]
        keep.sort(key=lambda p: p.metadata["ordinal"])
        return keep, len(planned) - len(keep)

    async def _embed_variants(
        self, planned: Sequence[_Planned], progress: Progress = no_progress
    ) -> dict[str, Any]:
        variants = [p for p in planned if p.collection == AUTHORED_VARIANT]
        if not variants:
            return {}
        texts = [p.text for p in variants]
        parts = []
        for start in range(0, len(texts), PROGRESS_CHUNK):
            chunk = texts[start : start + PROGRESS_CHUNK]
            parts.append(np.asarray(await self.svc.embed(chunk, "document"), dtype=np.float32))
            if len(texts) > PROGRESS_CHUNK:
                await progress(start + len(chunk), len(texts), "embedding authored notes")
        vecs = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if vecs.ndim != 2 or vecs.shape[0] != len(variants):
            raise RuntimeError(f"embedder returned {vecs.shape} for {len(variants)} texts")
        return {p.id: vecs[i] for i, p in enumerate(variants)}

    async def documents(self, watched: set[str]) -> list[dict[str, Any]]:
        """Each stored document with its provenance and node counts per tier, by name.
        ``watched``: the documents the daemon's watcher read from a configured root."""
        docs: dict[str, dict[str, Any]] = {}
        for tier, coll in AUTHORED_TIERS.items():
            for rec in await self.store.list_records(coll):
                name = rec.metadata.get("source_doc")
                if not isinstance(name, str):
                    continue
                doc = docs.setdefault(
                    name,
                    {
                        "source_doc": name,
                        "root": str(rec.metadata.get("source_root") or ""),
                        "kind": str(rec.metadata.get("source_kind") or ""),
                        "path": str(rec.metadata.get("source_path") or ""),
                        "core": bool(rec.metadata.get("is_core_doc")),
                        "hard": 0,
                        "soft": 0,
                        "variant": 0,
                        "watched": name in watched,
                    },
                )
                doc[tier] += 1
        return [docs[name] for name in sorted(docs)]

    async def delete(self, source_doc: str) -> int:
        """Delete every node of the document (one transaction); returns how many."""
        sd = source_doc.strip()
        if not sd:
            raise AuthoredInputError("sourceDoc is required")
        async with self._lock(sd):
            old = await self.stored_records(sd)
            if old:
                ops = [Delete(r.collection, r.id) for r in old]
                await self.store.write(ops)
                self._changed(ops)
        return len(old)


def _count(report: IngestReport, planned: Sequence[_Planned]) -> None:
    report.hard = sum(p.collection == AUTHORED_HARD for p in planned)
    report.soft = sum(p.collection == AUTHORED_SOFT for p in planned)
    report.variant = sum(p.collection == AUTHORED_VARIANT for p in planned)
