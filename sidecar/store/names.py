"""Collection names, ids, metadata and vectors: validation and the naming rules.

The dimension of a collection is decided by its name. Namespaces
are matched exactly: ``user:u1`` matches ``user:u1`` and ``user:u1:<anything>`` but never
``user:u10``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.store.errors import InvalidInput
from sidecar.store.timestamps import ts_number

MAX_COLLECTION_BYTES = 256
# A session id or namespace becomes part of collection names such as
# ``session_summary:<sid>`` and ``elevated:user:<ns>``: this leaves room for the prefix.
MAX_NAME_PART_BYTES = 200
MAX_ID_BYTES = 1024
MAX_METADATA_DEPTH = 64

# Collections whose records carry no embedding (the reference stores a 1-dim zero vector).
VECTORLESS_EXACT = frozenset(
    {"authored:hard", "authored:soft", "_internal:lifecycle_journal", "_tier_dirty"}
)
VECTORLESS_PREFIXES = ("session_edge:", "session_state:")

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

KIND_VECTOR = "vector"
KIND_VECTORLESS = "vectorless"


def dims_for_collection(name: str, embed_dims: int) -> int:
    """Dimension of a collection, decided by its name.

    ``<c>:64d`` -> 64, ``<c>:256d`` -> 256; the authored hard/soft collections, the lifecycle
    journal, ``session_edge:*``, ``session_state:*`` and ``_tier_dirty`` -> 1; everything else
    -> the embedder's dimension.
    """
    if name.endswith(":64d"):
        return 64
    if name.endswith(":256d"):
        return 256
    if name in VECTORLESS_EXACT or name.startswith(VECTORLESS_PREFIXES):
        return 1
    return embed_dims


def kind_for_dims(dims: int) -> str:
    return KIND_VECTORLESS if dims == 1 else KIND_VECTOR


def _has_control(s: str) -> bool:
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in s)


def _utf8_len(s: str, what: str) -> int:
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode text: {exc.reason}") from exc


class InvalidName(InvalidInput, ValueError):
    """A collection name, session id or namespace that is not acceptable (a ValueError
    too, so memory code that validates its arguments with ValueError reports it alike)."""


def _given_str(
    value: object, what: str, error: type[InvalidInput], *, blank_ok: bool = True
) -> tuple[str, int]:
    """``value``, a non-empty string (not blank either unless ``blank_ok``), and its
    length in UTF-8 bytes."""
    if not isinstance(value, str):
        raise error(f"{what} must be a string, got {type(value).__name__}")
    if not (value if blank_ok else value.strip()):
        raise error(f"{what} is required")
    return value, _utf8_len(value, what)


def validate_collection(name: object) -> str:
    name, n = _given_str(name, "collection name", InvalidName)
    if n > MAX_COLLECTION_BYTES:
        raise InvalidName(
            f"collection name is {n} bytes; the limit is {MAX_COLLECTION_BYTES} bytes",
            collection=name[:64],
        )
    _check_name_chars(name, "collection name")
    return name


def _check_name_chars(name: str, what: str) -> None:
    """No control characters, no path separators and no ``..`` segment: a name is never a
    path, and nothing a client sends may look like one (or escape a namespace by it)."""
    if _has_control(name):
        raise InvalidName(f"{what} {name[:64]!r} contains control characters")
    if "/" in name or "\\" in name:
        raise InvalidName(f"{what} {name[:64]!r} contains a path separator (/ or \\)")
    if ".." in name.split(":"):
        raise InvalidName(f"{what} {name[:64]!r} contains a '..' segment")


def validate_name_part(value: object, what: str, limit: int = MAX_NAME_PART_BYTES) -> str:
    """A session id, namespace or user id: a non-blank string of at most ``limit`` bytes
    with the characters a collection name allows."""
    value, n = _given_str(value, what, InvalidName, blank_ok=False)
    if n > limit:
        raise InvalidName(f"{what} is {n} bytes; the limit is {limit} bytes")
    _check_name_chars(value, what)
    return value


def validate_id(record_id: object) -> str:
    record_id, n = _given_str(record_id, "record id", InvalidInput)
    if n > MAX_ID_BYTES:
        raise InvalidInput(f"record id is {n} bytes; the limit is {MAX_ID_BYTES} bytes")
    if "\x00" in record_id:
        raise InvalidInput("record id contains a NUL character")
    return record_id


def validate_text(text: object) -> str:
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}")
    _utf8_len(text, "text")
    return text


def _check_json(value: object, path: str, depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInput(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels at {path}")
    t = type(value)
    if t is int or t is bool or value is None:
        return
    if t is dict:  # the common case, without the (slow) Mapping ABC check
        for key, item in value.items():  # type: ignore[attr-defined]
            if not isinstance(key, str):
                raise InvalidInput(f"metadata key {key!r} at {path} is not a string")
            _utf8_len(key, "metadata key at " + path)
            ti = type(item)
            if (ti is int or ti is bool or item is None) and depth < MAX_METADATA_DEPTH:
                continue  # a scalar within the depth limit: no path string to build
            _check_json(item, f"{path}.{key}", depth + 1)
        return
    if isinstance(value, (bool, int)):
        return
    if isinstance(value, str):
        _utf8_len(value, f"metadata value at {path}")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"metadata value at {path} is not a finite number")
        return
    _check_container(value, path, depth)


def _check_container(value: object, path: str, depth: int) -> None:
    """Lists, tuples and mappings other than a plain dict (the slow, rare path)."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"metadata key {key!r} at {path} is not a string")
            _utf8_len(key, f"metadata key at {path}")
            _check_json(item, f"{path}.{key}", depth + 1)
        return
    raise InvalidInput(f"metadata value at {path} has unsupported type {type(value).__name__}")


