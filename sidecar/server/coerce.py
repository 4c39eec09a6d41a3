"""Params conversion: typed Structs from JSON objects, with errors a person can act on.

Lenient numbers: integral fields accept fractional JSON numbers (truncated). The reference
host sends values such as ``stat.mtimeMs`` (fractional) for integer fields; the Go daemon
rejected them. We truncate toward zero instead.

Strict names: v2 params refuse unknown fields (``protocol.base.Params``); the error names
the field, where it is, and the known field it most likely meant.
"""

from __future__ import annotations

import difflib
import math
import re
from functools import cache
from typing import Any

import msgspec
from msgspec import inspect as mi


@cache
def _info(kind: type) -> mi.Type:
    return mi.type_info(kind)


def coerce_integral_floats(value: Any, kind: type) -> Any:
    """Return ``value`` with finite floats replaced by ints wherever ``kind`` expects an int."""
    return _walk(value, _info(kind))


def _walk(value: Any, info: mi.Type) -> Any:
    if isinstance(info, mi.IntType):
        if isinstance(value, float) and math.isfinite(value):
            return int(value)
        return value
    if isinstance(info, mi.UnionType):
        # Only coerce when the union admits an int and not a float (e.g. `int | None`).
        kinds = info.types
        if any(isinstance(t, mi.FloatType) for t in kinds):
            return value
        for t in kinds:
            if isinstance(t, mi.IntType | mi.StructType | mi.ListType | mi.DictType):
                return _walk(value, t)
        return value
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f for f in info.fields}
        out = dict(value)
        for key, item in value.items():
            field = fields.get(key)
            if field is not None:
                out[key] = _walk(item, field.type)
        return out
    if isinstance(info, mi.ListType) and isinstance(value, list):
        return [_walk(item, info.item_type) for item in value]
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        return {k: _walk(v, info.value_type) for k, v in value.items()}
    return value


def convert_params(params: dict[str, Any], kind: type) -> Any:
    """Validate params into ``kind``; raises msgspec.ValidationError with a JSON path."""
    return msgspec.convert(coerce_integral_floats(params, kind), kind, strict=True)


class ParamsError(ValueError):
    """Params that do not fit the method's type; the message is meant for the caller.

    ``out_of_bounds``: the params have the right shape but a value is outside a bound the
    type declares (``k`` above its maximum, a fraction above 1): the client's input, not a
    malformed request."""

    def __init__(self, message: str, *, out_of_bounds: bool = False) -> None:
        super().__init__(message)
        self.out_of_bounds = out_of_bounds


# msgspec's wording for a value that breaks a Meta constraint (as opposed to a wrong type,
# a missing field or an unknown one): "Expected `int` <= 200 - at `$.k`".
_BOUND = re.compile(r"^Expected `[^`]+` (?:>=|<=|>|<|of length|that is a multiple of) ")


def convert_or_explain(params: dict[str, Any], kind: type) -> Any:
    """``convert_params`` whose validation errors say what to change."""
    try:
        return convert_params(params, kind)
    except msgspec.ValidationError as exc:
        message = str(exc)
        raise ParamsError(
            explain(message, kind), out_of_bounds=_BOUND.match(message) is not None
        ) from exc


_UNKNOWN_FIELD = re.compile(
    r"^Object contains unknown field `(?P<field>.*?)`(?: - at `(?P<path>[^`]*)`)?$"
)
_PATH_STEP = re.compile(r"\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[(?P<index>[^\]]*)\]")


def explain(message: str, kind: type) -> str:
    """msgspec's message, or for an unknown field: "unknown field `user_id`; did you mean
    `userId`?" (with the path when nested, and the known names when none is close)."""
    match = _UNKNOWN_FIELD.match(message)
    if match is None:
        return message
    field, path = match["field"], match["path"] or "$"
    where = "" if path == "$" else f" at `{path}`"
    known = _field_names_at(kind, path)
    if not known:
        return f"unknown field `{field}`{where}"
    guess = closest_name(field, known)
    if guess is not None:
        return f"unknown field `{field}`{where}; did you mean `{guess}`?"
    return f"unknown field `{field}`{where} (known fields: {', '.join(known)})"


# Names people reach for that are spelled differently here (the query of `assemble` is its
# `prompt`; a message's text is its `content`; `search` takes a `query`).
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "query": ("prompt",),
    "question": ("prompt", "query"),
    "prompt": ("query",),
    "text": ("content", "query"),
    "content": ("text",),
    "budget": ("tokenBudget",),
    "user": ("userId",),
    "session": ("sessionId",),
}


def closest_name(name: str, known: list[str]) -> str | None:
    """The known name ``name`` most likely meant: the same letters in another case or
    spelling convention (``user_id`` / ``userId``), else a near spelling."""

    def norm(text: str) -> str:
        return text.replace("_", "").replace("-", "").lower()

    by_norm = {norm(k): k for k in known}
    if norm(name) in by_norm:
        return by_norm[norm(name)]
    for meant in _SYNONYMS.get(norm(name), ()):
        if meant in known:
            return meant
    close = difflib.get_close_matches(norm(name), list(by_norm), n=1, cutoff=0.75)
    return by_norm[close[0]] if close else None


def _field_names_at(kind: type, path: str) -> list[str]:
    info: mi.Type | None = _info(kind)
    for step in _PATH_STEP.finditer(path[1:] if path.startswith("$") else path):
        info = _descend(info, step["name"])
        if info is None:
            return []
    info = _struct_of(info)
    return [f.encode_name for f in info.fields] if isinstance(info, mi.StructType) else []


def _descend(info: mi.Type | None, name: str | None) -> mi.Type | None:
    info = _struct_of(info)
    if isinstance(info, mi.StructType) and name is not None:
        return next((f.type for f in info.fields if f.encode_name == name), None)
    if isinstance(info, mi.ListType) and name is None:
        return info.item_type
    if isinstance(info, mi.DictType) and name is None:
        return info.value_type
    return None


def _struct_of(info: mi.Type | None) -> mi.Type | None:
    """The Struct, list or dict inside an optional (``T | None``) type."""
    if isinstance(info, mi.UnionType):
        for t in info.types:
            if isinstance(t, mi.StructType | mi.ListType | mi.DictType):
                return t
        return None
    return info
