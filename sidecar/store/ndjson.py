"""Export and import of a store as NDJSON (one JSON object per line).

Format (version 1), in order:

* ``{"kind": "header", "format": "libravdb-store", "version": 1, "fingerprint": ...,
  "embed_dims": ..., "exported_ms": ..., "vector_encoding": "f32le-base64"}``
* per collection: ``{"kind": "collection", "name", "dims", "type"}`` then its records
  ``{"kind": "record", "collection", "id", "text", "metadata", "version", "created_ms",
  "updated_ms", "vector"?}`` in id order; ``vector`` is the base64 of little-endian float32
  values (a JSON array of numbers is accepted on import);
* ``{"kind": "tombstone", "namespace", "key", "reason", "created_ms"}``;
* ``{"kind": "end", "records": n, "collections": n, "tombstones": n}``.

Import is an upsert of every record (repeating an import is harmless). Vectors are used as
they are when the file's fingerprint equals the store's and the size fits; otherwise (or
when absent) the record's text is re-embedded with ``embed``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import msgspec
import numpy as np
import structlog

from sidecar.store import names as N
from sidecar.store.errors import InvalidInput
from sidecar.store.timestamps import metadata_ts_problem, ts_problem
from sidecar.store.types import ExportStats, ImportStats, Put

if TYPE_CHECKING:
    from sidecar.store.types import CollectionInfo, Op, OpResult, Record

log = structlog.get_logger(__name__)

SkipFn = Callable[[str, str, dict[str, Any]], bool]

FORMAT = "libravdb-store"
VERSION = 1

EmbedFn = Callable[[list[str]], Any]
Progress = Callable[[int, int | None], None]

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


class NdjsonStore(Protocol):
    """What export and import use of a store (every ``StoreBackend`` has it)."""

    embed_dims: int
    fingerprint: str

    def dims_for(self, name: str) -> int: ...

    def collection(self, name: str) -> CollectionInfo | None: ...

    def collections(
        self, *, prefix: str | None = None, namespace: str | None = None
    ) -> list[CollectionInfo]: ...

    def ensure_collections(self, names: Iterable[str]) -> list[CollectionInfo]: ...

    def count(self, collection: str) -> int: ...

    def iter_records(
        self, collection: str, *, include_vectors: bool = True, batch: int = 1000
    ) -> Iterable[Record]: ...

    def write(self, ops: Sequence[Op]) -> list[OpResult]: ...

    def add_tombstones(self, namespace: str, keys: Iterable[str], reason: str = "") -> int: ...

    def list_tombstones(self, namespace: str | None = None) -> list[tuple[str, str, str, int]]: ...


def encode_vector(vec: Any) -> str:
    arr = np.asarray(vec, dtype="<f4")
    return base64.b64encode(arr.tobytes()).decode("ascii")


def decode_vector(value: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
    if isinstance(value, str):
        raw = base64.b64decode(value.encode("ascii"), validate=True)
        if len(raw) % 4:
            raise InvalidInput("vector payload is not a whole number of float32 values")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float32)
    raise InvalidInput("vector must be base64 float32 or an array of numbers")


def _line(obj: dict[str, Any]) -> str:
    return _enc.encode(obj).decode("utf-8") + "\n"


def export_ndjson(
    store: NdjsonStore,
    out: TextIO,
    *,
    collections: Iterable[str] | None = None,
    include_vectors: bool = True,
    progress: Progress | None = None,
) -> ExportStats:
    names = (
        sorted(dict.fromkeys(collections))
        if collections is not None
        else [c.name for c in store.collections()]
    )
    infos = [i for i in (store.collection(n) for n in names) if i is not None]
    total = sum(store.count(i.name) for i in infos)
    out.write(
        _line(
            {
                "kind": "header",
                "format": FORMAT,
                "version": VERSION,
                "fingerprint": store.fingerprint,
                "embed_dims": store.embed_dims,
                "exported_ms": int(time.time() * 1000),
                "vector_encoding": "f32le-base64",
            }
        )
    )
    done = 0
    for info in infos:
        out.write(
            _line({"kind": "collection", "name": info.name, "dims": info.dims, "type": info.kind})
        )
        for rec in store.iter_records(info.name, include_vectors=include_vectors):
            obj: dict[str, Any] = {
                "kind": "record",
                "collection": rec.collection,
                "id": rec.id,
                "text": rec.text,
                "metadata": rec.metadata,
                "version": rec.version,
                "created_ms": rec.created_ms,
                "updated_ms": rec.updated_ms,
            }
            if include_vectors and rec.vector is not None and info.has_vectors:
                obj["vector"] = encode_vector(rec.vector)
            out.write(_line(obj))
            done += 1
            if progress is not None and done % 1000 == 0:
                progress(done, total)
    tombs = store.list_tombstones() if collections is None else []
    for ns, key, reason, created in tombs:
        out.write(
            _line(
                {
                    "kind": "tombstone",
                    "namespace": ns,
                    "key": key,
                    "reason": reason,
                    "created_ms": created,
                }
            )
        )
    out.write(
        _line({"kind": "end", "records": done, "collections": len(infos), "tombstones": len(tombs)})
    )
    if progress is not None:
        progress(done, total)
    return ExportStats(records=done, collections=len(infos), tombstones=len(tombs))


def _check_times(lineno: int, obj: dict[str, Any]) -> None:
    """A record's times (``metadata.ts``, ``created_ms``) within the accepted range: an
    export written before ingest checked them may hold one no date can show."""
    meta = obj.get("metadata")
    problem = metadata_ts_problem(meta) if isinstance(meta, dict) else None
    created = obj.get("created_ms")
    if problem is None and isinstance(created, int) and not isinstance(created, bool):
        bad = ts_problem(created)
        problem = None if bad is None else f"created_ms {bad}"
    if problem is not None:
        raise InvalidInput(f"line {lineno}: {problem}; correct or remove it and import again")


def import_ndjson(
    store: NdjsonStore,
    src: Iterable[str],
    *,
    embed: EmbedFn | None = None,
    progress: Progress | None = None,
    batch: int = 256,
    skip: SkipFn | None = None,
) -> ImportStats:
    """Upsert every record of an export. Raises InvalidInput on a malformed file.

    ``skip(collection, id, metadata)`` returning true drops a record (the memory layer
    passes one built from the tombstones, so an import cannot resurrect forgotten data).

    Records are written in transactions of ``batch``; a failure stops the import with the
    earlier batches kept (import again to finish: it is idempotent).
    """
    importer = _Importer(store, embed=embed, progress=progress, batch=batch, skip=skip)
    for lineno, line in enumerate(src, 1):
        if line.strip():
            importer.line(lineno, line)
    return importer.finish()


@dataclass
class _Importer:
    """The state of one import: the header's verdict on vectors, the pending batch, the
    tombstones (applied at the end) and the counts."""

    store: NdjsonStore
    _: KW_ONLY
    embed: EmbedFn | None
    progress: Progress | None
    batch: int
    skip: SkipFn | None
    header: dict[str, Any] | None = None
    use_vectors: bool = False
    ended: bool = False
    pending: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    need_embed: list[int] = field(default_factory=list)  # rows of pending without a usable vector
    tombs: list[tuple[str, str, str]] = field(default_factory=list)
    records: int = 0
    reembedded: int = 0
    collections: int = 0
    skipped: int = 0

    def line(self, lineno: int, line: str) -> None:
        try:
            obj = _dec.decode(line)
        except msgspec.DecodeError as exc:
            raise InvalidInput(f"line {lineno}: not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise InvalidInput(f"line {lineno}: expected an object")
        kind = obj.get("kind")
        if self.header is None:
            self._read_header(lineno, obj)
        elif kind == "collection":
            self.store.ensure_collections([N.validate_collection(obj.get("name"))])
            self.collections += 1
        elif kind == "record":
            self._read_record(lineno, obj)
        elif kind == "tombstone":
            self.tombs.append(
                (str(obj.get("namespace", "")), str(obj.get("key", "")), str(obj.get("reason", "")))
            )
        elif kind == "end":
            self.ended = True
        else:
            raise InvalidInput(f"line {lineno}: unknown kind {kind!r}")

    def _read_header(self, lineno: int, obj: dict[str, Any]) -> None:
        if obj.get("kind") != "header" or obj.get("format") != FORMAT:
            raise InvalidInput(f"line {lineno}: not a {FORMAT} export (missing header)")
        if obj.get("version") != VERSION:
            raise InvalidInput(f"unsupported export version {obj.get('version')!r}")
        self.header = obj
        ours, theirs = self.store.fingerprint, obj.get("fingerprint")
        # vectors are reused only when they come from the same embedding model
        self.use_vectors = (bool(ours) and theirs == ours) or (not ours and not theirs)

    def _read_record(self, lineno: int, obj: dict[str, Any]) -> None:
        coll = N.validate_collection(obj.get("collection"))
        N.validate_id(obj.get("id"))
        if not isinstance(obj.get("text", ""), str):
            raise InvalidInput(f"line {lineno}: text must be a string")
        _check_times(lineno, obj)
        if self.skip is not None and self.skip(coll, str(obj.get("id")), obj.get("metadata") or {}):
            self.skipped += 1
            return
        dims = self.store.dims_for(coll)
        vec: Any = None
        if dims > 1:
            raw = obj.get("vector")
            if raw is not None and self.use_vectors:
                vec = decode_vector(raw)
                if vec.shape[0] != dims:
                    vec = None
            if vec is None:
                self.need_embed.append(len(self.pending))
        self.pending.append((obj, vec))
        if len(self.pending) >= self.batch:
            self.flush()

    def _embed_pending(self) -> None:
        if self.embed is None:
            raise InvalidInput(
                "the import needs an embedder: some records have no usable vector "
                "(missing, or written by another embedding model)"
            )
        texts = [self.pending[i][0]["text"] for i in self.need_embed]
        vecs = np.asarray(self.embed(texts), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise InvalidInput("the embedder returned the wrong number of vectors")
        for j, i in enumerate(self.need_embed):
            rec, _ = self.pending[i]
            dims = self.store.dims_for(rec["collection"])
            vec = vecs[j]
            if vec.shape[0] > dims:
                vec = N.normalized(vec[:dims])
            self.pending[i] = (rec, vec)
        self.reembedded += len(self.need_embed)

    def flush(self) -> None:
        if not self.pending:
            return
        if self.need_embed:
            self._embed_pending()
        puts = []
        for rec, vec in self.pending:
            created = rec.get("created_ms")
            keep_created = isinstance(created, int) and not isinstance(created, bool)
            puts.append(
                Put(
                    rec["collection"],
                    rec["id"],
                    rec.get("text", ""),
                    rec.get("metadata") or {},
                    vec,
                    None,
                    created if keep_created else None,
                )
            )
        self.store.write(puts)
        self.records += len(puts)
        self.pending.clear()
        self.need_embed.clear()
        if self.progress is not None:
            self.progress(self.records, None)

    def finish(self) -> ImportStats:
        self.flush()
        if self.header is None:
            raise InvalidInput("empty import: no header line")
        by_ns: dict[str, list[tuple[str, str]]] = {}
        for ns, key, reason in self.tombs:
            by_ns.setdefault(ns, []).append((key, reason))
        for ns, items in by_ns.items():
            for key, reason in items:
                self.store.add_tombstones(ns, [key], reason)
        if not self.ended:
            log.warning("store.import_truncated", records=self.records)
        return ImportStats(
            records=self.records,
            reembedded=self.reembedded,
            collections=self.collections,
            tombstones=len(self.tombs),
            skipped=self.skipped,
        )
