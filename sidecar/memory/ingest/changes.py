"""Facts that change: a user turn that says something changed ("I moved to Porto", "I
started a new job at Lumen") supersedes the earlier statement of the same kind ("I live
in Lisbon", "I work at the bank").

At ingest, a new user turn with a change cue is matched against the namespace's earlier
user turns (the nearest by cosine, before the new turn is stored): the most similar one
that states the same kind of fact about the user, in the first person, is marked
``superseded_by`` the new turn (its ``turns:<ns>`` and ``user:<ns>`` copies and its raw
turn; text unchanged). Ranking then puts the newer statement first for present-tense
questions, while both stay findable, and history questions ("where did I live before?")
do not demote it (``scoring``; ``temporal.asks_history``).

Kinds are narrow on purpose: home, work, partner, studies, diet. A wrong mark only lowers
a fact's rank, never removes it, but a missed one keeps the old behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sidecar.memory.core import layout as C
from sidecar.store.types import Hit, Patch

CHANGE_CUE = re.compile(
    r"(?i)\b(?:moved (?:to|into|back|out)|relocated|now (?:live|living|work|working|based|"
    r"study|studying)|no longer|not any ?more|switched (?:to|jobs|careers)|changed (?:jobs|"
    r"careers|my)|new (?:job|flat|apartment|house|home|address|role|position|employer)|"
    r"started (?:a new|working|my new|at)|quit (?:my|the)|left (?:my|the) (?:job|company)|"
    r"got (?:a new job|married|divorced|engaged)|broke up|these days|nowadays|"
    r"gave up (?:meat|eating))\b",
)
_FIRST = r"\b(?:i|we)(?:'m|'re|'ve| am| are| have| just| now| recently)?\s+(?:\w+\s+)?"
KINDS: dict[str, re.Pattern[str]] = {
    "home": re.compile(
        rf"(?i){_FIRST}(?:live[sd]?|living|moved|relocated|based)\b"
        r"|\bmy (?:home|flat|apartment|house|address)\b"
    ),
    "work": re.compile(
        rf"(?i){_FIRST}(?:work(?:s|ed|ing)?|employed|hired|quit|joined)\b"
        r"|\bmy (?:job|employer|company|boss|manager|role)\b|\bnew job\b"
    ),
    "partner": re.compile(
        r"(?i)\bmy (?:partner|girlfriend|boyfriend|wife|husband|fianc\w*)\b"
        rf"|{_FIRST}(?:married|engaged|divorced|dating|single|broke up)\b"
    ),
    "study": re.compile(
        rf"(?i){_FIRST}(?:study|studying|studied|enrolled)\b"
        r"|\bmy (?:degree|course|school|university|college|phd)\b"
    ),
    "diet": re.compile(
        r"(?i)\b(?:i'm|i am|we're|we are)\s+(?:\w+\s+)?(?:vegetarian|vegan|pescatarian)\b"
        r"|\b(?:i|we) (?:don'?t|do not|no longer) eat\b|\bgave up (?:meat|eating)\b"
    ),
}
MIN_SIMILARITY = 0.3  # the two statements must also be about something alike


def kinds_of(text: str) -> set[str]:
    """The kinds of fact ``text`` states about the user, in the first person."""
    return {name for name, pattern in KINDS.items() if pattern.search(text)}


def is_change(text: str) -> bool:
    return CHANGE_CUE.search(text) is not None and bool(kinds_of(text))


def superseded(text: str, earlier: Sequence[Hit]) -> Hit | None:
    """The earlier user turn that ``text`` replaces, if it says a fact changed: the most
    similar of ``earlier`` (nearest first) stating the same kind of fact, not already
    superseded."""
    if CHANGE_CUE.search(text) is None:
        return None
    kinds = kinds_of(text)
    if not kinds:
        return None
    for hit in sorted(earlier, key=lambda h: -h.score):
        if hit.score < MIN_SIMILARITY:
            break
        if hit.metadata.get(C.SUPERSEDED_BY):
            continue
        if kinds & kinds_of(hit.text):
            return hit
    return None


def superseded_marks(
    ns: str, record_id: str, session_id: object, by: str, now: int, *, durable: bool = True
) -> list[Patch]:
    """Mark the namespace turn ``record_id`` (``<sid>:<turnId>``) superseded by ``by`` in
    ``turns:<ns>``, its raw session and (``durable``) ``user:<ns>``; texts unchanged."""
    mark = {C.SUPERSEDED_BY: by, C.SUPERSEDED_AT: now}
    marks = [Patch(C.turns(ns), record_id, mark, missing_ok=True)]
    if durable:
        marks.append(Patch(C.user(ns), record_id, mark, missing_ok=True))
    turn = C.turn_id_in(record_id, session_id) if isinstance(session_id, str) else None
    if turn is not None and isinstance(session_id, str):
        marks.append(Patch(C.session_raw(session_id), turn, mark, missing_ok=True))
    return marks


def cleared_marks(ns: str, record_id: str, session_id: object) -> list[Patch]:
    """The patches that undo :func:`superseded_marks` of ``record_id`` (``forget`` of the
    turn that superseded it): the statement is current again. The keys stay, as null."""
    mark = {C.SUPERSEDED_BY: None, C.SUPERSEDED_AT: None}
    marks = [Patch(C.turns(ns), record_id, mark, missing_ok=True)]
    marks.append(Patch(C.user(ns), record_id, mark, missing_ok=True))
    turn = C.turn_id_in(record_id, session_id) if isinstance(session_id, str) else None
    if turn is not None and isinstance(session_id, str):
        marks.append(Patch(C.session_raw(session_id), turn, mark, missing_ok=True))
    return marks
