#!/usr/bin/env python3
"""Do extractive summaries keep the informative turns? Evidence key terms on LoCoMo.

    python scripts/eval_summaries.py [DATA.json] [--no-write]

Each LoCoMo session is cut into chronological clusters of ``compaction.target_size`` (20)
turns, and each cluster is summarized as compaction's extractive step does
(:func:`sidecar.memory.compaction.quality.extractive_select` over the turns' embeddings, at the
default density). For every turn that a question of categories 1-4 names as evidence,
its key terms (the lexical analyzer's terms: stop words out, light stemming) are looked
up in the summary of its cluster. Reported for the selection compaction uses (term
coverage) and the centroid selection it replaced: the mean share of an evidence turn's
key terms that survive, the share of evidence turns kept verbatim, and how large the
summaries are. No constant is tuned here: the density is compaction's default. The table
goes to docs/benchmarks.md between ``<!-- bench:summaries -->`` markers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.doc_sections import write_section  # noqa: E402
from scripts.locomo_data import DEFAULT_DATA, Conversation, load_conversations  # noqa: E402
from scripts.locomo_embed import CachedEmbedder, make_embedder  # noqa: E402
from sidecar.config import CompactionSettings  # noqa: E402
from sidecar.memory.compaction.quality import DEFAULT_DENSITY, extractive_select  # noqa: E402
from sidecar.memory.core.analyzer import analyze  # noqa: E402
from sidecar.memory.core.tokens import estimate_tokens  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"
CLUSTER = CompactionSettings().target_size


def measure(
    conv: Conversation, vectors: np.ndarray, cluster: int = CLUSTER, *, by_terms: bool = True
) -> tuple[list[float], list[bool], float]:
    """(key-term survival per evidence turn, kept verbatim per evidence turn, mean token
    share of the summaries) for one conversation. ``by_terms``: compaction's selection
    (term coverage); else the centroid selection it replaced, for the comparison."""
    evidence = {e for q in conv.questions if 1 <= q.category <= 4 for e in q.evidence}
    by_session: dict[str, list[int]] = {}
    for i, t in enumerate(conv.turns):
        by_session.setdefault(t.session_id, []).append(i)
    survival: list[float] = []
    verbatim: list[bool] = []
    shares: list[float] = []
    for rows in by_session.values():
        for start in range(0, len(rows), cluster):
            members = rows[start : start + cluster]
            if len(members) < 2:
                continue
            texts = [conv.turns[i].content for i in members]
            picked, _conf = extractive_select(
                vectors[members], DEFAULT_DENSITY, texts=texts if by_terms else None
            )
            summary_terms = set(analyze(" ".join(texts[j] for j in picked)))
            shares.append(
                sum(estimate_tokens(texts[j]) for j in picked)
                / max(1, sum(estimate_tokens(t) for t in texts))
            )
            for j, i in enumerate(members):
                if conv.turns[i].id not in evidence:
                    continue
                terms = set(analyze(texts[j]))
                if terms:
                    survival.append(len(terms & summary_terms) / len(terms))
                    verbatim.append(j in picked)
    return survival, verbatim, float(np.mean(shares)) if shares else 0.0


def table(convs: Sequence[Conversation], embedder: CachedEmbedder) -> str:
    lines = [
        "| selection | conversation | evidence turns | key terms kept | kept verbatim | "
        "summary tokens / cluster tokens |",
        "|---|---|---|---|---|---|",
    ]
    for name, by_terms in (("centroid (before)", False), ("term coverage (now)", True)):
        all_s: list[float] = []
        all_v: list[bool] = []
        all_share: list[float] = []
        for conv in convs:
            vecs = embedder.embed([t.content for t in conv.turns], "document")
            s, v, share = measure(conv, vecs, by_terms=by_terms)
            all_s += s
            all_v += v
            all_share.append(share)
            lines.append(
                f"| {name} | {conv.sample_id} | {len(s)} | {np.mean(s):.3f} | "
                f"{np.mean(v):.3f} | {share:.3f} |"
            )
        lines.append(
            f"| {name} | **overall** | {len(all_s)} | **{np.mean(all_s):.3f}** | "
            f"**{np.mean(all_v):.3f}** | {np.mean(all_share):.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    path = Path(args.data)
    convs = load_conversations(path)
    embedder = CachedEmbedder(make_embedder())
    text = table(convs, embedder)
    print(text)
    if not args.no_write:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d")
        block = (
            f"Extractive summaries and evidence (`python scripts/eval_summaries.py`, {stamp}, "
            f"`{path.name}`): clusters of {CLUSTER} turns per session, density "
            f"{DEFAULT_DENSITY}.\n\n{text}\n"
        )
        write_section(DOC, "summaries", block, "Summaries keep the evidence")
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
