"""Extractive summarizer: pick turns close to the cluster centroid, with MMR redundancy control.

Algorithm (deterministic):

1. Embed every non-empty turn as a document; centroid = arithmetic mean of the unit vectors.
2. relevance(i) = cos(turn_i, centroid).
3. Pick ``k = ceil(n * density)`` turns (density default 0.4; values outside (0, 1] mean 0.4;
   at least 1, at most n) by Maximal Marginal Relevance:
   ``score(i) = lambda * relevance(i) - (1 - lambda) * max_{j picked} cos(turn_i, turn_j)``,
   highest score first, ties to the earlier turn. The first pick is the most relevant turn.
   ``lambda`` defaults to 0.7; ``lambda = 1`` is the reference's pure relevance ranking.
4. Restore chronological order and join the stripped texts with single spaces.
5. Confidence = mean relevance of the picked turns, clamped to [0, 1]. Tokens = whitespace words.

With ``max_tokens`` set, picks that would push the word count past it are skipped (the first
pick is always kept), so the output respects the budget whenever one turn fits in it.

If the embedder is unavailable or fails, a deterministic lexical embedding (hashed word counts)
stands in, and the result says so in ``fallback_reason``: the extractive path never fails for
model reasons.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from .errors import EngineError, InvalidInputError
from .text import clean_text
from .vectors import l2_normalize

if TYPE_CHECKING:
    from .embedder import EmbedResult

DEFAULT_DENSITY = 0.4
DEFAULT_LAMBDA = 0.7
LEXICAL_DIMS = 256
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Selection:
    indices: list[int]  # chronological
    relevance: list[float]  # cos to centroid of each picked turn, same order
    confidence: float


def normalize_density(density: float | None) -> float:
    if density is None or not math.isfinite(density) or density <= 0 or density > 1:
        return DEFAULT_DENSITY
    return float(density)


def pick_count(n: int, density: float | None) -> int:
    d = normalize_density(density)
    return max(1, min(n, math.ceil(n * d - 1e-9)))


def select(
    vectors: npt.NDArray[np.floating],
    *,
    density: float | None = None,
    lambda_: float = DEFAULT_LAMBDA,
    word_counts: Sequence[int] | None = None,
    max_tokens: int | None = None,
) -> Selection:
    """MMR selection over turn vectors [n, d] (any scale; cosine is used throughout)."""
    vecs = np.asarray(vectors, dtype=np.float64)
    n = vecs.shape[0]
    if n == 0:
        raise InvalidInputError("nothing to summarize: no turns")
    if not 0.0 <= lambda_ <= 1.0:
        raise InvalidInputError(f"lambda must be within [0, 1], got {lambda_}")
    unit = l2_normalize(vecs).astype(np.float64)
    centroid = unit.mean(axis=0)
    cnorm = float(np.linalg.norm(centroid))
    rel = unit @ (centroid / cnorm) if cnorm >= 1e-12 else np.zeros(n)
    sim = unit @ unit.T
    k = pick_count(n, density)
    picked: list[int] = []
    words = 0
    available = list(range(n))
    max_sim = np.full(n, -np.inf)
    while len(picked) < k and available:
        scores = lambda_ * rel - (1.0 - lambda_) * max_sim if picked else rel.copy()
        best = -1
        best_score = -np.inf
        for i in available:  # ascending index: ties keep the earlier turn
            if scores[i] > best_score:
                best, best_score = i, float(scores[i])
        available.remove(best)
        if (
            picked
            and max_tokens is not None
            and word_counts is not None
            and words + word_counts[best] > max_tokens
        ):
            continue  # over budget: try the next best turn
        picked.append(best)
        if word_counts is not None:
            words += word_counts[best]
        max_sim = np.maximum(max_sim, sim[best])
    chrono = sorted(picked)
    relevance = [float(rel[i]) for i in chrono]
    conf = min(1.0, max(0.0, float(np.mean(relevance))))
    return Selection(chrono, relevance, conf)


def lexical_vectors(texts: Sequence[str], dims: int = LEXICAL_DIMS) -> npt.NDArray[np.float32]:
    """Deterministic bag-of-words vectors (hashed lower-cased word counts), L2-normalized."""
    out = np.zeros((len(texts), dims), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            out[row, h % dims] += 1.0 if (h >> 63) == 0 else -1.0
    return l2_normalize(out)


@dataclass(frozen=True)
class ExtractiveOutput:
    text: str
    confidence: float
    tokens: int
    indices: list[int]  # indices into the caller's texts, chronological
    fallback_reason: str


def prepare_turns(texts: Sequence[str]) -> tuple[list[int], list[str]]:
    """(original indices, stripped texts) of the non-empty turns."""
    if isinstance(texts, str):
        raise InvalidInputError("texts must be a list of strings, not a single string")
    keep: list[int] = []
    turns: list[str] = []
    for i, t in enumerate(texts):
        s = clean_text(t, i, allow_empty=True).strip()
        if s:
            keep.append(i)
            turns.append(s)
    if not turns:
        raise InvalidInputError("nothing to summarize: every turn is empty")
    return keep, turns


def assemble(
    keep: Sequence[int],
    turns: Sequence[str],
    vectors: npt.NDArray[np.floating],
    *,
    density: float | None,
    lambda_: float,
    max_tokens: int | None,
    fallback_reason: str = "",
) -> ExtractiveOutput:
    counts = [len(t.split()) for t in turns]
    sel = select(
        vectors, density=density, lambda_=lambda_, word_counts=counts, max_tokens=max_tokens
    )
    text = " ".join(turns[i] for i in sel.indices)
    return ExtractiveOutput(
        text=text,
        confidence=sel.confidence,
        tokens=len(text.split()),
        indices=[keep[i] for i in sel.indices],
        fallback_reason=fallback_reason,
    )


class SyncEmbedder(Protocol):
    def embed_sync(self, texts: Sequence[str], kind: str = ...) -> EmbedResult: ...


def summarize_sync(
    texts: Sequence[str],
    embedder: SyncEmbedder | None,
    *,
    density: float | None = None,
    lambda_: float = DEFAULT_LAMBDA,
    max_tokens: int | None = None,
) -> ExtractiveOutput:
    """Blocking extractive summary using ``embedder.embed_sync`` (or lexical vectors)."""
    keep, turns = prepare_turns(texts)
    reason = ""
    vectors: npt.NDArray[np.floating]
    if embedder is None:
        reason = "no embedder available; used lexical similarity"
        vectors = lexical_vectors(turns)
    else:
        try:
            vectors = embedder.embed_sync(turns, "document").vectors
        except EngineError as exc:
            reason = f"embedder failed ({exc}); used lexical similarity"
            vectors = lexical_vectors(turns)
    return assemble(
        keep,
        turns,
        vectors,
        density=density,
        lambda_=lambda_,
        max_tokens=max_tokens,
        fallback_reason=reason,
    )
