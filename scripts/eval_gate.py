#!/usr/bin/env python3
"""How well the admission gate tells durable turns from the rest (part of ``make eval``).

    python scripts/eval_gate.py [--errors] [--no-write]

Reads ``tests/memory/data/gate_turns.json``: conversations of user turns written for this
project, each turn labelled durable (a fact, preference, constraint, plan or decision
worth remembering beyond the conversation) or not (greetings, thanks, reactions, one-off
requests and questions). Each conversation is its own namespace, ingested one message at
a time as a host commits turns: every turn's gate sees the conversation's earlier user
turns and the earlier turns the gate admitted, with the bundled embedder's vectors, as
``ingest`` computes them (:func:`replay`, checked against the daemon by
``tests/memory_rpc/test_gate_replay.py``).

Precision is the share of admitted turns that are durable; recall the share of durable
turns admitted. Rows: the reference's gate (its structure patterns and threshold 0.35)
and the current default, on each split: ``dev`` and ``holdout`` (first-person user
turns), ``fresh`` (written after the gate's constants were first chosen), ``third-dev``
and ``third-test`` (facts in the third person and as a model writes them, with filler;
written before the gate was changed for them). The threshold is chosen on the dev parts
(``dev`` and ``third-dev``) only: the best F1 over a grid, ties to the higher threshold;
``leave-one-out`` chooses it on all conversations but one, scores that one, and sums
over the rotations. The table goes to docs/benchmarks.md between ``<!-- bench:gate -->``
markers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.confusion import Counts  # noqa: E402
from scripts.doc_sections import write_section  # noqa: E402
from sidecar.config import load_settings  # noqa: E402
from sidecar.engines import EngineHub  # noqa: E402
from sidecar.memory.ingest.gate import (  # noqa: E402
    DEFAULT_CONFIG,
    REFERENCE_CONFIG,
    GatingConfig,
    compute_gating,
)

DATA = REPO / "tests" / "memory" / "data" / "gate_turns.json"
DOC = REPO / "docs" / "benchmarks.md"
GRID = [round(0.20 + 0.01 * i, 2) for i in range(41)]  # 0.20 .. 0.60
SPLITS = ("dev", "holdout", "fresh", "third-dev", "third-test")
DEV_SPLITS = ("dev", "third-dev")  # where constants are chosen; the others are only measured

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Conversation:
    id: str
    split: str
    texts: list[str]
    durable: list[bool]


def load(path: Path = DATA) -> list[Conversation]:
    raw = json.loads(path.read_text())
    return [
        Conversation(
            c["id"],
            c["split"],
            [t["text"] for t in c["turns"]],
            [bool(t["durable"]) for t in c["turns"]],
        )
        for c in raw["conversations"]
    ]


def replay(texts: Sequence[str], vectors: F32, config: GatingConfig) -> list[bool]:
    """The gate's decision for each user turn of one namespace, ingested one at a time:
    the neighbours are the earlier turns and the earlier admitted turns (unit vectors)."""
    admitted: list[bool] = []
    kept: list[int] = []
    for i, text in enumerate(texts):
        turn_scores = [float(vectors[i] @ vectors[j]) for j in range(i)]
        mem_scores = [float(vectors[i] @ vectors[j]) for j in kept]
        ok = compute_gating(text, turn_scores, mem_scores, config).admitted
        admitted.append(ok)
        if ok:
            kept.append(i)
    return admitted


def counts(said: Sequence[bool], truth: Sequence[bool]) -> Counts:
    tp = sum(s and t for s, t in zip(said, truth, strict=True))
    fp = sum(s and not t for s, t in zip(said, truth, strict=True))
    fn = sum(t and not s for s, t in zip(said, truth, strict=True))
    return Counts(tp, fp, fn, len(truth) - tp - fp - fn)


def evaluate(convs: Sequence[Conversation], vecs: dict[str, F32], config: GatingConfig) -> Counts:
    total = Counts()
    for c in convs:
        total = total + counts(replay(c.texts, vecs[c.id], config), c.durable)
    return total


def choose_threshold(
    convs: Sequence[Conversation], vecs: dict[str, F32], base: GatingConfig
) -> float:
    """The grid threshold with the best F1 on ``convs`` (ties: the higher threshold)."""
    best = max(GRID, key=lambda t: (evaluate(convs, vecs, replace(base, threshold=t)).f1, t))
    return best


def leave_one_out(
    convs: Sequence[Conversation], vecs: dict[str, F32], base: GatingConfig
) -> tuple[Counts, list[float]]:
    total = Counts()
    chosen: list[float] = []
    for held in convs:
        rest = [c for c in convs if c is not held]
        t = choose_threshold(rest, vecs, base)
        chosen.append(t)
        total = total + evaluate([held], vecs, replace(base, threshold=t))
    return total, chosen


def embed_all(convs: Sequence[Conversation]) -> dict[str, F32]:
    settings = load_settings({})
    embedder = EngineHub.from_settings(
        settings.embedding, settings.summarizer, search_roots=[]
    ).require_embedder()
    out: dict[str, F32] = {}
    for c in convs:
        out[c.id] = np.asarray(embedder.embed_sync(c.texts, "document").vectors, dtype=np.float32)
    return out


def _row(name: str, split: str, n: int, pos: int, k: Counts) -> str:
    return (
        f"| {name} | {split} | {n} ({pos}) | {k.precision:.3f} ({k.fp} FP) | "
        f"{k.recall:.3f} ({k.fn} FN) | {k.f1:.3f} |"
    )


def table(convs: Sequence[Conversation], vecs: dict[str, F32]) -> tuple[str, list[str]]:
    lines = [
        "| gate | split | turns (durable) | precision | recall | F1 |",
        "|---|---|---|---|---|---|",
    ]
    for name, cfg in (("reference (0.35)", REFERENCE_CONFIG), ("default", DEFAULT_CONFIG)):
        if name == "default":
            name = f"default ({cfg.threshold})"
        for split in SPLITS:
            part = [c for c in convs if c.split == split]
            n = sum(len(c.texts) for c in part)
            pos = sum(sum(c.durable) for c in part)
            lines.append(_row(name, split, n, pos, evaluate(part, vecs, cfg)))
    dev = [c for c in convs if c.split in DEV_SPLITS]
    on_dev = choose_threshold(dev, vecs, DEFAULT_CONFIG)
    loo, chosen = leave_one_out(convs, vecs, DEFAULT_CONFIG)
    n = sum(len(c.texts) for c in convs)
    pos = sum(sum(c.durable) for c in convs)
    lines.append(_row("default, threshold by leave-one-out", "all", n, pos, loo))
    notes = [
        f"Best threshold on the dev parts ({' and '.join(DEV_SPLITS)}) alone: {on_dev}. "
        f"Leave-one-conversation-out chose "
        f"{min(chosen)}..{max(chosen)} over the {len(chosen)} rotations.",
    ]
    return "\n".join(lines), notes


def errors(convs: Sequence[Conversation], vecs: dict[str, F32]) -> list[str]:
    out: list[str] = []
    for c in convs:
        said = replay(c.texts, vecs[c.id], DEFAULT_CONFIG)
        for text, s, t in zip(c.texts, said, c.durable, strict=True):
            if s != t:
                out.append(f"{c.split} {c.id}: {'missed' if t else 'admitted'}: {text}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--errors", action="store_true", help="print the wrong decisions")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    convs = load()
    vecs = embed_all(convs)
    text, notes = table(convs, vecs)
    print(text)
    for note in notes:
        print(note)
    if args.errors:
        print("\n".join(errors(convs, vecs)))
    if not args.no_write:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d")
        block = (
            f"Durable admission (`python scripts/eval_gate.py`, {stamp}): "
            f"`{DATA.relative_to(REPO)}`, {sum(len(c.texts) for c in convs)} user turns in "
            f"{len(convs)} conversations written for this project, each ingested one turn at "
            f"a time with the bundled embedder.\n\n{text}\n\n" + " ".join(notes) + "\n"
        )
        write_section(DOC, "gate", block, "Durable admission")
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
