"""Record semantics both backends share, written once and called by each of them.

The SQLite store (``reads.py``, ``search.py``, ``ops.py``, ``opening.py``) and the
PostgreSQL store (``pg/``) differ in SQL and in where state lives; what a caller sees
(the merge order of a multi-collection search, paging, a patch's preconditions, what is
recorded in ``meta`` at open) must not differ, so it is decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from sidecar.store import names as N
from sidecar.store.errors import (
    FingerprintMismatch,
    InvalidInput,
    NotFound,
    UnfinishedReembed,
    VersionConflict,
)
from sidecar.store.files import now_ms
from sidecar.store.reembed_stage import TARGET_KEY, TARGET_MODEL_KEY
from sidecar.store.rows import json_encode
from sidecar.store.types import Delete, DropCollection, Hit, Op, Patch, Put, Record

SearchOne = Callable[[str, Iterable[str]], list[Hit]]
ListPage = Callable[[str | None, int], list[Record]]


def merge_searches(
    collections: Sequence[str],
    k: int,
    search_one: SearchOne,
    exclude_by_collection: Mapping[str, Iterable[str]] | None = None,
) -> list[Hit]:
    """Search each collection (once) for ``k`` with ``search_one(name, excluded_ids)``,
    merge: score desc, collection asc, id asc."""
    if k <= 0 or not collections:
        return []
    merged: list[Hit] = []
    for name in dict.fromkeys(collections):
        merged.extend(search_one(name, (exclude_by_collection or {}).get(name, ())))
    merged.sort(key=lambda h: (-h.score, h.collection, h.id))
    return merged[:k]


def iter_pages(list_page: ListPage, batch: int) -> Iterable[Record]:
    """Every record, in id order, from ``list_page(after_id, limit)`` pages."""
    after: str | None = None
    while True:
        page = list_page(after, batch)
        if not page:
            return
        yield from page
        after = page[-1].id


def check_patch_target(op: Patch, actual_version: int | None) -> bool:
    """A patch's preconditions on the record's current version (None: no such record).
    Raises VersionConflict / NotFound; False when a missing record is fine (skip)."""
    if op.if_version is not None and actual_version != op.if_version:
        raise VersionConflict(op.collection, op.id, op.if_version, actual_version)
    if actual_version is None:
        if op.missing_ok:
            return False
        raise NotFound(f"record not found: {op.collection}/{op.id}")
    return True


def counted(meta: dict[str, Any], key: str) -> dict[str, Any]:
    """``meta`` with the counter ``key`` incremented in place (``increment``): a missing or
    non-numeric value counts from 0, a float stays a float."""
    old = meta.get(key)
    if isinstance(old, bool) or not isinstance(old, (int, float)):
        old = 0
    meta[key] = int(old) + 1 if isinstance(old, int) else old + 1
    return meta


def matching(
    records: list[Record], post: Sequence[tuple[str, Any]], limit: int | None
) -> list[Record]:
    """A listing's records that pass the metadata filters SQL could not apply (``post``,
    from ``where_sql``), ``limit`` at most (SQL could not apply it either)."""
    if not post:
        return records
    out = [r for r in records if N.metadata_matches(r.metadata, post)]
    return out[:limit] if limit is not None and limit > 0 else out


def unscored_hits(records: list[Record], excluded: Iterable[str], k: int) -> list[Hit]:
    """A search of a vectorless collection (or by a zero query): every record scores 0,
    so the hits are the listing's records in id order, ``excluded`` left out, ``k`` at
    most (``k <= 0``: all)."""
    ex = set(excluded)
    kept = [r for r in records if r.id not in ex] if ex else records
    return [
        Hit(r.collection, r.id, r.text, r.metadata, r.version, 0.0, r.created_ms, r.ts_ms)
        for r in (kept[:k] if k > 0 else kept)
    ]


class Identity(Protocol):
    """What a store records of its embedder in ``meta``."""

    fingerprint: str
    model: str
    embed_dims: int


def meta_writes(
    meta: Mapping[str, str], store: Identity, profile: Mapping[str, Any] | None
) -> dict[str, str]:
    """The ``meta`` rows a store records at open: the first fingerprint, the model's name
    while it is the stored fingerprint's, the dimension and creation time once, the
    profile every time."""
    fingerprint, model = store.fingerprint, store.model
    stored = meta.get("fingerprint", "")
    writes: dict[str, str] = {}
    if fingerprint and not stored:
        writes["fingerprint"] = fingerprint
    same_model = not stored or stored == fingerprint
    if model and fingerprint and same_model and meta.get("model") != model:
        writes["model"] = model
    if "embed_dims" not in meta:
        writes["embed_dims"] = str(store.embed_dims)
    if "created_ms" not in meta:
        writes["created_ms"] = str(now_ms())
    if profile is not None:
        writes["profile"] = json_encode(dict(profile)).decode()
    return writes


def check_changed_since(seq: object, limit: object) -> tuple[int, int | None]:
    """``changed_since``'s arguments: a non-negative integer ``seq`` (a state's
    ``max_seq``); ``limit`` None, or a positive integer (0 or less: no limit, as
    ``list_records``)."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidInput("seq must be a non-negative integer")
    seq = min(seq, 2**63 - 1)  # beyond every stored seq (and SQL's integers)
    if limit is None:
        return seq, None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInput("limit must be an integer or None")
    return seq, (limit if limit > 0 else None)


