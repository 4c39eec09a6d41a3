#!/usr/bin/env python3
"""How well conversation turns are told apart: rules to keep following vs the rest.

    python scripts/eval_rules.py [--split dev|holdout|all] [--errors] [--no-write]

Reads ``tests/memory/data/conversation_rules.json`` (user turns written for this project,
labelled rule / not a rule) and measures, per split:

* ``classifier``: :func:`sidecar.memory.authored.deontic.evaluate_text` says the turn is a rule;
* ``promotion``: :func:`sidecar.memory.compaction.continuity.protection_decision`, what compaction
  uses to move a user turn verbatim into elevated guidance (the classifier, or a surface
  hint plus similarity to the guidance prototypes with the bundled embedder).

Precision is the share of turns called rules that are rules; recall the share of rules
found. The table goes to docs/benchmarks.md between ``<!-- bench:rules -->`` markers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.confusion import Counts  # noqa: E402
from scripts.doc_sections import write_section  # noqa: E402
from sidecar.config import load_settings  # noqa: E402
from sidecar.engines import EngineHub  # noqa: E402
from sidecar.memory.authored.deontic import evaluate_text  # noqa: E402
from sidecar.memory.compaction.continuity import GUIDANCE_PROTOTYPES, protection_decision  # noqa: E402
from sidecar.memory.core.turns import stability_weight  # noqa: E402

DATA = REPO / "tests" / "memory" / "data" / "conversation_rules.json"
DOC = REPO / "docs" / "benchmarks.md"
USER_STABILITY = stability_weight("user")


@dataclass(frozen=True)
class Row:
    text: str
    rule: bool
    split: str


def load_rows(path: Path = DATA) -> list[Row]:
    return [
        Row(r["text"], bool(r["rule"]), r["split"]) for r in json.loads(path.read_text())["rows"]
    ]


def score(
    rows: Sequence[Row], predict: Callable[[str], bool]
) -> tuple[Counts, list[Row], list[Row]]:
    """(counts, false positives, false negatives)."""
    fps: list[Row] = []
    fns: list[Row] = []
    tp = tn = 0
    for r in rows:
        said = predict(r.text)
        if said and r.rule:
            tp += 1
        elif said:
            fps.append(r)
        elif r.rule:
            fns.append(r)
        else:
            tn += 1
    return Counts(tp, len(fps), len(fns), tn), fps, fns


def classifier(text: str) -> bool:
    return evaluate_text(text).promoted


def promotion_predictor() -> Callable[[str], bool]:
    """The compaction's decision for a user turn, with the bundled embedder's similarity."""
    settings = load_settings({})
    embedder = EngineHub.from_settings(
        settings.embedding, settings.summarizer, search_roots=[]
    ).require_embedder()
    protos = np.asarray(embedder.embed_sync(list(GUIDANCE_PROTOTYPES), "document").vectors)

    def similarity(text: str) -> float:
        vec = np.asarray(embedder.embed_sync([text], "document").vectors[0])
        return float((protos @ vec).max())

    def predict(text: str) -> bool:
        return protection_decision(text, USER_STABILITY, similarity=similarity).protected

    return predict


def table(rows: Sequence[Row], splits: Sequence[str]) -> tuple[str, dict[str, list[Row]]]:
    promote = promotion_predictor()
    lines = [
        "| split | turns (rules / not) | classifier precision | classifier recall | "
        "promotion precision | promotion recall |",
        "|---|---|---|---|---|---|",
    ]
    errors: dict[str, list[Row]] = {}
    for split in splits:
        part = [r for r in rows if split == "all" or r.split == split]
        c, _cfp, _cfn = score(part, classifier)
        p, pfp, pfn = score(part, promote)
        errors[split] = pfp + pfn
        n_rules = sum(r.rule for r in part)
        lines.append(
            f"| {split} | {len(part)} ({n_rules} / {len(part) - n_rules}) | {c.precision:.3f} "
            f"({c.fp} FP) | {c.recall:.3f} ({c.fn} FN) | {p.precision:.3f} ({p.fp} FP) | "
            f"{p.recall:.3f} ({p.fn} FN) |"
        )
    return "\n".join(lines), errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="all", choices=["dev", "holdout", "all"])
    parser.add_argument("--errors", action="store_true", help="print the misclassified turns")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rows = load_rows()
    splits = ["dev", "holdout", "all"] if args.split == "all" else [args.split]
    text, errors = table(rows, splits)
    print(text)
    if args.errors:
        for split, wrong in errors.items():
            for r in wrong:
                print(f"{split}: {'missed rule' if r.rule else 'false rule'}: {r.text}")
    if not args.no_write and args.split == "all":
        stamp = datetime.now(UTC).strftime("%Y-%m-%d")
        block = (
            f"Rules in conversation turns (`python scripts/eval_rules.py`, {stamp}): "
            f"`{DATA.relative_to(REPO)}`, user turns written for this project.\n\n{text}\n"
        )
        write_section(DOC, "rules", block, "Rules in conversation")
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
