"""The check at the end of ``libravdb migrate``: the target holds what the source holds.

* the same collections, each with the same dimension, kind and record count, and the same
  number of tombstones (per namespace);
* the same embedding fingerprint, model and dimension;
* a random sample of records (:data:`SAMPLE`, seeded, so a failure can be repeated),
  compared one by one: text, metadata (as JSON, so ``1`` and ``1.0`` differ), creation
  time, record timestamp and the vector **bit for bit** (float32 equality: both backends
  store float32 as written; pgvector's ``vector`` type is float4, ``halfvec`` appears only
  in the PostgreSQL index expressions, never in the stored column).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from sidecar.store.interface import StoreBackend
from sidecar.store.rows import json_encode
from sidecar.store.types import Record

SAMPLE = 200
SHOWN = 5  # mismatches named in the message


@dataclass(slots=True)
class Verified:
    collections: int = 0
    records: int = 0
    sampled: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(
    source: StoreBackend,
    target: StoreBackend,
    keys: list[tuple[int, str, str]],
    *,
    sample: int = SAMPLE,
    seed: int = 0,
) -> Verified:
    out = Verified()
    _identity(source, target, out)
    _counts(source, target, out)
    rng = random.Random(seed)
    picked = rng.sample(keys, min(sample, len(keys)))
    by_coll: dict[str, list[str]] = {}
    for _seq, name, rid in picked:
        by_coll.setdefault(name, []).append(rid)
    for name, ids in sorted(by_coll.items()):
        info = source.collection(name)
        vectors = info is not None and info.has_vectors
        src = {r.id: r for r in source.get_many(name, ids, include_vectors=vectors)}
        dst = {r.id: r for r in target.get_many(name, ids, include_vectors=vectors)}
        for rid in ids:
            out.sampled += 1
            why = _differs(src.get(rid), dst.get(rid))
            if why:
                out.problems.append(f"record {name}/{rid}: {why}")
    return out


def _identity(source: StoreBackend, target: StoreBackend, out: Verified) -> None:
    for what in ("fingerprint", "model", "embed_dims"):
        a, b = getattr(source, what), getattr(target, what)
        if a != b:
            out.problems.append(f"{what} is {a!r} in the source, {b!r} in the target")


def _counts(source: StoreBackend, target: StoreBackend, out: Verified) -> None:
    src = {i.name: i for i in source.collections()}
    dst = {i.name: i for i in target.collections()}
    out.collections = len(src)
    for name in sorted(src.keys() - dst.keys()):
        out.problems.append(f"collection {name!r} is missing from the target")
    for name in sorted(dst.keys() - src.keys()):
        out.problems.append(f"collection {name!r} is in the target, not in the source")
    for name in sorted(src.keys() & dst.keys()):
        a, b = src[name], dst[name]
        if (a.dims, a.kind) != (b.dims, b.kind):
            out.problems.append(f"collection {name!r}: {a.kind}/{a.dims} vs {b.kind}/{b.dims}")
        na, nb = source.count(name), target.count(name)
        out.records += na
        if na != nb:
            out.problems.append(f"collection {name!r}: {na} records in the source, {nb} copied")
    ta = Counter(ns for ns, *_ in source.list_tombstones())
    tb = Counter(ns for ns, *_ in target.list_tombstones())
    if ta != tb:
        out.problems.append(
            f"tombstones: {sum(ta.values())} in the source, {sum(tb.values())} in the target"
        )


def _differs(a: Record | None, b: Record | None) -> str:
    if a is None or b is None:
        return "missing from the target" if b is None else "missing from the source"
    if a.text != b.text:
        return "text differs"
    if json_encode(a.metadata) != json_encode(b.metadata):
        return "metadata differs"
    if (a.created_ms, a.ts_ms) != (b.created_ms, b.ts_ms):
        return "creation time or timestamp differs"
    if (a.vector is None) != (b.vector is None):
        return "vector present on one side only"
    if a.vector is not None and b.vector is not None:
        va = np.asarray(a.vector, dtype=np.float32)
        vb = np.asarray(b.vector, dtype=np.float32)
        if va.shape != vb.shape or not np.array_equal(va, vb):
            diff = float(np.max(np.abs(va - vb))) if va.shape == vb.shape else float("nan")
            return f"vector differs (max abs difference {diff:g})"
    return ""


def describe(v: Verified) -> str:
    """The problems, the first :data:`SHOWN` of them, in one paragraph."""
    shown = "; ".join(v.problems[:SHOWN])
    more = f" (and {len(v.problems) - SHOWN} more)" if len(v.problems) > SHOWN else ""
    return f"{shown}{more}"