# why an open dropped an unfinished re-embed's stage (logged by either backend)
STAGE_DISCARDED = (
    "opened by the model the store was written with; the unfinished "
    "re-embed's staged vectors were dropped (its records were untouched)"
)


def check_fingerprint(
    meta: Mapping[str, str],
    *,
    fingerprint: str,
    model: str,
    where: str,
    progress: Callable[[], tuple[int, int]],
) -> None:
    """Refuse vectors of another model at open, naming what differs and the command that
    fixes it: UnfinishedReembed when this model is the target of an unfinished ``libravdb
    reembed`` (``progress()``: its records done and in all), FingerprintMismatch when
    another model wrote the vectors. The model the store was written with may open it
    while a re-embed is unfinished (the backend then discards the stage)."""
    stored = meta.get("fingerprint", "")
    target = meta.get(TARGET_KEY, "")
    if target and fingerprint == target and target != stored:
        done, total = progress()
        raise UnfinishedReembed(
            where, model or meta.get(TARGET_MODEL_KEY, ""), target, done=done, total=total
        )
    if fingerprint and stored and stored != fingerprint:
        raise FingerprintMismatch(
            where,
            stored,
            fingerprint,
            stored_model=meta.get("model", ""),
            current_model=model,
            pending_target=target,
        )


def check_put_numbers(op: Put) -> None:
    """A Put's ``if_version`` (None or a non-negative integer) and ``created_ms`` (None or
    an integer of milliseconds); InvalidInput otherwise."""
    if op.if_version is not None and (
        isinstance(op.if_version, bool) or not isinstance(op.if_version, int) or op.if_version < 0
    ):
        raise InvalidInput("if_version must be a non-negative integer")
    created = op.created_ms
    if created is not None and (isinstance(created, bool) or not isinstance(created, int)):
        raise InvalidInput("created_ms must be an integer (milliseconds)")


def prepare_change(op: Op) -> Op:
    """A Patch, Delete or DropCollection validated (names, id, metadata, text), in the
    caller's thread; InvalidInput for an operation of no known kind. (A Put's checks
    depend on the collection's dimension, which each backend reads where it is kept.)"""
    if isinstance(op, Patch):
        return Patch(
            N.validate_collection(op.collection),
            N.validate_id(op.id),
            N.validate_metadata(op.metadata),
            None if op.text is None else N.validate_text(op.text),
            op.if_version,
            op.bump_version,
            op.missing_ok,
        )
    if isinstance(op, Delete):
        return Delete(N.validate_collection(op.collection), N.validate_id(op.id))
    if isinstance(op, DropCollection):
        return DropCollection(N.validate_collection(op.collection))
    raise InvalidInput(f"unknown operation {type(op).__name__}")
