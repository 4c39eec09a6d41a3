"""Dream diary parsing and promotion gates.

Parsing (:func:`parse_dream_diary`):

* the text is split into lines (LF, CRLF or CR);
* fenced regions (``` or ~~~) are skipped;
* a heading is 2-6 ``#`` followed by text; the section name is lowercased with
  whitespace collapsed (and closing ``#`` removed). ``# Title`` (one ``#``) is not a
  heading here. Only sections whose name contains ``deep sleep``, ``promot`` or
  ``dream`` count;
* a candidate is a bullet (``-``, ``*`` or ``+``) that ends with a ``{...}`` block, taken
  from the last ``{`` to the closing ``}``; the block is split on commas and whitespace
  into ``key=value`` pairs (keys lowercased; spaces around ``=`` are tolerated).
  ``score`` (float), ``recall`` or ``recallcount`` (int) and ``unique`` or
  ``uniquequeries`` (int) are required; a bullet with a missing or malformed value, or
  empty text, is skipped;
* every candidate keeps its **1-based line in the file** (``line``) and its 1-based index
  among candidates (``index``). The reference stored the index as ``dream_line``
 ; :func:`resolve_source_line` prefers the real source line.

Gates (:func:`gate_entries`): trimmed text of at least 16 UTF-8 bytes, score ≥ 0.6,
recall ≥ 2, unique ≥ 2, and a finite score. Every entry ends up accepted or rejected
(with its reasons). Replacing a document's earlier entries — also when every entry is
rejected, unlike the reference — is the store's job; :func:`dream_entry_id` gives the
ids of the accepted entries, numbered by accepted index.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MIN_TEXT_BYTES = 16
MIN_SCORE = 0.6
MIN_RECALL = 2
MIN_UNIQUE = 2
SECTION_MARKERS = ("deep sleep", "promot", "dream")

_HEADING_RE = re.compile(r"^\s{0,3}(#{2,6})\s+(.*?)\s*#*\s*$")
_BULLET_RE = re.compile(r"^\s*[-*+]\s+(.*)$")
_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
_LINE_SPLIT_RE = re.compile(r"\r\n|\r|\n")
_PAIR_SPLIT_RE = re.compile(r"[,\s]+")
_WS_RE = re.compile(r"\s+")
_EQ_RE = re.compile(r"\s*=\s*")


@dataclass(frozen=True, slots=True)
class DreamEntry:
    text: str
    score: float
    recall_count: int
    unique_queries: int
    section: str = ""
    line: int = 0  # 1-based line in the source file (0 = unknown)
    index: int = 0  # 1-based index among the parsed candidates (0 = unknown)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RejectedEntry:
    entry: DreamEntry
    reasons: tuple[str, ...]

    @property
    def text(self) -> str:
        return self.entry.text

    @property
    def line(self) -> int:
        return self.entry.line


@dataclass(frozen=True, slots=True)
class GateResult:
    accepted: tuple[DreamEntry, ...]
    rejected: tuple[RejectedEntry, ...]

    @property
    def promoted(self) -> int:
        return len(self.accepted)


def _parse_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        try:
            f = float(value)
        except ValueError:
            return None
        return int(f) if math.isfinite(f) and f.is_integer() else None


def _parse_float(value: str) -> float | None:
    try:
        f = float(value)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _parse_block(block: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in _PAIR_SPLIT_RE.split(_EQ_RE.sub("=", block.strip())):
        if "=" not in part:
            continue
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key:
            pairs[key] = value.strip()
    return pairs


def _is_dream_section(section: str) -> bool:
    return any(marker in section for marker in SECTION_MARKERS)


def parse_bullet(body: str) -> tuple[str, float, int, int] | None:
    """``(text, score, recall, unique)`` of a bullet body ending in a ``{...}`` block."""
    stripped = body.rstrip()
    if not stripped.endswith("}"):
        return None
    open_at = stripped.rfind("{")
    if open_at < 0:
        return None
    pairs = _parse_block(stripped[open_at + 1 : -1])
    text = stripped[:open_at].strip()
    score = _parse_float(pairs.get("score", ""))
    recall_raw = pairs.get("recall", pairs.get("recallcount"))
    unique_raw = pairs.get("unique", pairs.get("uniquequeries"))
    recall = _parse_int(recall_raw) if recall_raw is not None else None
    unique = _parse_int(unique_raw) if unique_raw is not None else None
    if not text or score is None or recall is None or unique is None:
        return None
    return text, score, recall, unique


def parse_dream_diary(text: str) -> list[DreamEntry]:
    """Candidate entries of a dream diary, in file order (module doc)."""
    entries: list[DreamEntry] = []
    section = ""
    fence = ""
    for lineno, line in enumerate(_LINE_SPLIT_RE.split(text), start=1):
        fm = _FENCE_RE.match(line)
        if fence:
            if fm is not None and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = ""
            continue
        if fm is not None:
            fence = fm.group(1)
            continue
        hm = _HEADING_RE.match(line)
        if hm is not None:
            section = _WS_RE.sub(" ", hm.group(2)).strip().lower()
            continue
        if not _is_dream_section(section):
            continue
        bm = _BULLET_RE.match(line)
        if bm is None:
            continue
        parsed = parse_bullet(bm.group(1))
        if parsed is None:
            continue
        body, score, recall, unique = parsed
        entries.append(
            DreamEntry(
                text=body,
                score=score,
                recall_count=recall,
                unique_queries=unique,
                section=section,
                line=lineno,
                index=len(entries) + 1,
            )
        )
    return entries


def rejection_reasons(
    entry: DreamEntry,
    *,
    min_text_bytes: int = MIN_TEXT_BYTES,
    min_score: float = MIN_SCORE,
    min_recall: int = MIN_RECALL,
    min_unique: int = MIN_UNIQUE,
) -> tuple[str, ...]:
    """Why ``entry`` fails the promotion gates (empty when it passes)."""
    reasons: list[str] = []
    if len(entry.text.strip().encode("utf-8")) < min_text_bytes:
        reasons.append(f"text shorter than {min_text_bytes} bytes")
    if not math.isfinite(entry.score) or entry.score < min_score:
        reasons.append(f"score below {min_score}")
    if entry.recall_count < min_recall:
        reasons.append(f"recall below {min_recall}")
    if entry.unique_queries < min_unique:
        reasons.append(f"unique queries below {min_unique}")
    return tuple(reasons)


def gate_entries(
    entries: Iterable[DreamEntry],
    *,
    min_text_bytes: int = MIN_TEXT_BYTES,
    min_score: float = MIN_SCORE,
    min_recall: int = MIN_RECALL,
    min_unique: int = MIN_UNIQUE,
) -> GateResult:
    """Split ``entries`` into accepted and rejected, keeping their order."""
    accepted: list[DreamEntry] = []
    rejected: list[RejectedEntry] = []
    for entry in entries:
        reasons = rejection_reasons(
            entry,
            min_text_bytes=min_text_bytes,
            min_score=min_score,
            min_recall=min_recall,
            min_unique=min_unique,
        )
        if reasons:
            rejected.append(RejectedEntry(entry, reasons))
        else:
            accepted.append(entry)
    return GateResult(tuple(accepted), tuple(rejected))


def resolve_source_line(line: int | None, source_line: int | None) -> int:
    """The real file line of an entry sent by a host.

    The reference host sends ``line`` = the 1-based candidate index and ``sourceLine`` =
    the file line; the reference daemon stored ``line``. The file line wins.
    """
    if source_line is not None and source_line > 0:
        return int(source_line)
    if line is not None and line > 0:
        return int(line)
    return 0


def dream_entry_id(source_doc: str, accepted_index: int) -> str:
    """``<sourceDoc>#dream#%06d``, numbered 0.. over the accepted entries."""
    return f"{source_doc}#dream#{accepted_index:06d}"
