"""What the pages say about a record: its time, its scope, why it was kept, the parts of a
score. Pure functions of what the daemon returned."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import quote, unquote

from sidecar.ops.stats_report import human_bytes

DAY_MS = 86_400_000


def when(ts: int | None) -> str:
    """``2026-11-25 14:03 UTC``; "undated" for a record without a time."""
    if ts is None:
        return "undated"
    try:
        moment = datetime.fromtimestamp(ts / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ts} ms"
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def iso(ts: int | None) -> str:
    """The machine-readable form for ``<time datetime>`` ("" when undated)."""
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return ""


def day_bounds(text: str, *, end: bool) -> int | None:
    """An ``<input type=date>`` value (``YYYY-MM-DD``) as epoch ms: its first millisecond,
    or its last with ``end`` (a range's ``until`` is inclusive). Blank is no bound; any
    other text raises ValueError naming it."""
    text = text.strip()
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None
    start = datetime.combine(day, time(0), UTC)
    if end:
        return int((start + timedelta(days=1)).timestamp() * 1000) - 1
    return int(start.timestamp() * 1000)


def scope_of(collection: str) -> str:
    """The ``memory.list`` scope a collection belongs to, in the words the filters use."""
    prefix = collection.split(":", 1)[0]
    return {
        "user": "durable",
        "turns": "history",
        "session_raw": "history",
        "session_summary": "summary",
        "elevated": "elevated",
        "dream": "dream",
        "global": "global",
        "authored": "authored",
    }.get(prefix, prefix)


def _num(meta: Mapping[str, Any], key: str) -> float | None:
    value = meta.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def kept_because(collection: str, meta: Mapping[str, Any]) -> str:
    """Why the memory keeps this record, in the words of ``ingest``'s explain: the gate's
    decision for a turn, a correction, a summary's method, ..."""
    scope = scope_of(collection)
    if meta.get("superseded_by"):
        return f"an earlier version, superseded by {meta['superseded_by']}"
    if meta.get("provenance_class") == "user_update":
        day = when(_int(meta.get("updated_at")))
        return f"corrected by hand on {day} (revision {meta.get('revision', '?')})"
    if scope == "summary":
        level = meta.get("level", 1)
        method = meta.get("method", "")
        turns = len(meta.get("summarized_turn_ids") or meta.get("source_ids") or [])
        return f"summary, level {level}, of {turns} item(s) by compaction ({method})"
    if scope == "elevated":
        return "guidance: a rule-like turn kept verbatim by compaction"
    if scope == "dream":
        return "promoted from a dream diary"
    return _gate_words(meta, scope)


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gate_words(meta: Mapping[str, Any], scope: str) -> str:
    score = _num(meta, "gating_score")
    threshold = _num(meta, "gating_threshold")
    if meta.get("stated_fact"):
        shown = f" (gate score {score:.3f})" if score is not None else ""
        return f"durable: stated as a fact{shown}"
    if score is None:
        return "stored" if scope == "history" else "kept (no gate decision recorded)"
    role = str(meta.get("role", ""))
    # The history's index copy (turns:<ns>) keeps the score and the decision, not the
    # threshold: the decision is said in words then.
    if meta.get("gating_admitted") and role == "user":
        if threshold is None:
            return f"durable: gate score {score:.3f}, admitted by the gate"
        return f"durable: gate score {score:.3f} >= {threshold:.3f}"
    if role and role != "user":
        return f"stored; not durable: only user messages are ({role} message)"
    if threshold is None:
        return f"stored; not durable: gate score {score:.3f}, below the gate's threshold"
    return f"stored; not durable: gate score {score:.3f} < {threshold:.3f}"


# The gate's signals as ingest's explain names them, from the record's metadata keys.
GATE_SIGNALS = (
    ("score", "gating_score"),
    ("threshold", "gating_threshold"),
    ("conversational", "gating_gconv"),
    ("technical score", "gating_gtech"),
    ("technical", "gating_t"),
    ("novelty", "gating_h"),
    ("repetition", "gating_r"),
    ("structure", "gating_d"),
    ("specificity", "gating_p"),
    ("actionability", "gating_a"),
    ("tech density", "gating_dtech"),
)


def gate_signals(meta: Mapping[str, Any]) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for label, key in GATE_SIGNALS:
        value = _num(meta, key)
        if value is not None:
            out.append((label, value))
    return out


_PART = re.compile(r"([A-Za-z_][\w.-]*)=(-?[\d.]+(?:e-?\d+)?)")


def score_parts(reason: str) -> tuple[str, list[tuple[str, str]]]:
    """``"retrieval: dense=0.263 bm25=0.00 ctx=0.906"`` -> ``("retrieval", [("dense",
    "0.263"), ...])``: the section an item came through and its score's parts."""
    head, sep, rest = reason.partition(":")
    if not sep or "=" in head:
        head, rest = "", reason
    return head.strip(), _PART.findall(rest)


size = human_bytes  # as `libravdb stats` writes it


def duration(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 2 * 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} days"


def ref(collection: str, record_id: str) -> str:
    """A record as one form value (``collection/id``, each part percent-encoded)."""
    return f"{quote(collection, safe='')}/{quote(record_id, safe='')}"


def parse_ref(value: str) -> tuple[str, str]:
    collection, sep, record_id = value.partition("/")
    if not sep or not collection or not record_id:
        raise ValueError(f"not a record reference: {value!r}")
    return unquote(collection), unquote(record_id)
