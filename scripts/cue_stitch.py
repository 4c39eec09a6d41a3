"""The cue pairs stitched into LoCoMo conversations the way a real history grows, in
memory at evaluation time (the LoCoMo text is never written anywhere).

For one split, every conversation becomes a namespace of its own,
``<sample_id>:cues-<split>`` (so the splits never see each other's cues, and a fresh part
added later does not move the figures of the others), with its LoCoMo sessions renamed
into it. The split's pairs are dealt to the conversations kind by kind, round robin after
a seeded shuffle, so every conversation holds a share of every kind and its cues are each
other's distractors. Each cue is a short session of its own (the user turn, then the
assistant's reply 30 seconds later) at a seeded random moment between the first and the
last LoCoMo session, at least :data:`MIN_GAP_MS` from any other session's start. Its turns
carry the speakers' labels as the LoCoMo turns do (``Caroline: ...`` for the user, speaker
B's name for the reply), so a cue does not stand out from the history by its form alone;
``labels=False`` stitches them bare, to measure how much that form is worth. The
trigger is said by the user in a fresh session after the conversation ends; it is not
ingested. The prompts without relevant memory are dealt and asked the same way.

Everything is decided by ``random.Random`` seeded with strings (the seed, the split, the
pair's id), so the result depends on nothing else and a pair keeps its place when other
pairs are added.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.cue_set import KINDS, PROMPT_KINDS, CuePair, NoMemoryPrompt  # noqa: E402
from scripts.locomo_data import Conversation, EvalTurn, Question  # noqa: E402

SEED = 33
MIN_GAP_MS = 2 * 3600 * 1000  # a cue session starts at least 2 h from any other session
REPLY_AFTER_MS = 30 * 1000
ASK_AFTER_MS = 24 * 3600 * 1000  # the first trigger: a day after the last session
ASK_EVERY_MS = 60 * 1000
_TRIES = 1000


@dataclass(frozen=True)
class Ask:
    """One prompt asked after the conversation: a cue's trigger (``pair`` set, the cue's
    turn ids as evidence) or a prompt no memory bears on (``prompt`` set)."""

    session_id: str
    ts: int
    pair: CuePair | None = None
    prompt: NoMemoryPrompt | None = None

    @property
    def kind(self) -> str:
        return self.pair.kind if self.pair else self.prompt.kind if self.prompt else ""


@dataclass
class Stitched:
    """One conversation with a split's cues: ``conv.turns`` in time order (LoCoMo and cue
    turns), ``conv.questions`` aligned with ``asks`` (the triggers first, then the
    no-memory prompts, whose evidence is empty)."""

    namespace: str
    split: str
    conv: Conversation
    asks: list[Ask]
    cue_sessions: dict[str, int] = field(default_factory=dict)  # session id -> start ms

    @property
    def triggers(self) -> list[int]:
        return [i for i, a in enumerate(self.asks) if a.pair is not None]

    @property
    def prompts(self) -> list[int]:
        return [i for i, a in enumerate(self.asks) if a.prompt is not None]


def cue_turn_ids(pair: CuePair) -> tuple[str, ...]:
    return (f"{pair.id}:u",) if pair.assistant is None else (f"{pair.id}:u", f"{pair.id}:a")


def deal(items: Sequence[CuePair], n: int, seed: int, split: str) -> list[list[CuePair]]:
    """The pairs shared out to ``n`` conversations: each kind shuffled (seeded) and dealt
    round robin, the deal carrying on from kind to kind so the totals stay level."""
    hands: list[list[CuePair]] = [[] for _ in range(n)]
    turn = 0
    for kind in KINDS:
        mine = sorted((p for p in items if p.kind == kind), key=lambda p: p.id)
        random.Random(f"{seed}:{split}:{kind}").shuffle(mine)
        for p in mine:
            hands[turn % n].append(p)
            turn += 1
    return hands


def deal_prompts(
    items: Sequence[NoMemoryPrompt], n: int, seed: int, split: str
) -> list[list[NoMemoryPrompt]]:
    hands: list[list[NoMemoryPrompt]] = [[] for _ in range(n)]
    turn = 0
    for kind in PROMPT_KINDS:
        mine = sorted((p for p in items if p.kind == kind), key=lambda p: p.id)
        random.Random(f"{seed}:{split}:prompts:{kind}").shuffle(mine)
        for p in mine:
            hands[turn % n].append(p)
            turn += 1
    return hands


def cue_start(
    pair: CuePair, starts: Sequence[int], taken: Sequence[int], seed: int, split: str
) -> int:
    """A seeded moment between the first and the last session start, at least
    :data:`MIN_GAP_MS` from every LoCoMo session and every cue placed before it."""
    rng = random.Random(f"{seed}:{split}:{pair.id}")
    lo, hi = min(starts), max(starts)
    for _ in range(_TRIES):
        t = rng.randrange(lo, hi) // 1000 * 1000
        if all(abs(t - s) >= MIN_GAP_MS for s in (*starts, *taken)):
            return t
    raise ValueError(f"no free moment for {pair.id} in the conversation's timeline")


def stitch_one(
    conv: Conversation,
    pairs: Sequence[CuePair],
    prompts: Sequence[NoMemoryPrompt],
    split: str,
    seed: int = SEED,
    *,
    labels: bool = True,
) -> Stitched:
    ns = f"{conv.sample_id}:cues-{split}"
    # the LoCoMo sessions, renamed into this split's namespace
    turns = [replace(t, session_id=f"{ns}:{t.session_id.rsplit(':', 1)[-1]}") for t in conv.turns]
    starts = sorted(conv.session_dates.values())
    cue_sessions: dict[str, int] = {}
    for k, pair in enumerate(sorted(pairs, key=lambda p: p.id)):
        t0 = cue_start(pair, starts, list(cue_sessions.values()), seed, split)
        sid = f"{ns}:cue-{pair.id}"
        cue_sessions[sid] = t0
        texts = [("user", pair.user)] + ([("assistant", pair.assistant)] if pair.assistant else [])
        for pos, ((role, text), tid) in enumerate(zip(texts, cue_turn_ids(pair), strict=True)):
            speaker = conv.speaker_a if role == "user" else conv.speaker_b
            content = f"{speaker}: {text}" if labels else text
            turns.append(
                EvalTurn(tid, sid, 1000 + k, pos, role, speaker, content, t0 + pos * REPLY_AFTER_MS)
            )
    turns.sort(key=lambda t: (t.ts, t.session_id, t.position))
    end = max(t.ts for t in turns)
    asks: list[Ask] = []
    questions: list[Question] = []
    ordered: list[CuePair | NoMemoryPrompt] = [*pairs, *prompts]
    for i, item in enumerate(ordered):
        ts = end + ASK_AFTER_MS + i * ASK_EVERY_MS
        sid = f"{ns}:ask-{item.id}"
        if isinstance(item, CuePair):
            asks.append(Ask(sid, ts, pair=item))
            questions.append(Question(i, item.trigger, KINDS.index(item.kind), cue_turn_ids(item)))
        else:
            asks.append(Ask(sid, ts, prompt=item))
            questions.append(Question(i, item.text, -1, ()))
    dates = {f"{ns}:{k.rsplit(':', 1)[-1]}": v for k, v in conv.session_dates.items()}
    dates.update(cue_sessions)
    out = Conversation(ns, conv.speaker_a, conv.speaker_b, turns, questions, dates, [])
    return Stitched(ns, split, out, asks, cue_sessions)


def stitch(
    convs: Sequence[Conversation],
    pairs: Sequence[CuePair],
    prompts: Sequence[NoMemoryPrompt],
    split: str,
    seed: int = SEED,
    *,
    labels: bool = True,
) -> list[Stitched]:
    """The split's pairs and prompts stitched into every conversation (module doc)."""
    mine = [p for p in pairs if p.split == split]
    hands = deal(mine, len(convs), seed, split)
    asks = deal_prompts([p for p in prompts if p.split == split], len(convs), seed, split)
    return [
        stitch_one(conv, hand, ask, split, seed, labels=labels)
        for conv, hand, ask in zip(convs, hands, asks, strict=True)
    ]
