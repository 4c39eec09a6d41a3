#!/usr/bin/env python3
"""Choose the bar a query ``forget`` applies, on forget requests written for this project.

    python scripts/choose_forget_bar.py [tests/memory/data/forget_queries.json]

A query forget deletes only memories that clearly match the query (docs/memory.md,
"Forgetting by query"): ``cosine + weight * coverage >= bar``, where ``cosine`` is the
query's cosine with the memory and ``coverage`` the share of the query's keywords (the
lexical analyzer's terms) that the memory contains. Deleting the wrong memory loses data
and missing one only means the caller names it by id, so the bar is chosen for no false
match at all: on the dev stores, for each weight on a grid, the bar sits halfway between
the best-scoring non-match and the next match above it; the weight kept is the one that
then finds the most matches. The held-out stores are only measured, and a leave-one-out
over the dev stores shows how much the choice depends on the stores it saw.

``--daemon`` also runs every request through a real daemon (each store ingested as its
own namespace, then ``forget {query, limit: 50, dryRun: true}``), where a search proposes
the candidates and the daemon's configured bar decides: the figures a user gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.config import load_settings  # noqa: E402
from sidecar.engines import EngineHub  # noqa: E402
from sidecar.memory.core.analyzer import analyze, query_terms  # noqa: E402
from sidecar.memory.lifecycle.forget_match import keyword_coverage  # noqa: E402

DEFAULT_SET = REPO / "tests" / "memory" / "data" / "forget_queries.json"
WEIGHTS = np.round(np.arange(0.0, 1.001, 0.05), 2)


@dataclass(frozen=True)
class Pairs:
    """One row per (query, turn of its store)."""

    store: list[str]
    split: list[str]
    cosine: np.ndarray
    coverage: np.ndarray
    match: np.ndarray

    def subset(self, keep: np.ndarray) -> Pairs:
        return Pairs(
            [s for s, k in zip(self.store, keep, strict=True) if k],
            [s for s, k in zip(self.split, keep, strict=True) if k],
            self.cosine[keep],
            self.coverage[keep],
            self.match[keep],
        )


@dataclass(frozen=True)
class Bar:
    weight: float
    bar: float


def pair_signals(path: Path, profile: str = "") -> Pairs:
    data = json.loads(path.read_text())
    settings = load_settings({"embedding": {"profile": profile}} if profile else {})
    hub = EngineHub.from_settings(settings.embedding, settings.summarizer, search_roots=[])
    embedder = hub.require_embedder()
    store: list[str] = []
    split: list[str] = []
    cos: list[float] = []
    cov: list[float] = []
    match: list[bool] = []
    try:
        for s in data["stores"]:
            turns = np.asarray(embedder.embed_sync(s["turns"], "document").vectors)
            queries = [q["query"] for q in s["queries"]]
            qvecs = np.asarray(embedder.embed_sync(queries, "query").vectors)
            for q, qvec in zip(s["queries"], qvecs, strict=True):
                terms = query_terms(q["query"])
                for i, (text, tvec) in enumerate(zip(s["turns"], turns, strict=True)):
                    store.append(s["name"])
                    split.append(s["split"])
                    cos.append(float(np.dot(qvec, tvec)))
                    cov.append(keyword_coverage(terms, analyze(text)))
                    match.append(i in q["matches"])
    finally:
        embedder.close()
    return Pairs(store, split, np.array(cos), np.array(cov), np.array(match))


def score(p: Pairs, weight: float) -> np.ndarray:
    return np.asarray(p.cosine + weight * p.coverage)


def fit(p: Pairs) -> Bar:
    best: tuple[float, float, Bar] | None = None
    for w in WEIGHTS:
        s = score(p, float(w))
        top_miss = float(s[~p.match].max())
        above = s[p.match & (s > top_miss)]
        bar = (top_miss + float(above.min())) / 2 if above.size else top_miss + 0.01
        recall = float((s[p.match] >= bar).mean())
        margin = bar - top_miss
        if best is None or (recall, margin) > best[:2]:
            best = (recall, margin, Bar(float(w), round(bar, 3)))
    assert best is not None
    return best[2]


def measure(p: Pairs, b: Bar) -> tuple[int, int, int]:
    """(matches found, matches, non-matches wrongly taken)."""
    taken = score(p, b.weight) >= b.bar
    return int((taken & p.match).sum()), int(p.match.sum()), int((taken & ~p.match).sum())


def report(p: Pairs) -> Bar:
    dev = p.subset(np.array([s == "dev" for s in p.split]))
    held = p.subset(np.array([s == "heldout" for s in p.split]))
    chosen = fit(dev)
    print(f"chosen on dev: weight {chosen.weight}, bar {chosen.bar}")
    for name, part in (("dev", dev), ("held-out", held)):
        found, total, wrong = measure(part, chosen)
        print(f"  {name:9s} matches found {found}/{total}, wrong deletions {wrong}")
    found_all = total_all = wrong_all = 0
    for left in sorted(set(dev.store)):
        out = np.array([s == left for s in dev.store])
        b = fit(dev.subset(~out))
        found, total, wrong = measure(dev.subset(out), b)
        found_all, total_all, wrong_all = found_all + found, total_all + total, wrong_all + wrong
        print(
            f"  leave out {left:14s} weight {b.weight} bar {b.bar}: {found}/{total}, wrong {wrong}"
        )
    print(f"  leave-one-out    matches found {found_all}/{total_all}, wrong deletions {wrong_all}")
    return chosen


def through_daemon(path: Path) -> None:
    from libravdb_client import Client

    data = json.loads(path.read_text())
    with (
        tempfile.TemporaryDirectory() as tmp,
        Client.spawn(data_dir=tmp, stderr=subprocess.DEVNULL, timeout=120) as client,
    ):
        for split in ("dev", "heldout"):
            found = total = wrong = 0
            for store in (s for s in data["stores"] if s["split"] == split):
                ns = f"{split}-{store['name']}"
                messages = [
                    {"id": f"t{i}", "role": "user", "content": t}
                    for i, t in enumerate(store["turns"])
                ]
                client.call("ingest", {"sessionId": ns, "namespace": ns, "messages": messages})
                for q in store["queries"]:
                    params = {"namespace": ns, "query": q["query"], "limit": 50, "dryRun": True}
                    items = client.call("forget", params)["items"]
                    wanted = {store["turns"][i] for i in q["matches"]}
                    taken = {i["text"] for i in items}
                    found += len(taken & wanted)
                    total += len(wanted)
                    wrong += len(taken - wanted)
            print(f"  daemon {split:8s} matches found {found}/{total}, wrong deletions {wrong}")


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv and not argv[0].startswith("--") else DEFAULT_SET
    profile = next((a.split("=", 1)[1] for a in argv if a.startswith("--profile=")), "")
    report(pair_signals(path, profile))
    if "--daemon" in argv:
        through_daemon(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
