"""Lenient numeric params: integral fields accept fractional JSON numbers (truncated).

The reference host sends values such as ``stat.mtimeMs`` (fractional) for integer
fields; the Go daemon rejected them. We truncate toward zero instead.
"""

from __future__ import annotations

import math
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
