"""The LoCoMo data as the evaluation reads it: conversations, their dated sessions and
turns, and the questions with their evidence turns."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.locomo_report import CATEGORIES  # noqa: E402
from sidecar.memory.core.temporal import MONTHS  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "eval" / "locomo_dev.json"
ADVERSARIAL = 5


# ------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class EvalTurn:
    id: str  # the dia_id
    session_id: str
    session_index: int
    position: int
    role: str
    speaker: str
    content: str
    ts: int  # epoch ms


@dataclass(frozen=True)
class Question:
    index: int
    text: str
    category: int
    evidence: tuple[str, ...]
    answer: str = ""


@dataclass
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: list[EvalTurn]
    questions: list[Question]
    session_dates: dict[str, int] = field(default_factory=dict)  # session id -> ts ms
    # category 5 (adversarial: the answer is not in the conversation as asked), only for
    # the retrieval-only metrics that other systems report with and without it
    adversarial: list[Question] = field(default_factory=list)


_DATE_RE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
_MONTHS = {m: i + 1 for i, m in enumerate(MONTHS)}


def parse_session_date(text: str) -> int:
    """ "1:56 pm on 8 May, 2023" → epoch milliseconds (UTC)."""
    m = _DATE_RE.match(text)
    if not m:
        raise ValueError(f"unrecognised session date {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    mon = _MONTHS.get(month.lower()) or next(
        (v for k, v in _MONTHS.items() if k.startswith(month.lower()[:3])), 0
    )
    if not mon:
        raise ValueError(f"unrecognised month in {text!r}")
    dt = datetime(int(year), mon, int(day), h, int(minute), tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def turn_content(turn: dict[str, Any]) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [shares a photo: {caption}]"
    return content


def split_evidence(evidence: Iterable[str]) -> tuple[str, ...]:
    """Evidence ids; a few rows pack several ids into one string ("D8:6; D9:17")."""
    out: list[str] = []
    for e in evidence:
        out.extend(p for p in re.split(r"[;,\s]+", str(e)) if p)
    return tuple(dict.fromkeys(out))


def load_conversations(path: Path) -> list[Conversation]:
    raw = json.loads(path.read_text())
    convs: list[Conversation] = []
    for sample in raw:
        sid = str(sample["sample_id"])
        conv = sample["conversation"]
        a, b = str(conv["speaker_a"]), str(conv["speaker_b"])
        numbers = sorted(
            int(k.split("_")[1])
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
        )
        turns: list[EvalTurn] = []
        dates: dict[str, int] = {}
        for n in numbers:
            session_id = f"{sid}:session_{n}"
            base = parse_session_date(conv[f"session_{n}_date_time"])
            dates[session_id] = base
            for i, t in enumerate(conv[f"session_{n}"]):
                speaker = str(t["speaker"])
                turns.append(
                    EvalTurn(
                        id=str(t["dia_id"]),
                        session_id=session_id,
                        session_index=n,
                        position=i,
                        role="user" if speaker == a else "assistant",
                        speaker=speaker,
                        content=turn_content(t),
                        ts=base + i * 1000,
                    )
                )
        asked = [
            Question(
                i,
                str(q["question"]),
                int(q["category"]),
                split_evidence(q["evidence"]),
                str(q.get("answer", "")),
            )
            for i, q in enumerate(sample["qa"])
            if q.get("evidence")
        ]
        questions = [q for q in asked if q.category in CATEGORIES]
        adversarial = [q for q in asked if q.category == ADVERSARIAL]
        convs.append(Conversation(sid, a, b, turns, questions, dates, adversarial))
    return convs
