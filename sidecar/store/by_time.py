"""Listing by time, decided once for both backends (docs/store.md, "Listing by time").

A listing is newest first: ``ts_ms`` descending, then collection and id ascending. Each
backend reads it from an index on ``(cid, ts_ms DESC, id)`` (or ``(cid, session_key,
ts_ms DESC, id)`` for one session): a continuation after a :class:`TimeKey` is, per
collection, one index range ``ts_ms <= upper`` read newest first, plus, for the key's own
collection, the records of the key's very millisecond after its id (:class:`Tie`, a range
too). Each range gives at most ``limit`` records; :func:`merge` keeps the first ``limit``
of their union. So a page reads at most ``limit`` rows per collection (plus the tie),
whatever the collection's size. What is decided here: the arguments' checks, those
ranges, the merge, and the counter of rows read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sidecar.store.errors import InvalidInput
from sidecar.store.record_keys import storable_session
from sidecar.store.types import Record, TimeKey, TimeQuery

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Range:
    """``collection``'s records with ``lower <= ts_ms <= upper``, newest first."""

    collection: str
    lower: int
    upper: int


@dataclass(frozen=True, slots=True)
class Tie:
    """``collection``'s records with ``ts_ms == ts_ms`` and an id after ``after_id``."""

    collection: str
    ts_ms: int
    after_id: str


@dataclass(frozen=True, slots=True)
class Plan:
    ranges: list[Range]
    tie: Tie | None
    session: str | None
    exclude_marks: int
    limit: int


def _bound(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be an integer (epoch milliseconds) or None")
    return value


def check_query(query: TimeQuery) -> TimeQuery | None:
    """The query with its bounds within SQL's integers, or None when no record can match
    (a session no record can carry, ``since`` after ``until``)."""
    names: object = query.collections
    if isinstance(names, str) or not all(isinstance(c, str) for c in query.collections):
        raise InvalidInput("collections must be a sequence of collection names")
    marks = query.exclude_marks
    if isinstance(marks, bool) or not isinstance(marks, int) or marks < 0:
        raise InvalidInput("exclude_marks must be a non-negative integer")
    session = query.session
    if session is not None:
        if not isinstance(session, str):
            raise InvalidInput("session must be a string or None")
        if storable_session(session) is None:
            return None
    since = _bound(query.since_ms, "since_ms")
    until = _bound(query.until_ms, "until_ms")
    lo = INT64_MIN if since is None else max(since, INT64_MIN)
    hi = INT64_MAX if until is None else min(until, INT64_MAX)
    if lo > hi or lo > INT64_MAX or hi < INT64_MIN:
        return None
    names = tuple(dict.fromkeys(query.collections))
    return replace(query, collections=names, since_ms=lo, until_ms=hi)


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def _check_key(after: TimeKey) -> None:
    if (
        not isinstance(after, TimeKey)
        or isinstance(after.ts_ms, bool)
        or not isinstance(after.ts_ms, int)
        or not isinstance(after.collection, str)
        or not isinstance(after.id, str)
    ):
        raise InvalidInput("after must be a TimeKey (ts_ms, collection, id) or None")


def plan(query: TimeQuery, after: TimeKey | None, limit: int) -> Plan | None:
    """The index ranges of a page: ``query`` as :func:`check_query` returned it, existing
    collections only. None when nothing can follow ``after``."""
    limit = check_limit(limit)
    lo, hi = query.since_ms, query.until_ms
    assert lo is not None and hi is not None  # check_query set both
    if after is not None:
        _check_key(after)
        if after.ts_ms > INT64_MAX:
            after = None  # every stored time is older: the whole listing follows it
        elif after.ts_ms < INT64_MIN:
            return None
    ranges: list[Range] = []
    tie: Tie | None = None
    for name in query.collections:
        upper = hi
        if after is not None:
            # older than the key's millisecond; the same millisecond too for a collection
            # after the key's (same time, greater collection: later in the order)
            same_ms = name > after.collection
            upper = min(hi, after.ts_ms if same_ms else after.ts_ms - 1)
            if name == after.collection and lo <= after.ts_ms <= hi:
                tie = Tie(name, after.ts_ms, after.id)
        if upper >= lo:
            ranges.append(Range(name, lo, upper))
    return Plan(ranges, tie, query.session, query.exclude_marks, limit)


def order_key(rec: Record) -> tuple[int, str, str]:
    return (-rec.ts_ms, rec.collection, rec.id)


def merge(found: Iterable[Record], limit: int) -> list[Record]:
    """The first ``limit`` of records read from several ranges, newest first."""
    return sorted(found, key=order_key)[:limit]


def key_of(rec: Record) -> TimeKey:
    return TimeKey(rec.ts_ms, rec.collection, rec.id)


def check_names(collections: Sequence[str], what: str = "collections") -> list[str]:
    if isinstance(collections, str) or not all(isinstance(c, str) for c in collections):
        raise InvalidInput(f"{what} must be a sequence of names")
    return list(dict.fromkeys(collections))


def check_histogram(width_ms: object, lo_ms: object, hi_ms: object) -> tuple[int, int, int]:
    """``time_histogram``'s bounds: a positive width, ``0 <= lo <= hi`` (buckets are
    ``ts // width``, the same in SQL's truncating division for non-negative times)."""
    values = (width_ms, lo_ms, hi_ms)
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise InvalidInput("width_ms, lo_ms and hi_ms must be integers")
    width, lo, hi = (int(v) for v in values)  # type: ignore[call-overload]
    if width < 1 or lo < 0 or hi < lo or hi > INT64_MAX:
        raise InvalidInput("time_histogram needs width_ms >= 1 and 0 <= lo_ms <= hi_ms")
    return width, lo, hi


def check_field(key: object) -> str:
    """A metadata key a query names in its SQL text: plain characters only."""
    if (
        not isinstance(key, str)
        or not key
        or any(ch in key for ch in "\"'\\")
        or any(ord(ch) < 0x20 for ch in key)
    ):
        raise InvalidInput("the metadata key must be a non-empty string without quotes")
    return key


class ReadCounter:
    """Record rows a store's reads fetched from its database since it opened: what a
    listing costs in rows, countable in tests (no timing)."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self._n += n

    @property
    def value(self) -> int:
        return self._n


def scope_sql(session: str | None, marks: int, *, column: str, mark: str) -> tuple[str, list[Any]]:
    """The clauses (each `` AND ...``) that keep a listing to ``session`` and to records
    without ``marks``, and their parameters: ``column`` prefixes the column names (a
    table alias), ``mark`` is the dialect's placeholder."""
    sql = ""
    args: list[Any] = []
    if session is not None:
        sql += f" AND {column}session_key = {mark}"
        args.append(session)
    if marks:
        sql += f" AND ({column}marks & {mark}) = 0"
        args.append(marks)
    return sql, args
