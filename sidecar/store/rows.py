"""How records are read back from SQLite: the JSON codec for metadata, lenient decoding of
damaged text, metadata filters compiled to SQL, and the result-row query of a search."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from sidecar.store.errors import InvalidInput
from sidecar.store.types import Hit, TimeRange

json_encode = msgspec.json.Encoder().encode
json_decode = msgspec.json.Decoder().decode


SQL_MAX_VARS = 900
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def chunks(items: Sequence[Any], size: int = SQL_MAX_VARS) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class Undecodable(str):
    """A TEXT value whose bytes are not UTF-8 (on-disk damage), decoded with U+FFFD.

    sqlite3 fails the whole query on such a value ("Could not decode to UTF-8 column"),
    so one damaged record made its collection unreadable; this keeps the query alive and
    lets the record be recognised and skipped."""


def lenient_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(raw.decode("utf-8", "replace"))


class Columns(NamedTuple):
    """A page of a collection's records as columns, in id order (``StoreCore.columns``):
    what a view's load reads, without a :class:`~sidecar.store.types.Record` per record
    or its metadata decoded (the caller decodes what it needs). ``metas``: the metadata's
    JSON as stored; ``ts``: the record's ``ts_ms`` (``created`` when it has none);
    ``vectors``: each vector's float32 values in native byte order, or None."""

    ids: Sequence[str]
    texts: Sequence[str]
    metas: Sequence[str]
    versions: Sequence[int]
    created: Sequence[int]
    updated: Sequence[int]
    ts: Sequence[int]
    seqs: Sequence[int]
    vectors: Sequence[bytes | None]


NO_COLUMNS = Columns((), (), (), (), (), (), (), (), ())


class BadRecord(Exception):
    """A record that cannot be read back (damaged text or metadata)."""


def decode_meta(raw: str) -> dict[str, Any]:
    """Metadata as stored; ``{}`` when it cannot be read (see :func:`record_meta`)."""
    try:
        return record_meta(raw)
    except BadRecord:
        return {}


def record_meta(raw: str) -> dict[str, Any]:
    if isinstance(raw, Undecodable):
        raise BadRecord("metadata is not UTF-8")
    try:
        value = json_decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadRecord("metadata is not JSON") from exc
    return value if isinstance(value, dict) else {}


def filter_pairs(where: Mapping[str, Any] | None) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs of a metadata filter, each key checked (both backends)."""
    for key, val in (where or {}).items():
        if not isinstance(key, str) or not key:
            raise InvalidInput("metadata filter keys must be non-empty strings")
        yield key, val


def where_sql(
    where: Mapping[str, Any] | None, time_range: TimeRange | None
) -> tuple[str, list[Any], list[tuple[str, Any]]]:
    """SQL predicate (prefixed with AND) for metadata equality and time range.

    Returns the clause, its parameters and the (key, value) pairs that must be checked in
    Python (arrays/objects, keys SQLite's JSON path cannot address, huge integers).
    """
    clauses: list[str] = []
    params: list[Any] = []
    post: list[tuple[str, Any]] = []
    for key, val in filter_pairs(where):
        if '"' in key or "\\" in key or any(ord(ch) < 0x20 for ch in key):
            # a JSON path cannot spell these (a NUL even makes it an error): check in Python
            post.append((key, val))
            continue
        path = '$."' + key + '"'
        if isinstance(val, bool):
            clauses.append("json_type(metadata, ?) = ?")
            params += [path, "true" if val else "false"]
        elif val is None:
            clauses.append("json_type(metadata, ?) = 'null'")
            params.append(path)
        elif isinstance(val, int) and not INT64_MIN <= val <= INT64_MAX:
            clauses.append("json_type(metadata, ?) IN ('integer', 'real')")
            params.append(path)
            post.append((key, val))
        elif isinstance(val, (int, float)):
            clauses.append(
                "json_type(metadata, ?) IN ('integer', 'real') AND json_extract(metadata, ?) = ?"
            )
            params += [path, path, val]
        elif isinstance(val, str) and "\x00" in val:
            # json_extract() stops a text at its first NUL: compare in Python
            clauses.append("json_type(metadata, ?) = 'text'")
            params.append(path)
            post.append((key, val))
        elif isinstance(val, str):
            clauses.append("json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?")
            params += [path, path, val]
        elif isinstance(val, (list, tuple, Mapping)):
            clauses.append("json_type(metadata, ?) = ?")
            params += [path, "object" if isinstance(val, Mapping) else "array"]
            post.append((key, val))
        else:
            raise InvalidInput(f"unsupported metadata filter value for {key!r}")
    for op, ms in time_range.bounds() if time_range is not None else ():
        clauses.append(f"ts_ms {op} ?")
        params.append(ms)
    sql = "".join(f" AND ({c})" for c in clauses)
    return sql, params, post


HIT_SQL = "SELECT rid, id, text, metadata, version, created_ms, ts_ms FROM records WHERE rid "


@functools.lru_cache(maxsize=128)
def hit_sql(n: int) -> str:
    """The result-row query for ``n`` rids (cached: the same few strings every search)."""
    return HIT_SQL + ("= ?" if n == 1 else "IN (" + ",".join("?" * n) + ")")


def hit_order(h: Hit) -> tuple[float, str]:
    return (-h.score, h.id)
