"""Records to and from PostgreSQL rows: the texts that cannot be ``text`` (NUL characters),
the jsonb copy of the metadata that filters run on, and ``where`` / time ranges compiled to
SQL with the SQLite store's semantics (``sidecar.store.rows.where_sql``).

Why two copies of the metadata: ``metadata`` (text) is the JSON exactly as written, the
source of truth; ``meta`` (jsonb) is what filters and the GIN index use. jsonb alone would
lose the key order and the int/float distinction (``1e20`` comes back as an integer), and
it cannot hold ``\\u0000``: in the copy, strings are escaped injectively (``\\x01`` ->
``\\x01\\x01``, ``\\x00`` -> ``\\x01\\x02``) and filter values the same way, so equality on
the copy is equality on the original.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sidecar.store.errors import InvalidInput
from sidecar.store.rows import filter_pairs, json_decode, json_encode
from sidecar.store.types import Hit, Record, TimeRange

# Numbers beyond 2**53 compare by value in Python (2**70 == 2.0**70) but by decimal text in
# jsonb: SQL checks the type, Python the value.
EXACT_LIMIT = 2**53

# Columns of a record row, in the order _record() reads them.
COLS = (
    "r.rid, r.id, r.text, r.text_raw, r.metadata, r.version, r.created_ms, r.updated_ms, "
    "r.ts_ms, r.seq"
)


# ---- texts and metadata going in ------------------------------------------------------------


def split_text(text: str) -> tuple[str, bytes | None]:
    """(text column, text_raw column): PostgreSQL text cannot hold NUL, so such a text is
    kept exactly as UTF-8 bytes beside a readable copy."""
    if "\x00" not in text:
        return text, None
    return text.replace("\x00", "\ufffd"), text.encode("utf-8")


def _escape(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x01", "\x01\x01").replace("\x00", "\x01\x02")
    if isinstance(value, Mapping):
        return {_escape(k): _escape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_escape(v) for v in value]
    return value


def filter_json(encoded: str, metadata: Mapping[str, Any]) -> str:
    """The jsonb copy's JSON: ``encoded`` itself unless a string holds \\x00 or \\x01."""
    if "\\u0000" not in encoded and "\\u0001" not in encoded:
        return encoded
    return json_encode(_escape(metadata)).decode()


# ---- filters ---------------------------------------------------------------------------------


def _needs_python(value: Any) -> bool:
    """A number (anywhere inside) that jsonb and Python may compare differently."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return False
    if isinstance(value, (int, float)):
        return abs(value) >= EXACT_LIMIT
    if isinstance(value, Mapping):
        return any(_needs_python(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_needs_python(v) for v in value)
    return False


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    return "array"


def where_sql(
    where: Mapping[str, Any] | None, time_range: TimeRange | None
) -> tuple[str, list[Any], list[tuple[str, Any]]]:
    """SQL predicate on ``records r`` (prefixed with AND), its parameters, and the
    (key, value) pairs left to check in Python (see :data:`EXACT_LIMIT`)."""
    clauses: list[str] = []
    params: list[Any] = []
    post: list[tuple[str, Any]] = []
    for key, val in filter_pairs(where):
        if not (val is None or isinstance(val, (bool, int, float, str, list, tuple, Mapping))):
            raise InvalidInput(f"unsupported metadata filter value for {key!r}")
        ekey = _escape(key)
        if isinstance(val, float) and not math.isfinite(val):
            clauses.append("FALSE")  # NaN equals nothing (and JSON has no infinity)
        elif _needs_python(val):
            clauses.append("jsonb_typeof(r.meta -> %s) = %s")
            params += [ekey, _json_type(val)]
            post.append((key, val))
        elif isinstance(val, (list, tuple, Mapping)):
            # jsonb equality: deep, numbers by value, "2" != 2, true != 1 (containment
            # would let [1, 2] match [1])
            clauses.append("r.meta -> %s = %s::jsonb")
            params += [ekey, json_encode(_escape(val)).decode()]
        else:
            # a scalar under a key: containment is equality here, and the GIN index serves it
            clauses.append("r.meta @> %s::jsonb")
            params.append(json_encode({ekey: _escape(val)}).decode())
    for op, ms in time_range.bounds() if time_range is not None else ():
        clauses.append(f"r.ts_ms {op} %s")
        params.append(ms)
    return "".join(f" AND {c}" for c in clauses), params, post


# ---- rows coming back ---------------------------------------------------------------------------


def text_of(text: str, raw: bytes | None) -> str:
    """A record's text from its columns (:func:`split_text`)."""
    return text if raw is None else bytes(raw).decode("utf-8")


def metadata_of(raw: str) -> dict[str, Any]:
    value = json_decode(raw)
    return value if isinstance(value, dict) else {}


def record(collection: str, row: Sequence[Any], with_vector: bool) -> Record:
    """A :class:`Record` from a row of :data:`COLS` (+ the embedding when asked for)."""
    _rid, rec_id, text, raw, meta, version, created, updated, ts, seq = row[:10]
    vec = None
    if with_vector and len(row) > 10 and row[10] is not None:
        vec = np.asarray(row[10], dtype=np.float32)
    return Record(
        collection=collection,
        id=rec_id,
        text=text_of(text, raw),
        metadata=metadata_of(meta),
        version=version,
        created_ms=created,
        updated_ms=updated,
        ts_ms=ts,
        seq=seq,
        vector=vec,
    )


def hit(collection: str, row: Sequence[Any], score: float) -> Hit:
    """A :class:`Hit` from a row of :data:`COLS`."""
    _rid, rec_id, text, raw, meta, version, created, _updated, ts = row[:9]
    return Hit(
        collection, rec_id, text_of(text, raw), metadata_of(meta), version, score, created, ts
    )
