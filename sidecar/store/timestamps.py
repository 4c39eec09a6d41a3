"""The record timestamps the memory accepts: epoch milliseconds from 1970-01-01T00:00:00Z
(0) to 9999-12-31T23:59:59.999Z (:data:`TS_MAX_MS`), bounds included.

Why these bounds: every accepted time is a calendar date with a four-digit year, which is
what every reader of a ``ts`` can represent (Python's ``datetime``, ``time.strftime``,
JavaScript's ``Date``, ISO 8601 without expanded years): a record dated past them broke
``memory.stats`` for every namespace. The usual mistake they catch is a unit: the current
time in microseconds is in the year 55,000, in nanoseconds past the year 10^7. A time in
seconds (January 1970 read as milliseconds) cannot be told from a real one and is kept.

Entries that take a time check it here (v2 ``ingest`` messages, v1 writes whose metadata
holds a numeric ``ts``, ``libravdb import``); records stored before the check are read as
they are, and ``memory.stats`` leaves the ones outside the range out of its timeline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sidecar.store.errors import InvalidInput

TS_MIN_MS = 0
TS_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
RANGE_TEXT = (
    f"epoch milliseconds from {TS_MIN_MS} (1970-01-01) to {TS_MAX_MS} (9999-12-31T23:59:59.999Z)"
)


def ts_number(raw: object) -> float | None:
    """``metadata["ts"]`` as the store reads it, a record's time: a finite number or a
    numeric string (milliseconds); None for anything else (no ``ts``, a date string, a
    bool, "nan")."""
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        value = raw
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            return None
    else:
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def in_range(ts_ms: int) -> bool:
    return TS_MIN_MS <= ts_ms <= TS_MAX_MS


def _unit_hint(value: float) -> str:
    """A guess at the unit of a value past the range (microseconds, nanoseconds)."""
    for unit, factor in (("microseconds", 1_000), ("nanoseconds", 1_000_000)):
        if TS_MIN_MS <= value / factor <= TS_MAX_MS:
            return f": it looks like {unit}"
    return ""


def ts_problem(value: object) -> str | None:
    """Why ``value`` is not an accepted timestamp (None when it is one): an integer, not a
    bool, within the range."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer number of {RANGE_TEXT}"
    if in_range(value):
        return None
    hint = _unit_hint(value) if value > TS_MAX_MS else ""
    return f"{value} is outside the accepted range, {RANGE_TEXT}{hint}"


def metadata_ts_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why ``metadata["ts"]`` is not an accepted timestamp, for the values the store reads
    as the record's time (a number or a numeric string, milliseconds; the fraction of a
    float is dropped). Anything else there (no ``ts``, a date string, null) is not the
    record's time and is accepted as it was."""
    raw = metadata.get("ts")
    value = ts_number(raw)
    if value is None or TS_MIN_MS <= value < TS_MAX_MS + 1:
        return None
    hint = _unit_hint(value) if value > TS_MAX_MS else ""
    return f"metadata.ts {raw!r} is outside the accepted range, {RANGE_TEXT}{hint}"


def check_metadata_ts(metadata: Mapping[str, Any]) -> None:
    """:func:`metadata_ts_problem` as a refusal (``InvalidInput``, -32009)."""
    problem = metadata_ts_problem(metadata)
    if problem is not None:
        raise InvalidInput(problem)
