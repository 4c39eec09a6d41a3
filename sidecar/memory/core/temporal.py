"""Temporal questions and dream questions: detection and a query plan (pure).

:func:`plan_temporal` reads a query and returns a :class:`TemporalPlan`:

* ``kinds``: which temporal question forms matched (each a whole-word pattern, case
  insensitive): ``when`` ("when did", "when is", "what date", "what time", "which
  year/month/day"), ``how_long`` ("how long", "how many days/weeks/months/years"),
  ``order`` ("before", "after", "since", "until", "between", "earlier", "later",
  "prior to"), ``first`` ("first", "earliest", "which came first", "originally") and
  ``last`` ("last time", "most recent(ly)", "latest"). The reference activated its
  temporal path on any single match and treated every "first" as a comparison (B14);
  here the kinds only shape the plan, and "first" sets an ordering preference only in a
  question form ("when did I first", "which ... first", "the first time").
* ``windows``: absolute time windows from date anchors, resolved against ``now_ms``
  (the event time of the query, epoch ms, UTC):

  - full dates: ``2023-05-03``, ``May 3, 2023``, ``3 May 2023``, ``3rd of May, 2023``,
    ``May 3rd`` (no year: the latest such date not after ``now``);
  - months: ``May 2023``, ``in May`` (no year: the latest May not after ``now``);
    month names only count with a year or after "in"/"during"/"since"/... so the modal
    "may" is never a date;
  - years: ``in 2023``, ``2022`` (19xx/20xx as a whole word);
  - relative to now: ``today``, ``yesterday``, ``last night``, ``this/last/past
    week|weekend|month|year``, ``N days/weeks/months/years ago`` (N a digit or a number
    word), ``last <weekday>``, ``this/last summer|winter|spring|fall`` (the season's
    three months), ``recently`` (the last two weeks);
  - relative to an absolute date: ``the day/week/weekend/month before|after <date>``,
    ``N days/weeks before|after <date>``; ``before/until <date>`` is the 90 days before
    it, ``after <date>`` runs from its end and ``since <date>`` from its start, up to a
    year later and never beyond now.

  Each window has a ``granularity`` (the span of the anchor). A record said inside the
  window, or up to ``mention_slack`` after it (people talk about an event after it
  happens), has affinity 1; outside, the affinity decays exponentially with the distance
  in units of the granularity. :meth:`TemporalPlan.affinity` is the best affinity over the
  windows (0 when there are none).
* ``order``: ``"asc"`` for first/earliest questions, ``"desc"`` for last/latest ones,
  else ``None``.
* ``slots``: for comparison and duration questions ("which came first, A or B", "how
  long between A and B", "how many days after A did B"), the content terms of each side
  (at most two), so the assembler can make sure both sides are represented.
* ``content_query``: the query with the date anchors removed, for the lexical channel
  (dates in the question otherwise match unrelated numbers and the modal "may").

:func:`mentioned_windows` resolves the date anchors a turn mentions against when it was
said ("yesterday" said on 8 May is 7 May); ingest stores them with the turn
(``mentions``) and the ranking's temporal affinity counts them
(:meth:`TemporalPlan.mention_affinity`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np
import numpy.typing as npt

from sidecar.memory.core.analyzer import STOPWORDS, analyze

DAY_MS = 86_400_000
GRANULARITY_MS = {
    "day": DAY_MS,
    "weekend": 3 * DAY_MS,
    "week": 7 * DAY_MS,
    "month": 30 * DAY_MS,
    "year": 365 * DAY_MS,
}
Granularity = Literal["day", "weekend", "week", "month", "year"]
Order = Literal["asc", "desc"]

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
_MONTH_NUM = {m: i + 1 for i, m in enumerate(MONTHS)} | _MONTH_ABBR
_MONTH_ALT = "|".join(sorted(list(MONTHS) + [m for m in _MONTH_ABBR if m != "may"], key=len)[::-1])
_MONTH_RE = rf"(?:{_MONTH_ALT})\.?"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "few": 3,
    "a few": 3,
    "several": 3,
}
_NUM_RE = (
    r"(?:\d{1,3}|a few|a couple of|couple of|few|several|an?|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT_RE = r"(?:day|week|weekend|month|year)s?"
_DAY_RE = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR_RE = r"(?:19|20)\d\d"

# Date expressions, most specific first. Each yields (start, granularity).
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_MDY = re.compile(rf"\b({_MONTH_RE})\s+({_DAY_RE})(?:,?\s+({_YEAR_RE}))?\b", re.I)
_DMY = re.compile(rf"\b({_DAY_RE})(?:\s+of)?\s+({_MONTH_RE}),?(?:\s+({_YEAR_RE}))?\b", re.I)
_MY = re.compile(rf"\b({_MONTH_RE}),?\s+({_YEAR_RE})\b", re.I)
_IN_MONTH = re.compile(
    rf"\b(?:in|during|since|until|by|of|early|mid|late|this|last|past)\s+({_MONTH_RE})\b(?!\s+\d)",
    re.I,
)
_YEAR = re.compile(rf"\b({_YEAR_RE})\b")
_REL = re.compile(
    r"\b(?:(today|tonight|this morning|this afternoon|this evening)"
    r"|(yesterday|last night)"
    r"|(?:(this|last|past|previous)\s+(week|weekend|month|year|summer|winter|spring|fall|autumn))"
    rf"|(?:({_NUM_RE})\s+({_UNIT_RE})\s+ago)"
    rf"|(?:last\s+({'|'.join(_WEEKDAYS)}))"
    r"|(recently|lately))\b",
    re.I,
)
_OFFSET = re.compile(
    rf"\b(?:the\s+)?(?:({_NUM_RE})\s+)?(day|week|weekend|month|year)s?\s+(before|after|prior\s+to)\s*$",
    re.I,
)
_BARE_REL = re.compile(r"\b(before|after|since|until|till|prior\s+to|by)\s*$", re.I)

_KIND_PATTERNS: dict[str, re.Pattern[str]] = {
    "when": re.compile(
        r"\b(?:when|what\s+(?:date|day|time|year|month)|which\s+(?:date|day|year|month)"
        r"|how\s+long\s+ago)\b",
        re.I,
    ),
    "how_long": re.compile(
        r"\b(?:how\s+long|how\s+many\s+(?:days|weeks|months|years|hours|minutes)"
        r"|how\s+much\s+time)\b",
        re.I,
    ),
    "order": re.compile(
        r"\b(?:before|after|since|until|between|earlier|later|prior\s+to|then)\b", re.I
    ),
    "first": re.compile(
        r"\b(?:when\b[^?.!]*\bfirst|(?:which|what|who)\b[^?.!]*\bfirst\s*(?=[?,.!]|$)"
        r"|(?:for\s+)?the\s+first\s+time|earliest|(?:came|happened|did)\s+first|\bor\b[^?.!]*\bfirst\s*(?=[?.!]|$)"
        r"|originally)\b",
        re.I,
    ),
    "last": re.compile(
        r"\b(?:(?:the\s+)?last\s+time|most\s+recent(?:ly)?|latest|the\s+last\s+(?:thing|one))\b",
        re.I,
    ),
}

_SLOT_STOP = frozenset(
    [
        "which",
        "what",
        "when",
        "who",
        "whom",
        "how",
        "long",
        "many",
        "much",
        "days",
        "weeks",
        "months",
        "years",
        "time",
        "first",
        "earlier",
        "later",
        "last",
        "came",
        "happened",
        "happen",
        "take",
        "took",
        "did",
        "does",
        "do",
        "first",
        "second",
        "ago",
        "since",
        "between",
        "before",
        "after",
        "then",
        "than",
        "vs",
        "versus",
    ]
)


# --------------------------------------------------------------------------- windows


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``[start_ms, end_ms)`` with the granularity of the anchor it came from."""

    start_ms: int
    end_ms: int
    granularity: Granularity
    anchor: str = ""

    def distance_ms(self, ts_ms: int, mention_slack_ms: int = 0) -> int:
        if ts_ms < self.start_ms:
            return self.start_ms - ts_ms
        if ts_ms >= self.end_ms + mention_slack_ms:
            return ts_ms - (self.end_ms + mention_slack_ms) + 1
        return 0


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _add_months(dt: datetime, n: int) -> datetime:
    idx = dt.year * 12 + (dt.month - 1) + n
    return _month_start(idx // 12, idx % 12 + 1)


def _day(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None


def _month_of(token: str) -> int:
    t = token.lower().rstrip(".")
    return _MONTH_NUM.get(t) or _MONTH_ABBR.get(t[:3], 0)


def _day_num(token: str) -> int:
    return int(re.sub(r"\D", "", token) or 0)


def _latest_not_after(now: datetime, month: int, day: int | None) -> datetime | None:
    for year in (now.year, now.year - 1):
        dt = _day(year, month, day or 1)
        if dt is not None and dt <= now:
            return dt
    return _day(now.year - 1, month, day or 1)


def _number(text: str | None) -> int:
    if not text:
        return 1
    t = text.lower().strip()
    if t.isdigit():
        return int(t)
    return _NUMBER_WORDS.get(t, 1)


@dataclass(frozen=True, slots=True)
class _Anchor:
    start: datetime
    granularity: Granularity
    span: tuple[int, int]  # character span in the query
    text: str
    end: datetime | None = None  # open-ended relations ("since X") set it explicitly


def _window(anchor: _Anchor) -> tuple[datetime, datetime]:
    s = anchor.start
    if anchor.end is not None:
        return s, anchor.end
    if anchor.granularity == "day":
        return s, s + timedelta(days=1)
    if anchor.granularity == "weekend":
        return s, s + timedelta(days=3)
    if anchor.granularity == "week":
        return s, s + timedelta(days=7)
    if anchor.granularity == "month":
        return s, _add_months(s, 1)
    return s, datetime(s.year + 1, 1, 1, tzinfo=UTC)


def _overlaps(span: tuple[int, int], taken: Iterable[tuple[int, int]]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in taken)


def _absolute_anchors(query: str, now: datetime) -> list[_Anchor]:
    out: list[_Anchor] = []
    taken: list[tuple[int, int]] = []

    def add(start: datetime | None, gran: Granularity, m: re.Match[str]) -> None:
        if start is None or _overlaps(m.span(), taken):
            return
        taken.append(m.span())
        out.append(_Anchor(start, gran, m.span(), m.group(0)))

    for m in _ISO.finditer(query):
        add(_day(int(m[1]), int(m[2]), int(m[3])), "day", m)
    for m in _MDY.finditer(query):
        month, day = _month_of(m[1]), _day_num(m[2])
        # "may 5" without a year or an ordinal is too often the modal verb ("may 2 people")
        if (
            m[1].lower() == "may"
            and not m[3]
            and not re.search(r"\d(?:st|nd|rd|th)", m[2])
            and not re.search(r"\b(?:on|in|since|until|before|after|by)\s+may\b", query, re.I)
        ):
            continue
        year = int(m[3]) if m[3] else None
        dt = _day(year, month, day) if year else _latest_not_after(now, month, day)
        add(dt, "day", m)
    for m in _DMY.finditer(query):
        month, day = _month_of(m[2]), _day_num(m[1])
        year = int(m[3]) if m[3] else None
        if m[2].lower() == "may" and not year and "of" not in m[0].lower():
            continue
        dt = _day(year, month, day) if year else _latest_not_after(now, month, day)
        add(dt, "day", m)
    for m in _MY.finditer(query):
        add(_month_start(int(m[2]), _month_of(m[1])), "month", m)
    for m in _IN_MONTH.finditer(query):
        month = _month_of(m[1])
        dt = _latest_not_after(now, month, None)
        if dt is not None:
            # keep "since/until/by" outside the anchor: _shift reads them as relations
            relation = m[0].lower().startswith(("since", "until", "by"))
            span = (m.start(1), m.end(1)) if relation else m.span()
            if not _overlaps(span, taken):
                taken.append(span)
                out.append(_Anchor(_month_start(dt.year, month), "month", span, m[1]))
    for m in _YEAR.finditer(query):
        add(datetime(int(m[1]), 1, 1, tzinfo=UTC), "year", m)
    return out


_SEASON_MONTH = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def _this_or_last(unit: str, back: int, now: datetime) -> list[tuple[datetime, Granularity]]:
    """(start, granularity) of "this/last week|weekend|month|year|<season>" (back 0 or 1)."""
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
    if unit == "week":
        return [(today - timedelta(days=today.weekday() + 7 * back), "week")]
    if unit == "weekend":
        sat = today - timedelta(days=(today.weekday() - 5) % 7)
        if back and sat >= today - timedelta(days=1):
            sat -= timedelta(days=7)
        return [(sat - timedelta(days=1), "weekend")]
    if unit == "month":
        return [(_add_months(_month_start(now.year, now.month), -back), "month")]
    if unit == "year":
        return [(datetime(now.year - back, 1, 1, tzinfo=UTC), "year")]
    # a season: a three-month window
    month = _SEASON_MONTH[unit]
    year = now.year - back if month <= now.month else now.year - 1 - back
    return [(_add_months(_month_start(year, month), i), "month") for i in range(3)]


def _relative_anchors(query: str, now: datetime) -> list[_Anchor]:
    out: list[_Anchor] = []
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
    for m in _REL.finditer(query):
        span, text = m.span(), m.group(0)
        if m[1]:
            out.append(_Anchor(today, "day", span, text))
        elif m[2]:
            out.append(_Anchor(today - timedelta(days=1), "day", span, text))
        elif m[3]:
            back = 0 if m[3].lower() == "this" else 1
            out += [_Anchor(s, g, span, text) for s, g in _this_or_last(m[4].lower(), back, now)]
        elif m[6]:
            n, unit = _number(m[5]), m[6].lower().rstrip("s")
            if unit == "day":
                out.append(_Anchor(today - timedelta(days=n), "day", span, text))
            elif unit in ("week", "weekend"):
                out.append(_Anchor(today - timedelta(days=7 * n + 3), "week", span, text))
            elif unit == "month":
                out.append(
                    _Anchor(_add_months(_month_start(now.year, now.month), -n), "month", span, text)
                )
            else:
                out.append(_Anchor(datetime(now.year - n, 1, 1, tzinfo=UTC), "year", span, text))
        elif m[7]:
            wd = _WEEKDAYS.index(m[7].lower())
            delta = (today.weekday() - wd) % 7 or 7
            out.append(_Anchor(today - timedelta(days=delta), "day", span, text))
        elif m[8]:
            out.append(_Anchor(today - timedelta(days=14), "week", span, text))
            out.append(_Anchor(today - timedelta(days=7), "week", span, text))
    return out


def _shift(anchor: _Anchor, query: str, now: datetime) -> list[_Anchor]:
    """Apply a relation written just before an absolute anchor ("the week before X")."""
    head = query[: anchor.span[0]]
    m = _OFFSET.search(head)
    start, end = _window(anchor)
    if m:
        n = _number(m[1]) if m[1] else 1
        unit = m[2].lower()
        direction = m[3].lower()
        days = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}[unit] * n
        gran: Granularity = "week" if unit == "weekend" else unit  # type: ignore[assignment]
        if direction == "after":
            new_start = end + timedelta(days=days - GRANULARITY_MS[gran] // DAY_MS)
        else:
            new_start = start - timedelta(days=days)
        return [_Anchor(new_start, gran, (m.start(), anchor.span[1]), m[0] + anchor.text)]
    m2 = _BARE_REL.search(head)
    if m2:
        rel = m2[1].lower()
        span = (m2.start(), anchor.span[1])
        text = m2[0] + anchor.text
        if rel in ("after", "since"):
            # "after X": from the end of X, "since X": from its start; up to a year on,
            # never beyond now
            begin = end if rel == "after" else start
            until = max(begin + timedelta(days=1), min(now, begin + timedelta(days=365)))
            return [_Anchor(begin, "month", span, text, until)]
        if rel in ("before", "until", "till", "by") or rel.startswith("prior"):
            return [_Anchor(start - timedelta(days=90), "month", span, text, start)]
    return [anchor]


# ------------------------------------------------------------------------------ plan


@dataclass(frozen=True, slots=True)
class TemporalPlan:
    query: str
    kinds: frozenset[str] = frozenset()
    windows: tuple[TimeWindow, ...] = ()
    order: Order | None = None
    slots: tuple[tuple[str, ...], ...] = ()
    content_query: str = ""
    mention_slack_ms: int = field(default=0)

    @property
    def active(self) -> bool:
        """Whether the plan should change anything (a window, an order or slots)."""
        return bool(self.windows or self.order or len(self.slots) >= 2)

    @property
    def asks_time(self) -> bool:
        return bool(self.kinds & {"when", "how_long", "order", "first", "last"})

    def affinity(self, ts_ms: int | None) -> float:
        """Best affinity of an event time to the windows: 1 inside (or within the mention
        slack after a window), ``exp(-distance / granularity)`` outside, 0 without windows
        or without a time."""
        if not self.windows or ts_ms is None or ts_ms <= 0:
            return 0.0
        best = 0.0
        for w in self.windows:
            d = w.distance_ms(ts_ms, self.mention_slack_ms)
            if d == 0:
                return 1.0
            best = max(best, math.exp(-d / GRANULARITY_MS[w.granularity]))
        return best

    def mention_affinity(self, mentions: Sequence[Sequence[object]]) -> float:
        """Best affinity of the times a record mentions (:func:`mentioned_windows`, as
        stored: ``[start_ms, end_ms, granularity]``) to the windows: 1 when they overlap,
        ``exp(-gap / granularity)`` otherwise."""
        best = 0.0
        for m in mentions:
            if len(m) < 3 or not isinstance(m[0], int) or not isinstance(m[1], int):
                continue
            start, end, gran = m[0], m[1], str(m[2])
            for w in self.windows:
                gap = max(w.start_ms - end, start - (w.end_ms + self.mention_slack_ms), 0)
                if gap == 0:
                    return 1.0
                unit = GRANULARITY_MS.get(gran, DAY_MS)
                best = max(best, math.exp(-gap / max(unit, GRANULARITY_MS[w.granularity])))
        return best

    def affinities(self, ts_ms: Sequence[int | None]) -> npt.NDArray[np.float64]:
        """:meth:`affinity` of many event times at once (vectorised)."""
        n = len(ts_ms)
        if not self.windows or n == 0:
            return np.zeros(n)
        ts = np.array([t if t is not None and t > 0 else -1 for t in ts_ms], dtype=np.float64)
        best = np.zeros(n)
        for w in self.windows:
            hi = w.end_ms + self.mention_slack_ms
            dist = np.where(ts < w.start_ms, w.start_ms - ts, np.where(ts >= hi, ts - hi + 1, 0.0))
            best = np.maximum(best, np.exp(-dist / GRANULARITY_MS[w.granularity]))
        return np.where(ts > 0, best, 0.0)


def _merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


_BETWEEN = re.compile(r"\bbetween\s+(.+?)\s+and\s+(.+?)\s*(?:[?.!]|$)", re.I)
_EITHER = re.compile(r"(?:^|[,:;]|\bfirst\b)\s*([^,:;]+?)\s+or\s+([^,:;?]+)", re.I)
_AFTER = re.compile(
    r"\b(?:after|before|since)\s+(.+?)\s+(?:did|was|were|had|has|have|does|do|is|are)\s+(.+?)\s*(?:[?.!]|$)",
    re.I,
)


def _slot_terms(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(analyze(text, stopwords=STOPWORDS | _SLOT_STOP)))


def _slots(query: str, kinds: frozenset[str]) -> tuple[tuple[str, ...], ...]:
    """The two sides of a comparison or duration question, as content terms."""
    pattern: list[re.Pattern[str]] = []
    if "how_long" in kinds or "order" in kinds:
        pattern += [_BETWEEN, _AFTER]
    if kinds & {"first", "last", "order", "when"}:
        pattern.append(_EITHER)
    for pat in pattern:
        m = pat.search(query)
        if m:
            a, b = _slot_terms(m[1]), _slot_terms(m[2])
            if a and b and a != b:
                return (a, b)
    return ()


def plan_temporal(
    query: str,
    now_ms: int,
    *,
    mention_slack_days: float = 3.0,
) -> TemporalPlan:
    """The temporal plan of ``query`` at event time ``now_ms`` (see the module doc).

    A pure function of its arguments with an immutable result, so the last few plans are
    kept: ``search`` plans a query while it gathers candidates and ``plan_search`` plans
    it again with the same event time."""
    return _plan_temporal(query, now_ms, mention_slack_days)


MAX_MENTIONS = 4

_HISTORY = re.compile(
    r"\b(?:did|was|were|had|used to|previous(?:ly)?|formerly|former|originally|at first|"
    r"in the past|before|earlier|ago|old (?:job|address|place|home|flat|apartment|house|"
    r"employer|school))\b",
    re.I,
)


def asks_history(query: str) -> bool:
    """Whether ``query`` asks about how things were, not how they are: past tense ("where
    did I live?", "what was my job?") or a pointer to the past ("used to", "before",
    "my old job"). Only present-tense questions rank a superseded fact down."""
    return _HISTORY.search(query) is not None


def mentioned_windows(text: str, said_ms: int) -> list[list[int | str]]:
    """The times a turn mentions ("yesterday", "last week", "3 May", "in 2022"), resolved
    against when it was said: ``[start_ms, end_ms, granularity]`` each, at most
    :data:`MAX_MENTIONS`, stored with the turn at ingest so temporal questions can match
    what it talks about, not only when it was said."""
    if said_ms <= 0 or not text.strip():
        return []
    plan = _plan_temporal.__wrapped__(text, said_ms, 0.0)
    return [[w.start_ms, w.end_ms, w.granularity] for w in plan.windows[:MAX_MENTIONS]]


@functools.lru_cache(maxsize=32)
def _plan_temporal(query: str, now_ms: int, mention_slack_days: float) -> TemporalPlan:
    now = datetime.fromtimestamp(max(0, now_ms) / 1000, tz=UTC)
    kinds = frozenset(k for k, p in _KIND_PATTERNS.items() if p.search(query))
    anchors: list[_Anchor] = []
    for a in _absolute_anchors(query, now):
        anchors.extend(_shift(a, query, now))
    taken = [a.span for a in anchors]
    for a in _relative_anchors(query, now):
        if not _overlaps(a.span, taken):
            anchors.append(a)
    windows: list[TimeWindow] = []
    for a in anchors:
        start, end = _window(a)
        w = TimeWindow(_ms(start), _ms(end), a.granularity, a.text)
        if w not in windows:
            windows.append(w)
    content = query
    for lo, hi in reversed(_merge_spans(a.span for a in anchors)):
        content = content[:lo] + " " + content[hi:]
    content = re.sub(r"\b(?:on|in|during|at|of)\s*(?=[?.!,]|$)", " ", content)
    content = re.sub(r"\s+", " ", content).strip()
    order: Order | None = None
    if "first" in kinds:
        order = "asc"
    elif "last" in kinds:
        order = "desc"
    slots = _slots(content, kinds)
    return TemporalPlan(
        query=query,
        kinds=kinds,
        windows=tuple(windows),
        order=order,
        slots=slots,
        content_query=content or query,
        mention_slack_ms=int(mention_slack_days * DAY_MS),
    )
