"""The evaluation's retrieval machinery over one LoCoMo conversation: its embeddings and
BM25 indexes (:class:`ConvData`), the plain baselines' rankings and budget fill, and the
in-process ``assemble`` (:func:`inprocess_plan`) the runners of ``eval_locomo`` share."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.locomo_data import Conversation  # noqa: E402
from scripts.locomo_embed import CachedEmbedder  # noqa: E402
from sidecar.assembly.candidates import Candidate, named_speakers, text_label  # noqa: E402
from sidecar.assembly.density import Density  # noqa: E402
from sidecar.assembly.duplicates import text_key  # noqa: E402
from sidecar.assembly.implicit import ImplicitPool, top_rows  # noqa: E402
from sidecar.assembly.plan import plan_assembly  # noqa: E402
from sidecar.assembly.selection import DEFAULT_ASSEMBLY, AssemblyConfig, AssemblyPlan  # noqa: E402
from sidecar.assembly.speaker_focus import MAX_SPEAKERS, speaker_label, without_labels  # noqa: E402
from sidecar.engines.int8scan import Scan  # noqa: E402
from sidecar.memory.core.lexical import BM25Index  # noqa: E402
from sidecar.memory.core.temporal import mentioned_windows, plan_temporal  # noqa: E402
from sidecar.memory.core.tokens import estimate_tokens  # noqa: E402

MEMORY_FRACTION = 0.25
RRF_K = 60

F32 = npt.NDArray[np.float32]


# --------------------------------------------------------------------------- baselines


def fill_budget(ranked: Iterable[int], costs: Sequence[int], budget: int) -> list[int]:
    """Greedy in rank order; an item that does not fit is skipped and the fill goes on."""
    used = 0
    out: list[int] = []
    for i in ranked:
        c = costs[i]
        if used + c <= budget:
            out.append(i)
            used += c
            if used >= budget:
                break
    return out


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            scores[i] = scores.get(i, 0.0) + 1.0 / (k + r + 1)
    return sorted(scores, key=lambda i: (-scores[i], i))


def recall(selected_ids: Iterable[str], evidence: Sequence[str]) -> float:
    got = set(selected_ids)
    return sum(1 for e in evidence if e in got) / len(evidence) if evidence else 0.0


@dataclass
class ConvData:
    conv: Conversation
    doc_vecs: F32
    query_vecs: F32
    costs: list[int]
    bm25: BM25Index
    index_of: dict[str, int] = field(default_factory=dict)
    by_position: dict[tuple[str, int], int] = field(default_factory=dict)
    bm25_plain: BM25Index | None = None  # the baselines' plain analyzer
    adversarial_vecs: F32 | None = None  # category 5, for the retrieval-only metrics
    # the speakers' label embeddings, most frequent speaker first (the daemon's order)
    label_vecs: dict[str, F32] = field(default_factory=dict)
    density: Density | None = None  # implicit recall's, built on first use


def prepare(conv: Conversation, embedder: CachedEmbedder) -> ConvData:
    texts = [t.content for t in conv.turns]
    doc_vecs = embedder.embed(texts, "document")
    query_vecs = embedder.embed([q.text for q in conv.questions], "query")
    adversarial_vecs = embedder.embed([q.text for q in conv.adversarial], "query")
    bm25 = BM25Index()
    plain = BM25Index(stem="none", stopwords=frozenset())
    for t in conv.turns:
        bm25.add(t.id, t.content)
        plain.add(t.id, t.content)
    counts = Counter(s for t in conv.turns if (s := text_label(t.content)))
    names = [n for n, _ in counts.most_common()]
    labels: Sequence[F32] = (
        list(embedder.embed([speaker_label(n) for n in names], "document")) if names else []
    )
    return ConvData(
        conv,
        doc_vecs,
        query_vecs,
        [estimate_tokens(x) for x in texts],
        bm25,
        {t.id: i for i, t in enumerate(conv.turns)},
        {(t.session_id, t.position): i for i, t in enumerate(conv.turns)},
        plain,
        adversarial_vecs,
        dict(zip(names, labels, strict=True)),
    )


def query_vector(data: ConvData, qi: int, config: AssemblyConfig) -> F32:
    """The question's vector as the daemon's ``assemble`` searches with it: the labels of
    the speakers it names partly taken out (:mod:`sidecar.assembly.speaker_focus`)."""
    qvec = data.query_vecs[qi]
    names = named_speakers(data.conv.questions[qi].text, data.label_vecs)
    labels = [data.label_vecs[n] for n in names]
    return without_labels(qvec, labels, config.speaker_label_weight)


def baseline_rankings(data: ConvData, qi: int) -> dict[str, list[int]]:
    """Plain baselines: cosine, BM25 with a plain analyzer (lowercased word tokens, no
    stemming, no stop words), their RRF; and, for reference, BM25 with the project's
    analyzer (stop words, light stemming) and its RRF (``bm25*``, ``rrf*``)."""
    q = data.conv.questions[qi]
    sims = data.doc_vecs @ data.query_vecs[qi]
    cos_rank = [int(i) for i in np.argsort(-sims, kind="stable")]
    n = len(data.conv.turns)
    plain = data.bm25_plain or data.bm25
    bm_rank = [data.index_of[d] for d, _ in plain.search(q.text, k=n)]
    bm_star = [data.index_of[d] for d, _ in data.bm25.search(q.text, k=n)]
    return {
        "cosine": cos_rank,
        "bm25": bm_rank,
        "rrf": rrf([cos_rank, bm_rank]),
        "bm25*": bm_star,
        "rrf*": rrf([cos_rank, bm_star]),
    }


# ---------------------------------------------------------------------------- runners


POOL_DENSE_K = 50
POOL_LEXICAL_K = 50


def conversation_candidates(data: ConvData) -> list[Candidate]:
    """The raw turns as the daemon's cache holds them after ``ingest`` (with the times
    they mention, resolved against when they were said)."""
    ns = data.conv.sample_id
    return [
        Candidate(
            kind="turn",
            collection=f"turns:{ns}",
            id=t.id,
            text=t.content,
            scope="history",
            session_id=t.session_id,
            role=t.role,
            ts=t.ts,
            seq=t.position,
            vector=data.doc_vecs[i],
            metadata=_mentions(t.content, t.ts),
        )
        for i, t in enumerate(data.conv.turns)
    ]


def _mentions(text: str, ts: int) -> dict[str, object]:
    mentions = mentioned_windows(text, ts)
    return {"mentions": mentions} if mentions else {}


def conversation_density(data: ConvData) -> Density:
    """The implicit channel's densities over the conversation's turns, as the daemon's
    view of the raw history keeps them (the labels of its most frequent speakers)."""
    if data.density is None:
        turns = data.conv.turns
        labels = dict(list(data.label_vecs.items())[:MAX_SPEAKERS])
        dens = Density()
        dens.update(
            0,
            data.doc_vecs,
            lambda i: text_label(turns[i].content),
            lambda i: turns[i].role == "user",
            labels,
            (),
            lambda i: text_key(turns[i].role, turns[i].content),
        )
        data.density = dens
    return data.density


def implicit_pool(
    data: ConvData, cands: Sequence[Candidate], qi: int, config: AssemblyConfig
) -> ImplicitPool | None:
    """The implicit channel's candidates for question ``qi`` (the daemon's, in-process)."""
    if not config.implicit.enabled:
        return None
    qvec = data.query_vecs[qi]
    dens = conversation_density(data)
    if not dens.trusted:  # a small history: the hybrid ranking answers alone
        return None
    rows, scores, standout = top_rows(
        dens, qvec, config.implicit.candidates, scan=Scan(data.doc_vecs, qvec, None)
    )
    names = bool(named_speakers(data.conv.questions[qi].text, data.label_vecs))
    return ImplicitPool(
        tuple(cands[i] for i in rows.tolist()), tuple(scores.tolist()), standout, names
    )


def inprocess_plan(
    data: ConvData,
    cands: Sequence[Candidate],
    qi: int,
    budget: int,
    *,
    config: AssemblyConfig = DEFAULT_ASSEMBLY,
    now_ms: int | None = None,
    dense_k: int = POOL_DENSE_K,
    lexical_k: int = POOL_LEXICAL_K,
) -> AssemblyPlan:
    """``assemble`` from a fresh session, in-process: the pool is what the daemon's two
    searches would return (dense top-k over the namespace's raw turns, BM25 top-k), each
    candidate carrying its cosine; neighbours come from the same raw history."""
    q = data.conv.questions[qi]
    now = int(time.time() * 1000) if now_ms is None else now_ms
    qvec = query_vector(data, qi, config)
    sims = data.doc_vecs @ qvec
    top = np.argsort(-sims, kind="stable")[: max(0, dense_k)]
    plan = plan_temporal(q.text, now, mention_slack_days=config.mention_slack_days)
    lex_hits = data.bm25.search(plan.content_query or q.text, lexical_k)
    index_of = data.index_of
    chosen = dict.fromkeys([int(i) for i in top] + [index_of[h] for h, _ in lex_hits])
    pool = [cands[i] for i in chosen]
    by_pos = data.by_position

    def neighbors(turns: Sequence[Candidate]) -> list[Candidate]:
        out: list[Candidate] = []
        for c in turns:
            for d in (-1, 1):
                j = by_pos.get((c.session_id, (c.seq or 0) + d))
                if j is not None:
                    out.append(cands[j])
        return out

    return plan_assembly(
        query=q.text,
        query_vector=qvec,
        token_budget=budget / MEMORY_FRACTION,
        memory_fraction=MEMORY_FRACTION,
        session_id=f"{data.conv.sample_id}:fresh",
        candidates=pool,
        now_ms=now,
        lexical=data.bm25,
        terms_of=lambda c: data.bm25.doc_terms(c.id),
        neighbors=neighbors,
        config=config,
        implicit=implicit_pool(data, cands, qi, config),
    )