def validate_metadata(metadata: object) -> dict[str, Any]:
    """Metadata must be a JSON object (str keys, finite numbers). Returns a plain dict."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be an object, got {type(metadata).__name__}")
    _check_json(metadata, "metadata", 0)
    return dict(metadata)


def float32_row(vector: object, what: str) -> npt.NDArray[np.float32]:
    """``vector`` as one float32 row (no copy when it is one); InvalidInput naming
    ``what`` otherwise."""
    if type(vector) is np.ndarray and vector.dtype == np.float32:
        arr: npt.NDArray[np.float32] = vector
    else:
        try:
            arr = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"{what} is not numeric: {exc}") from exc
    if arr.ndim != 1:
        raise InvalidInput(f"{what} must be 1-dimensional")
    return arr


def as_vector(vector: object, dims: int, collection: str) -> npt.NDArray[np.float32]:
    """A float32 vector of exactly ``dims`` finite values."""
    arr = float32_row(vector, f"vector for collection {collection}")
    if arr.shape[0] != dims:
        raise InvalidInput(
            f"record vector dimensions {arr.shape[0]} do not match collection {collection} "
            f"dimensions {dims}",
            collection=collection,
            expected=dims,
            got=int(arr.shape[0]),
        )
    # A NaN or an infinity makes the sum non-finite, so a finite sum proves every value
    # finite (a non-finite sum may also be an overflow: then check element by element).
    if not math.isfinite(float(np.add.reduce(arr))) and not np.all(np.isfinite(arr)):
        raise InvalidInput(f"vector for collection {collection} contains NaN or infinity")
    out: npt.NDArray[np.float32] = np.ascontiguousarray(arr)
    return out


def normalized(vec: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Unit-length copy (a zero vector stays zero, so its cosine with anything is 0)."""
    norm = float(np.linalg.norm(vec))
    if norm < 1e-12:
        return np.zeros_like(vec, dtype=np.float32)
    return (vec / norm).astype(np.float32, copy=False)


def normalize_rows(mat: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms < 1e-12] = np.inf
    out: npt.NDArray[np.float32] = (mat / norms).astype(np.float32, copy=False)
    return out


def in_namespace(collection: str, namespace: str) -> bool:
    """Exact namespace match: the name itself or ``<namespace>:<more>``."""
    return collection == namespace or collection.startswith(namespace + ":")


def filter_namespace(names: Iterable[str], namespace: str) -> list[str]:
    return [n for n in names if in_namespace(n, namespace)]


def explicit_ts(metadata: Mapping[str, Any]) -> int | None:
    """``metadata["ts"]`` as integer milliseconds when it is a number or a numeric string."""
    number = ts_number(metadata.get("ts"))
    if number is None:
        return None
    value = int(number)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def ts_from_metadata(metadata: Mapping[str, Any], default: int) -> int:
    """The record timestamp used by time-range filters (ms).

    ``metadata["ts"]`` when it is a number or a numeric string (milliseconds, truncated),
    otherwise ``default`` (the creation time).
    """
    ts = explicit_ts(metadata)
    return default if ts is None else ts


def json_equal(a: object, b: object) -> bool:
    """Metadata equality as libravdb does it: deep-equal, numbers by value, bool is not int."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return False


def metadata_matches(meta: Mapping[str, Any], where: Iterable[tuple[str, Any]]) -> bool:
    """The store's ``where`` semantics: every key present and :func:`json_equal`."""
    return all(k in meta and json_equal(meta[k], v) for k, v in where)
