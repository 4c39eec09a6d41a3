#!/usr/bin/env python3
"""Choose ``assembly.relevance_floor`` on a labelled set written for this project.

    python scripts/choose_relevance_floor.py [tests/memory/data/relevance_pairs.json]

A retrieved item is injected only when it is relevant to the query: its cosine with the
query is at least the floor, or it contains one of the query's keywords (the lexical
analyzer's terms). The floor is chosen here, on query/memory pairs written for the
project and labelled by hand, never on the evaluation data: every floor that classifies
the most pairs right forms an interval, and the floor is its midpoint (the widest margin
on both sides), to three decimals. ``make eval`` then reports what the floor costs
on LoCoMo.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.config import load_settings  # noqa: E402
from sidecar.engines import EngineHub  # noqa: E402
from sidecar.memory.core.analyzer import analyze, query_terms  # noqa: E402

DEFAULT_SET = REPO / "tests" / "memory" / "data" / "relevance_pairs.json"


@dataclass(frozen=True)
class FloorChoice:
    floor: float
    low: float  # the interval of floors with the best accuracy
    high: float
    accuracy: float
    pairs: int


def pair_signals(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cosine, keyword overlap, relevant) per labelled pair, with the bundled embedder."""
    pairs = json.loads(path.read_text())["pairs"]
    settings = load_settings({})
    hub = EngineHub.from_settings(settings.embedding, settings.summarizer, search_roots=[])
    embedder = hub.require_embedder()
    try:
        q = embedder.embed_sync([p["query"] for p in pairs], "query").vectors
        m = embedder.embed_sync([p["memory"] for p in pairs], "document").vectors
    finally:
        embedder.close()
    cosine = (np.asarray(q) * np.asarray(m)).sum(axis=1)
    overlap = np.array(
        [bool(set(query_terms(p["query"])) & set(analyze(p["memory"]))) for p in pairs]
    )
    relevant = np.array([bool(p["relevant"]) for p in pairs])
    return cosine, overlap, relevant


def accuracy(floor: float, cosine: np.ndarray, overlap: np.ndarray, relevant: np.ndarray) -> float:
    kept = (cosine >= floor) | overlap
    return float((kept == relevant).mean())


def choose(cosine: np.ndarray, overlap: np.ndarray, relevant: np.ndarray) -> FloorChoice:
    grid = np.round(np.arange(0.0, 0.6001, 0.001), 3)
    acc = np.array([accuracy(float(t), cosine, overlap, relevant) for t in grid])
    best = float(acc.max())
    at_best = grid[acc == best]
    # the first run of best floors (the set is small; a second run would be noise)
    run_end = 0
    while run_end + 1 < len(at_best) and at_best[run_end + 1] - at_best[run_end] < 0.0015:
        run_end += 1
    low, high = float(at_best[0]), float(at_best[run_end])
    return FloorChoice(round((low + high) / 2, 3), low, high, best, len(relevant))


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT_SET
    choice = choose(*pair_signals(path))
    print(
        f"{choice.pairs} pairs: best accuracy {choice.accuracy:.3f} for floors "
        f"{choice.low:.3f}..{choice.high:.3f}; relevance_floor = {choice.floor:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
