"""``memory.stats``'s timeline: records per calendar bucket (UTC day, ISO week, month).

A bucket is an integer key, consecutive from one bucket to the next (days since the epoch;
Monday-based weeks since the week of 1970-01-01; ``year * 12 + month - 1``), so the rows
kept are a range of keys: at most :data:`MAX_BUCKETS` of them are built, whatever the span
between the first record and the last (a day timeline from 1970 to 9999 once built three
million rows to keep 260), and the records before them are a sum. Stamps outside the
accepted range (``sidecar.store.timestamps``: records stored before ingest checked it) are
left out and counted apart; every stamp charted is a date with a four-digit year.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from sidecar.store.timestamps import in_range

Bucket = Literal["day", "week", "month"]
# A timeline longer than this keeps its newest buckets; older records are counted in
# ``earlier`` (ten years of months, five of weeks, eight months of days).
MAX_BUCKETS = 260
DAY_MS = 86_400_000
_EPOCH = dt.date(1970, 1, 1)
# 1970-01-01 was a Thursday: the Monday of its ISO week is three days earlier.
_WEEK_SHIFT = 3


@dataclass(frozen=True, slots=True)
class TimelineRow:
    label: str  # 2026-11 (month), 2026-W48 (ISO week), 2026-11-25 (day)
    start_ms: int
    records: int


def split_stamps(stamps: Iterable[int]) -> tuple[list[int], int]:
    """(the stamps within the accepted range, how many others)."""
    kept: list[int] = []
    outside = 0
    for ts in stamps:
        if in_range(ts):
            kept.append(ts)
        else:
            outside += 1
    return kept, outside


def _day(key: int) -> dt.date:
    return _EPOCH + dt.timedelta(days=key)


def _keys(days: Counter[int], bucket: Bucket) -> Counter[int]:
    """Counts per day (days since the epoch) -> counts per bucket key."""
    if bucket == "day":
        return days
    out: Counter[int] = Counter()
    for day, n in days.items():
        if bucket == "week":
            out[(day + _WEEK_SHIFT) // 7] += n
        else:
            date = _day(day)
            out[date.year * 12 + date.month - 1] += n
    return out


def _row(key: int, bucket: Bucket, records: int) -> TimelineRow:
    if bucket == "day":
        start = _day(key)
        label = start.strftime("%Y-%m-%d")
    elif bucket == "week":
        start = _day(key * 7 - _WEEK_SHIFT)
        year, week, _ = start.isocalendar()
        label = f"{year}-W{week:02d}"
    else:
        start = dt.date(key // 12, key % 12 + 1, 1)
        label = f"{start.year:04d}-{start.month:02d}"
    return TimelineRow(label, (start - _EPOCH).days * DAY_MS, records)


def timeline(stamps: Iterable[int], bucket: Bucket) -> tuple[list[TimelineRow], int]:
    """(contiguous rows from the first bucket to the last, at most :data:`MAX_BUCKETS`, the
    newest kept; the records before the rows kept). Stamps outside the accepted range are
    ignored (:func:`split_stamps` counts them)."""
    return timeline_of_days(Counter(ts // DAY_MS for ts in stamps if in_range(ts)), bucket)


def timeline_of_days(days: Mapping[int, int], bucket: Bucket) -> tuple[list[TimelineRow], int]:
    """:func:`timeline` from the records per day (days since the epoch, within the accepted
    range): what the store's ``time_histogram`` counts with ``DAY_MS`` buckets."""
    days = Counter({day: n for day, n in days.items() if n})
    if not days:
        return [], 0
    counts = _keys(days, bucket)
    last = max(counts)
    first = max(min(counts), last - MAX_BUCKETS + 1)
    earlier = sum(n for key, n in counts.items() if key < first)
    return [_row(key, bucket, counts.get(key, 0)) for key in range(first, last + 1)], earlier
