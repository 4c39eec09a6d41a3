"""The opaque cursors of keyset-paged listings (``memory.list``, ``sessions.list``): the
last item's sort key as compact JSON in URL-safe base64 without padding. A client only
ever hands back what a page returned; anything else is refused as input, never guessed."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sidecar.memory.core.errors import MemoryInputError

T = TypeVar("T")


# No slots: a slotted dataclass is a copy of the class, and Generic's machinery then
# fails on it (``super(type, obj)``) when a page is made through ``Page[T](...)``.
@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing: its items, how many the whole listing holds, and the cursor
    of the next page ("" on the last)."""

    items: list[T]
    total: int
    next_cursor: str


def encode_cursor(parts: Sequence[int | str]) -> str:
    raw = json.dumps(list(parts), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, types: Sequence[type], method: str) -> tuple[Any, ...]:
    """The parts of ``cursor``, each of the matching type of ``types``; ``method`` names
    the listing in the error when it is not a cursor that listing returned."""
    try:
        pad = "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(cursor + pad))
        if (
            isinstance(parts, list)
            and len(parts) == len(types)
            and all(isinstance(p, t) for p, t in zip(parts, types, strict=True))
        ):
            return tuple(parts)
    except (ValueError, TypeError):
        pass
    raise MemoryInputError(f"cursor is not one that {method} returned")
