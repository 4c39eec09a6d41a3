"""The implicit-recall set: cue / trigger pairs (``tests/memory/data/cue_pairs.json``) and
prompts no memory bears on (``tests/memory/data/no_memory_prompts.json``), read and
checked, and the content words each trigger shares with its cue.

A pair whose trigger shares a content word with its cue can be found by the lexical
channel alone; the set is meant to measure the rest, so fewer than a quarter of the pairs
may share one (:data:`MAX_SHARED_SHARE`). Shared means equal terms of the project's
analyzer (stop words removed, light stemming); :func:`prefix_links` is a looser view
(terms of five letters or more that start alike: "allergic"/"allergy"), printed beside it
because the light stemmer leaves such pairs apart.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.memory.core.analyzer import query_terms  # noqa: E402

CUE_DATA = REPO / "tests" / "memory" / "data" / "cue_pairs.json"
NO_MEMORY_DATA = REPO / "tests" / "memory" / "data" / "no_memory_prompts.json"
KINDS = ("preference", "goal", "state", "value", "cause", "relationship")
PROMPT_KINDS = ("greeting", "chit-chat", "task")
# dev chooses constants, holdout is only measured, fresh is written after the constants
# are fixed and scored once (empty until then)
SPLITS = ("dev", "holdout", "fresh")
MAX_SHARED_SHARE = 0.25
PREFIX_LEN = 5
# "Can you ...?" is a request, not a question
_REQUEST_RE = re.compile(r"^\s*(can|could|would) (you|u|we)\b", re.I)


@dataclass(frozen=True)
class CuePair:
    id: str
    kind: str
    split: str
    user: str  # the cue's user turn
    assistant: str | None  # the assistant's reply to it, when the cue has one
    trigger: str  # the later user message

    @property
    def cue_text(self) -> str:
        return self.user if self.assistant is None else f"{self.user}\n{self.assistant}"


@dataclass(frozen=True)
class NoMemoryPrompt:
    id: str
    kind: str
    split: str
    text: str


def load_pairs(path: Path = CUE_DATA) -> list[CuePair]:
    raw = json.loads(path.read_text())
    return [
        CuePair(
            str(p["id"]),
            str(p["kind"]),
            split,
            str(p["cue"]["user"]),
            p["cue"].get("assistant"),
            str(p["trigger"]),
        )
        for split in SPLITS
        for p in raw["splits"].get(split, [])
    ]


def load_prompts(path: Path = NO_MEMORY_DATA) -> list[NoMemoryPrompt]:
    raw = json.loads(path.read_text())
    return [
        NoMemoryPrompt(str(p["id"]), str(p["kind"]), split, str(p["text"]))
        for split in SPLITS
        for p in raw["splits"].get(split, [])
    ]


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?") and not _REQUEST_RE.match(text)


def problems(pairs: Sequence[CuePair], prompts: Sequence[NoMemoryPrompt]) -> list[str]:
    """What makes the set invalid (empty when it is fine)."""
    out: list[str] = []
    ids = Counter(p.id for p in pairs) + Counter(p.id for p in prompts)
    out += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    out += [f"{p.id}: unknown kind {p.kind}" for p in pairs if p.kind not in KINDS]
    out += [f"{p.id}: unknown kind {p.kind}" for p in prompts if p.kind not in PROMPT_KINDS]
    out += [
        f"{p.id}: empty text"
        for p in pairs
        if not (
            p.user.strip() and p.trigger.strip() and (p.assistant is None or p.assistant.strip())
        )
    ]
    share = shared_share(pairs)
    if share >= MAX_SHARED_SHARE:
        out.append(f"{share:.3f} of the pairs share a content word (limit {MAX_SHARED_SHARE})")
    return out


# ---------------------------------------------------------------------------- overlap


def shared_terms(pair: CuePair) -> set[str]:
    """The analyzer's terms the trigger shares with the cue (both of its turns)."""
    return set(query_terms(pair.cue_text)) & set(query_terms(pair.trigger))


def prefix_links(pair: CuePair) -> set[str]:
    """Trigger terms of at least :data:`PREFIX_LEN` letters that start like a cue term
    without being equal to it: links the light stemmer misses ("allergi"/"allergic")."""
    cue = {t[:PREFIX_LEN] for t in query_terms(pair.cue_text) if len(t) >= PREFIX_LEN}
    equal = shared_terms(pair)
    return {
        t
        for t in query_terms(pair.trigger)
        if len(t) >= PREFIX_LEN and t[:PREFIX_LEN] in cue and t not in equal
    }


def shared_share(pairs: Sequence[CuePair]) -> float:
    return sum(1 for p in pairs if shared_terms(p)) / len(pairs) if pairs else 0.0


def render_set(pairs: Sequence[CuePair], prompts: Sequence[NoMemoryPrompt]) -> str:
    """Counts per kind and split, and the overlap distribution, as markdown tables."""
    splits = [s for s in SPLITS if any(p.split == s for p in pairs)]
    lines = [
        "| kind | "
        + " | ".join(splits)
        + " | with the assistant's reply | trigger is a question |",
        "|---|" + "---|" * (len(splits) + 2),
    ]
    for kind in KINDS:
        mine = [p for p in pairs if p.kind == kind]
        cells = [str(sum(1 for p in mine if p.split == s)) for s in splits]
        replies = sum(1 for p in mine if p.assistant is not None)
        asked = sum(1 for p in mine if is_question(p.trigger))
        lines.append(f"| {kind} | " + " | ".join(cells) + f" | {replies} | {asked} |")
    cells = [str(sum(1 for p in pairs if p.split == s)) for s in splits]
    replies = sum(1 for p in pairs if p.assistant is not None)
    asked = sum(1 for p in pairs if is_question(p.trigger))
    lines.append("| **all** | " + " | ".join(cells) + f" | {replies} | {asked} |")
    lines += ["", *_overlap_table(pairs, splits)]
    if prompts:
        per = Counter((p.kind, p.split) for p in prompts)
        kinds = ", ".join(f"{k} {'/'.join(str(per[(k, s)]) for s in splits)}" for k in PROMPT_KINDS)
        lines += ["", f"No-memory prompts ({'/'.join(splits)}): {kinds}."]
    return "\n".join(lines)


def _overlap_table(pairs: Sequence[CuePair], splits: Sequence[str]) -> list[str]:
    lines = [
        "| split | pairs | no shared term | 1 shared | 2+ shared | share with any (limit "
        f"{MAX_SHARED_SHARE}) | prefix-{PREFIX_LEN} links besides |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, part in [*((s, [p for p in pairs if p.split == s]) for s in splits), ("all", pairs)]:
        n = Counter(min(len(shared_terms(p)), 2) for p in part)
        loose = sum(1 for p in part if prefix_links(p) and not shared_terms(p))
        lines.append(
            f"| {name} | {len(part)} | {n[0]} | {n[1]} | {n[2]} | "
            f"{shared_share(part):.3f} | {loose} |"
        )
    return lines


def shared_examples(pairs: Sequence[CuePair]) -> str:
    """The shared terms of each pair that has some, one line each (for ``--overlap``)."""
    return "\n".join(
        f"{p.split} {p.id}: {sorted(shared_terms(p))} {sorted(prefix_links(p))}"
        for p in pairs
        if shared_terms(p) or prefix_links(p)
    )
