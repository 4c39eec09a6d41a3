"""Hybrid ranking of retrieval candidates (pure, numpy).

A :class:`Candidate` is anything the assembler may inject: a raw turn (of the current
session or of the namespace's earlier sessions), a summary, a durable memory, a global
record, an authored variant node, an elevated guidance shard or a dream entry. It
carries its text, where it came from (``scope``, ``collection``, ``session_id``), the
client turn ids it covers (``turn_ids``), its event time ``ts`` (epoch ms) and session
position ``seq`` when it is a turn, and either a unit ``vector`` or a precomputed
``dense`` cosine, plus optionally a precomputed ``lexical`` BM25 score.

The final score of a candidate ``d`` for a query ``q`` is a product, so that no prior
can lift an irrelevant record above a relevant one::

    score(d) = ctx(d) * P(d) * Q(d) * Omega(d) * K(d) * T(d)

* **Relevance** ``rel(d)`` fuses the dense and the lexical channel (the query vector of
  a question that names a speaker has part of the speaker's label taken out before it
  gets here: :mod:`sidecar.assembly.speaker_focus`). Score fusion
  (default): ``(1 - lambda) * c_n(d) + lambda * b_n(d)``, ``c_n`` the cosine min-max
  normalised over the candidate pool, ``b_n = bm25 / max bm25``, lambda 0.4. Weighted
  reciprocal-rank fusion is available (``fusion="rrf"``); on the LoCoMo dev split score
  fusion was better at every k tried (docs/benchmarks.md).
* **Context** ``ctx(d) = rel(d) + mu * max(rel(prev), rel(next)) + rho * max rel(session(d))
  + sigma * [speaker(d) is the one person q names]``. A turn next to a matching turn (the
  question it answers, the answer to it) and a turn of a matching session gain; so does
  a turn said by the person the query asks about. Neighbours are the turns of the same
  session at ``seq +- 1`` present in the pool (the assembler fetches missing neighbours
  through a hook); the session term uses the best turn of the session in the pool.
  Defaults mu 0.3, rho 0.5, sigma 0.3. Speakers come from ``speaker``,
  ``metadata.speaker``/``name`` or a transcript prefix ``"Name: "``.
* **Prior** ``P(d) = alpha' + beta * R(d) + gamma * S(d)``, with the
  similarity term moved into ``ctx``. ``R(d) = exp(-lambda_scope * age_s)`` with the
  per-scope decay, ``S(d)`` the scope weight (:data:`SCOPES`: session 1.0, history
  and durable 0.6, global 0.3, ...), beta 0.2, gamma 0.1, ``alpha' = 1 - beta - gamma``,
  so ``P`` is in [0.7, 1]. Recency and scope modulate relevance, never replace it.
* **Summary quality** ``Q(d) = 1 - delta * decay_rate`` for summaries (delta 0.5;
  ``decay_rate`` or ``1 - confidence``), 1 otherwise.
* **Authority and access frequency** ``Omega(d) = 1 + w_f * f(d) + w_a * a(d)``,
  ``f = ln(1 + acc) / ln(1 + max acc)`` over the pool, ``a`` the record's
  ``authority`` (1 for authored records); w_f 0.1, w_a 0.2.
* **Keyword coverage** ``K(d) = (1 + kappa * M(K, d)) / (1 + kappa)`` with ``M``
  the share of the query's keywords (lexical analyzer terms) found in ``d``; kappa 0.1
  (mostly redundant with BM25 once the lexical channel is fused; higher values cost
  recall on the dev split).
* **Superseded** facts (``superseded_by``, set by ``memory.update`` or by a later turn
  that says the fact changed, ``memory/ingest/changes``) are multiplied by
  ``superseded_factor`` (0.3): the newer statement outranks what it replaced, which
  stays findable, and is not ranked down at all for history questions
  (``temporal.asks_history``: "where did I live before?"). Chosen, not fitted.
* **Temporal** ``T(d) = 1 + tau * affinity(d) + w_o * order(d)`` from the query's
  :class:`~sidecar.memory.core.temporal.TemporalPlan`: tau 0.3 for date anchors, the
  affinity being the better of when the record was said and the times it mentions
  (``mentions``, resolved at ingest: "yesterday" said on 8 May is 7 May); ``order`` the
  chronological position (earliest = 1 for "first" questions, latest = 1 for "last"
  ones), w_o 0.05.

Defaults were chosen on the LoCoMo dev split by a small grid over (lambda, mu, rho,
sigma, kappa), the same values for every conversation; leave-one-conversation-out
selection over the same grid gives 0.881 against 0.890 in-sample, and every point of the
grid was within 0.024 of the best (docs/benchmarks.md).

Similarity floor: a candidate with cosine below ``theta1`` (0.05), no BM25 score,
no query keyword and no matching neighbour is dropped as orthogonal noise.

:func:`rank_table` ranks, best first; each item's score parts (a :class:`Scored`) serve
``reason`` and debugging. Everything is deterministic: ties break by collection and id.

What a candidate contributes whatever the query (its source turns, speaker, summary
decay, authority, its vector as a float32 row) is computed once per candidate and kept
on it (:func:`features`), since the daemon reuses its candidates across calls; a ranking
is then a few array operations over those cached parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import (
    DEFAULT_SCOPE,
    SCOPES,
    Candidate,
    Features,
    ScopeParams,
    clamp01,
    features,
    named_speakers,
    row_vector,
    stack_rows,
)
from sidecar.memory.core.analyzer import analyze, query_terms
from sidecar.memory.core.lexical import BM25Index
from sidecar.memory.core.lexical_index import LexicalIndex
from sidecar.memory.core.temporal import TemporalPlan, asks_history

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

Fusion = Literal["score", "rrf"]

NO_ROWS: tuple[F32, ...] = ()  # no stacked vector rows (Channels.vectors, Ranking.vectors)


# ---------------------------------------------------------------------------- config


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    fusion: Fusion = "score"
    lexical_weight: float = 0.4  # lambda of score fusion
    rrf_k: int = 10
    rrf_dense_weight: float = 1.25
    neighbor_weight: float = 0.3  # mu
    session_weight: float = 0.5  # rho
    speaker_weight: float = 0.3  # sigma
    beta: float = 0.2  # recency
    gamma: float = 0.1  # scope weight
    delta: float = 0.5  # summary quality
    frequency_weight: float = 0.0  # omega_f
    authority_weight: float = 0.2  # omega_a
    kappa: float = 0.1  # keyword coverage
    tau: float = 0.3  # temporal affinity
    order_weight: float = 0.05  # first/last ordering preference
    theta1: float = 0.05  # similarity floor (with no keyword overlap)
    superseded_factor: float = 0.3  # a fact replaced by memory.update (never tuned on dev)
    scopes: Mapping[str, ScopeParams] = field(default_factory=lambda: dict(SCOPES))

    def scope(self, name: str) -> ScopeParams:
        return self.scopes.get(name, DEFAULT_SCOPE)


DEFAULT_SCORING = ScoringConfig()


@dataclass(frozen=True, slots=True)
class Scored:
    """A ranked candidate and the parts of its score (``nan`` = not applicable)."""

    candidate: Candidate
    score: float
    dense: float = 0.0
    lexical: float = 0.0
    rel: float = 0.0
    ctx: float = 0.0
    prior: float = 1.0
    kw: float = 0.0
    speaker: float = 0.0
    quality: float = 1.0
    auth: float = 1.0
    time: float = 0.0
    hop: float = 0.0

    @property
    def parts(self) -> dict[str, float]:
        """The non-neutral parts by name (for debugging and ``reason``)."""
        out = {
            "dense": self.dense,
            "lexical": self.lexical,
            "rel": self.rel,
            "ctx": self.ctx,
            "prior": self.prior,
            "kw": self.kw,
        }
        for name, value, neutral in (
            ("speaker", self.speaker, 0.0),
            ("Q", self.quality, 1.0),
            ("auth", self.auth, 1.0),
            ("time", self.time, 0.0),
            ("hop", self.hop, 0.0),
        ):
            if value != neutral:
                out[name] = value
        return out

    def reason(self) -> str:
        """A compact account of the score: the channels, the context, and whichever
        other factor is not neutral."""
        text = f"dense={self.dense:.3f} bm25={self.lexical:.2f} ctx={self.ctx:.3f}"
        if self.speaker:
            text += " speaker"
        if self.time:
            text += f" time={self.time:.2f}"
        if self.quality != 1.0:
            text += f" Q={self.quality:.2f}"
        if self.auth != 1.0:
            text += f" auth={self.auth:.2f}"
        if self.hop:
            text += " hop"
        return text


class LexicalScorer(Protocol):
    """Scores ``(collection, id)`` keys for a query with corpus statistics (the daemon's
    :class:`~sidecar.memory.core.lexical_index.LexicalIndex`)."""

    def score(
        self, query: str, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], float]: ...


class _SingleIndex:
    def __init__(self, index: BM25Index) -> None:
        self.index = index

    def score(self, query: str, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], float]:
        keys = list(keys)
        s = self.index.score(query, [k[1] for k in keys])
        return {k: s[k[1]] for k in keys}

    def score_hits(
        self, query: str, keys: Sequence[tuple[str, str]]
    ) -> tuple[list[float], list[int]]:
        return self.index.score_hits(query, [k[1] for k in keys])


ScoreHits = Callable[[str, Sequence[tuple[str, str]]], tuple[list[float], list[int]]]


def _score_hits(scorer: LexicalScorer) -> ScoreHits | None:
    """The scorer's list form (scores and query-term hits per key) when it is one of ours
    and ``score`` is not overridden."""
    if isinstance(scorer, _SingleIndex):
        return scorer.score_hits
    if isinstance(scorer, LexicalIndex) and type(scorer).score is LexicalIndex.score:
        return scorer.score_hits
    return None


def as_lexical_scorer(
    index: BM25Index | LexicalIndex | LexicalScorer | None,
) -> LexicalScorer | None:
    if isinstance(index, BM25Index):
        return _SingleIndex(index)
    return index


# ----------------------------------------------------------------------------- parts


def dense_scores(query_vector: F32 | None, candidates: Sequence[Candidate]) -> F64:
    """Cosine per candidate: ``dense`` when given, else ``vector · query`` (unit
    vectors assumed), else 0."""
    return _dense(query_vector, candidates)[0]


def _dense(query_vector: F32 | None, candidates: Sequence[Candidate]) -> tuple[F64, F32 | None]:
    """:func:`dense_scores` and the stacked rows of the candidates when every one was
    multiplied (a vector each and no precomputed ``dense``), else None."""
    out = np.zeros(len(candidates), dtype=np.float64)
    need: list[int] = []
    rows: list[F32] = []
    for i, c in enumerate(candidates):
        if c.dense is not None:
            out[i] = float(c.dense)
        elif c.vector is not None and query_vector is not None:
            need.append(i)
            rows.append(row_vector(c))
    mat = None
    if need and query_vector is not None:
        q = np.asarray(query_vector, dtype=np.float32).ravel()
        mat = stack_rows(rows)
        out[need] = mat @ q
    if not np.isfinite(out).all():
        out = np.nan_to_num(out)
    return np.clip(out, -1.0, 1.0), mat if len(need) == len(candidates) else None


def lexical_scores(
    query: str,
    candidates: Sequence[Candidate],
    scorer: LexicalScorer | None = None,
) -> F64:
    """BM25 per candidate: ``lexical`` when given, else from ``scorer`` (corpus
    statistics), else BM25 over the pool itself (statistics of the candidates)."""
    return _lexical_channel(query, candidates, scorer)[0]


def _lexical_channel(
    query: str,
    candidates: Sequence[Candidate],
    scorer: LexicalScorer | None = None,
) -> tuple[F64, F64 | None]:
    """:func:`lexical_scores`, and when one of our indexes scored every candidate, the
    number of distinct query terms each candidate's indexed document contains (-1: not
    indexed), else None."""
    out = np.zeros(len(candidates), dtype=np.float64)
    missing: list[int] = []
    for i, c in enumerate(candidates):
        if c.lexical is not None:
            out[i] = float(c.lexical)
        else:
            missing.append(i)
    if not missing:
        return out, None
    if scorer is not None:
        keys = [(c._features or features(c)).key for c in map(candidates.__getitem__, missing)]
        as_list = _score_hits(scorer)
        if as_list is not None:
            got_scores, got_hits = as_list(query, keys)
            out[missing] = got_scores
            if len(missing) == len(candidates):
                return out, np.asarray(got_hits, dtype=np.float64)
        else:
            got = scorer.score(query, keys)
            out[missing] = [got.get(k, 0.0) for k in keys]
        return out, None
    pool = BM25Index()
    for i in missing:
        pool.add(str(i), candidates[i].text)
    got_pool = pool.score(query, [str(i) for i in missing])
    for i in missing:
        out[i] = got_pool[str(i)]
    return out, None


def fuse(dense: F64, lexical: F64, cfg: ScoringConfig = DEFAULT_SCORING) -> F64:
    """Relevance in [0, 1] from the two channels (module doc)."""
    n = dense.shape[0]
    if n == 0:
        return np.zeros(0)
    if cfg.fusion == "rrf":
        out = np.zeros(n)
        k = max(1, cfg.rrf_k)
        order_d = np.argsort(-dense, kind="stable")
        out[order_d] += cfg.rrf_dense_weight / (k + 1 + np.arange(n))
        lex_pos = lexical > 0
        if lex_pos.any():
            order_l = np.argsort(-lexical, kind="stable")
            ranks_l = np.empty(n)
            ranks_l[order_l] = np.arange(n)
            out += np.where(lex_pos, 1.0 / (k + 1 + ranks_l), 0.0)
        top = (cfg.rrf_dense_weight + 1.0) / (k + 1)
        return np.asarray(out / top, dtype=np.float64)
    hi, lo = float(dense.max()), float(dense.min())
    c_norm = (dense - lo) / (hi - lo) if hi > lo else np.where(dense > 0, 1.0, 0.0)
    bmax = float(lexical.max())
    b_norm = lexical / bmax if bmax > 0 else np.zeros(n)
    lam = min(max(cfg.lexical_weight, 0.0), 1.0)
    return np.asarray((1.0 - lam) * c_norm + lam * b_norm, dtype=np.float64)


def context_scores(
    rel: F64, candidates: Sequence[Candidate], cfg: ScoringConfig = DEFAULT_SCORING
) -> tuple[F64, F64]:
    """``(neighbour term, session term)`` per candidate (raw turns with a session and a
    ``seq`` only; 0 otherwise)."""
    kinds = [c.kind for c in candidates]
    sids = [c.session_id for c in candidates]
    seqs = [c.seq for c in candidates]
    return _context(rel, kinds, sids, seqs, cfg)


def _context(
    rel: F64,
    kinds: Sequence[str],
    session_ids: Sequence[str],
    seq_of: Sequence[int | None],
    cfg: ScoringConfig,
) -> tuple[F64, F64]:
    """:func:`context_scores` from the candidates' ``kind``, ``session_id`` and ``seq``."""
    n = len(kinds)
    neigh = np.zeros(n)
    sess = np.zeros(n)
    if n == 0 or (cfg.neighbor_weight <= 0 and cfg.session_weight <= 0):
        return neigh, sess
    turns = [
        (i, sid, seq)
        for i, kind, sid, seq in zip(range(n), kinds, session_ids, seq_of, strict=True)
        if kind == "turn" and sid
    ]
    if not turns:
        return neigh, sess
    index, sids, seqs = zip(*turns, strict=True)
    code_of: dict[str, int] = {}
    codes = np.array([code_of.setdefault(sid, len(code_of)) for sid in sids], dtype=np.int64)
    at = np.array(index, dtype=np.intp)
    vals = rel[at]
    # the best turn of each session: a running max(best, rel) from 0.0 keeps 0.0 unless a
    # value is above it (NaN never is), so it is the largest positive value, else 0.0
    best = np.zeros(len(code_of))
    np.maximum.at(best, codes, np.where(vals > 0.0, vals, 0.0))
    sess[at] = best[codes]
    if None in seqs or min(seqs) <= -_SEQ_SPAN or max(seqs) >= _SEQ_SPAN - 1:
        _neighbour_terms(rel, turns, neigh)
    else:
        # (session, seq) as one sortable integer; the last turn with a key wins, as in a
        # dict filled in order
        key = codes * (2 * _SEQ_SPAN) + (np.array(seqs, dtype=np.int64) + _SEQ_SPAN)
        order = np.argsort(key, kind="stable")
        sorted_keys = key[order]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = sorted_keys[1:] != sorted_keys[:-1]
        keys, owner = sorted_keys[last], at[order[last]]

        def rel_at(k: npt.NDArray[np.int64]) -> F64:
            pos = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
            return np.where(keys[pos] == k, rel[owner[pos]], 0.0)

        before, after = rel_at(key - 1), rel_at(key + 1)
        neigh[at] = np.where(after > before, after, before)  # max(before, after)
    return cfg.neighbor_weight * neigh, cfg.session_weight * sess


_SEQ_SPAN = 2**31  # seqs in (-span, span - 1) pack with their session into an int64


def _neighbour_terms(rel: F64, turns: Sequence[tuple[int, str, int | None]], neigh: F64) -> None:
    """``max(rel(prev), rel(next))`` of each turn with a ``seq``, into ``neigh`` (for
    any ``seq``: the general case of :func:`context_scores`)."""
    rel_of = rel.tolist()
    at: dict[tuple[str, int], int] = {}
    for i, sid, seq in turns:
        if seq is not None:
            at[(sid, seq)] = i
    for i, sid, seq in turns:
        if seq is not None:
            p = at.get((sid, seq - 1))
            q = at.get((sid, seq + 1))
            neigh[i] = max(rel_of[p] if p is not None else 0.0, rel_of[q] if q is not None else 0.0)


def prior(c: Candidate, now_ms: int | None, cfg: ScoringConfig = DEFAULT_SCORING) -> float:
    """``alpha' + beta·R + gamma·S`` (module doc); a missing ``ts`` or ``now`` counts as age 0."""
    params = cfg.scope(c.scope)
    age_s = 0.0
    if now_ms is not None and c.ts is not None and c.ts > 0:
        age_s = max(0.0, (now_ms - c.ts) / 1000.0)
    recency = math.exp(-params.decay_per_s * age_s)
    beta = min(max(cfg.beta, 0.0), 1.0)
    gamma = min(max(cfg.gamma, 0.0), 1.0 - beta)
    return (1.0 - beta - gamma) + beta * recency + gamma * clamp01(params.weight)


def summary_quality(c: Candidate, cfg: ScoringConfig = DEFAULT_SCORING) -> float:
    """``1 - delta·decay_rate`` for summaries (``decay_rate`` or ``1 - confidence``)."""
    if not c.is_summary:
        return 1.0
    decay = c.metadata.get("decay_rate")
    if not isinstance(decay, int | float):
        conf = c.metadata.get("confidence")
        decay = 1.0 - float(conf) if isinstance(conf, int | float) else 0.5
    return 1.0 - clamp01(cfg.delta) * clamp01(float(decay))


def access_count(c: Candidate) -> int:
    v = c.metadata.get("access_count")
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else 0


# ------------------------------------------------------------------------------- rank


@dataclass(frozen=True, slots=True)
class QueryContext:
    """What :func:`rank_table` needs about the query, computed once per assemble."""

    text: str
    vector: F32 | None
    plan: TemporalPlan | None = None
    now_ms: int | None = None
    keywords: tuple[str, ...] = ()
    lexical_query: str = ""

    @staticmethod
    def build(
        text: str,
        vector: F32 | None,
        *,
        plan: TemporalPlan | None = None,
        now_ms: int | None = None,
    ) -> QueryContext:
        lex = plan.content_query if plan is not None and plan.content_query else text
        return QueryContext(text, vector, plan, now_ms, tuple(query_terms(lex)), lex)


@dataclass(frozen=True, slots=True)
class Channels:
    """The dense and lexical score of each candidate of a pool (computed once).
    ``vectors``: the candidates' float32 rows, in blocks, when every candidate has a vector
    (the matrix the dense channel multiplied; the assembler's diversity term reuses it),
    else empty."""

    dense: F64
    lexical: F64
    vectors: tuple[F32, ...] = field(default=NO_ROWS, compare=False, repr=False)
    # per candidate, how many of the query's keywords its indexed document contains
    # (-1: not indexed), when the lexical index answered for every candidate and its
    # query terms are the keywords; else None (rank_table then reads the terms itself)
    keyword_hits: F64 | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def compute(
        query: QueryContext,
        candidates: Sequence[Candidate],
        lexical: BM25Index | LexicalIndex | LexicalScorer | None = None,
    ) -> Channels:
        dense, rows = _dense(query.vector, candidates)
        lex_query = query.lexical_query or query.text
        scores, hits = _lexical_channel(lex_query, candidates, as_lexical_scorer(lexical))
        if hits is not None and tuple(query_terms(lex_query)) != query.keywords:
            hits = None
        return Channels(dense, scores, (rows,) if rows is not None else NO_ROWS, hits)

    def extend(self, other: Channels) -> Channels:
        both = bool(self.vectors) and bool(other.vectors)
        hits = (
            np.concatenate([self.keyword_hits, other.keyword_hits])
            if self.keyword_hits is not None and other.keyword_hits is not None
            else None
        )
        return Channels(
            np.concatenate([self.dense, other.dense]),
            np.concatenate([self.lexical, other.lexical]),
            self.vectors + other.vectors if both else NO_ROWS,
            hits,
        )


def preliminary(channels: Channels, cfg: ScoringConfig = DEFAULT_SCORING) -> F64:
    """The fused relevance alone (to pick whose neighbours to fetch)."""
    return fuse(channels.dense, channels.lexical, cfg)


_TERM_SETS = (dict, set, frozenset, Mapping)  # what terms_of may return as is


def _analyzed(c: Candidate, f: Features) -> frozenset[str]:
    """The analyzed terms of ``c``'s text (keyword coverage without ``terms_of``)."""
    if f.terms is None:
        f.terms = frozenset(analyze(c.text))
    return f.terms


_PARTS = (
    "score",
    "dense",
    "lexical",
    "rel",
    "ctx",
    "prior",
    "kw",
    "speaker",
    "quality",
    "auth",
    "time",
    "hop",
)  # the numeric fields of Scored, in order
_HOP_NEUTRAL = (0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0)  # dense .. time of a hop


@dataclass(frozen=True, slots=True)
class Ranking:
    """:func:`rank_table`'s result: the kept candidates, best first, and their score
    parts as one array (row ``k`` is the ``k``-th numeric field of :class:`Scored`, see
    :attr:`score` and the other properties). A :class:`Scored` is made only for the
    items asked for (:meth:`item`), since the assembler reads a few of a pool of
    hundreds. ``index``: each candidate's position in the ranked input (-1 for a hop
    target); ``vectors``: the input's float32 rows, in blocks, when every input candidate
    had one (the dense channel's, see :meth:`Channels.compute`), else empty."""

    candidates: list[Candidate]
    parts: F64
    index: npt.NDArray[np.intp]
    vectors: tuple[F32, ...] = NO_ROWS

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def score(self) -> F64:
        row: F64 = self.parts[0]
        return row

    @property
    def dense(self) -> F64:
        row: F64 = self.parts[1]
        return row

    @property
    def lexical(self) -> F64:
        row: F64 = self.parts[2]
        return row

    def relevant(self, floor: float, cfg: ScoringConfig = DEFAULT_SCORING) -> npt.NDArray[np.bool_]:
        """Which candidates bear on the query at all: cosine at least ``floor``, or at
        least one of the query's keywords in the text, or reached by a hop from a
        relevant item (see :func:`is_relevant`), or a turn next to a relevant turn of its
        session (the answer to a relevant question, the question of a relevant answer)."""
        kw = self.parts[_PARTS.index("kw")]
        hop = self.parts[_PARTS.index("hop")]
        out: npt.NDArray[np.bool_] = (self.dense >= floor) | (kw > _no_keyword(cfg)) | (hop > 0.0)
        if out.all():
            return out
        anchors = {
            (c.session_id, c.seq): c.text
            for c, ok in zip(self.candidates, out.tolist(), strict=True)
            if ok and c.kind == "turn" and c.seq is not None
        }
        for i, c in enumerate(self.candidates):
            if not out[i] and c.kind == "turn" and c.seq is not None:
                out[i] = _says_something_next_to(c, anchors)
        return out

    def item(self, i: int) -> Scored:
        """The ``i``-th best as a :class:`Scored`."""
        return Scored(self.candidates[i], *self.parts[:, i].tolist())

    def items(self) -> list[Scored]:
        """Every item as a :class:`Scored`, best first."""
        cols = self.parts.tolist()
        return [Scored(c, *parts) for c, *parts in zip(self.candidates, *cols, strict=True)]

    def with_hops(self, extra: Sequence[Candidate], scores: Sequence[float]) -> Ranking:
        """The ranking with ``extra`` candidates scored ``scores`` by hop expansion (their
        other parts neutral: ``Scored(c, score, hop=score)``), sorted again."""
        hop = np.asarray(scores, dtype=np.float64)
        neutral = np.repeat(np.array(_HOP_NEUTRAL)[:, None], len(extra), axis=1)
        parts = np.concatenate([self.parts, np.vstack([hop, neutral, hop])], axis=1)
        index = np.concatenate([self.index, np.full(len(extra), -1, dtype=np.intp)])
        merged = [*self.candidates, *extra]
        pick = np.asarray(_best_first(parts[0], merged), dtype=np.intp)
        return Ranking(
            [merged[i] for i in pick.tolist()], parts[:, pick], index[pick], self.vectors
        )

    def rows(self, dims: int) -> np.ndarray[Any, np.dtype[np.float32]] | None:
        """The candidates' float32 rows from :attr:`vectors` (None when they are not all
        of length ``dims``); a hop target's row is left zero."""
        if not self.vectors or any(b.shape[1] != dims for b in self.vectors):
            return None
        index = self.index
        if len(self.vectors) == 1 and (len(index) == 0 or index.min() >= 0):
            return self.vectors[0][index]
        out = np.zeros((len(index), dims), dtype=np.float32)
        offset = 0
        for block in self.vectors:
            at = np.flatnonzero((index >= offset) & (index < offset + len(block)))
            out[at] = block[index[at] - offset]
            offset += len(block)
        return out


# A neighbour turn joins through a relevant turn only when it says something of its own:
# at least this many content terms (an acknowledgement has one or two), or, right after a
# relevant question, any term that is not an acknowledgement ("Yes, twice a week.").
NEIGHBOR_MIN_TERMS = 3
ACKNOWLEDGEMENT_TERMS = frozenset(
    analyze(
        "ok okay sure thanks thank noted got it sounds good great cool perfect awesome nice "
        "glad welcome will do right fine agreed yep yeah alright"
    )
)


def _says_something_next_to(turn: Candidate, anchors: dict[tuple[str, int], str]) -> bool:
    """Whether ``turn`` (not relevant by itself) joins as context of a relevant turn of its
    session next to it: see :data:`NEIGHBOR_MIN_TERMS`."""
    assert turn.seq is not None
    sid = turn.session_id
    before, after = anchors.get((sid, turn.seq - 1)), anchors.get((sid, turn.seq + 1))
    if before is None and after is None:
        return False
    terms = _analyzed(turn, features(turn))  # kept on the candidate: reused across calls
    if len(terms) >= NEIGHBOR_MIN_TERMS:
        return True
    answers_question = before is not None and before.rstrip().endswith("?")
    return answers_question and bool(terms - ACKNOWLEDGEMENT_TERMS)


def _no_keyword(cfg: ScoringConfig) -> float:
    """The keyword factor of a text that holds none of the query's keywords (a hair
    above, so rounding never counts a miss as a hit)."""
    return 1.0 / (1.0 + cfg.kappa) + 1e-9


def is_relevant(s: Scored, floor: float, cfg: ScoringConfig = DEFAULT_SCORING) -> bool:
    """:meth:`Ranking.relevant` for one scored item."""
    return s.dense >= floor or s.kw > _no_keyword(cfg) or s.hop > 0.0


def _best_first(scores: F64, candidates: Sequence[Candidate]) -> list[int]:
    """Positions sorted by ``(-score, collection, id)``, stable. A numpy sort when the
    scores are distinct (then they decide alone), else Python's sort on the full key."""
    neg = -scores
    order = np.argsort(neg, kind="stable")
    ordered = neg[order]
    if bool(np.all(ordered[1:] > ordered[:-1])):  # distinct and no NaN
        return list(order.tolist())
    keys = neg.tolist()
    return sorted(
        range(len(candidates)),
        key=lambda i: (keys[i], candidates[i].collection, candidates[i].id),
    )


def _access_counts(metadata: Sequence[Mapping[str, Any]]) -> F64:
    """:func:`access_count` of each candidate, from its ``metadata`` (read on every call:
    the daemon bumps it)."""
    raw = [m.get("access_count") if m else None for m in metadata]
    return np.array(
        [0 if v is None else v if type(v) is int and v > 0 else _count(v) for v in raw],
        dtype=np.float64,
    )


def _count(v: object) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else 0


def rank_table(
    query: QueryContext,
    candidates: Sequence[Candidate],
    *,
    lexical: BM25Index | LexicalIndex | LexicalScorer | None = None,
    cfg: ScoringConfig = DEFAULT_SCORING,
    terms_of: Callable[[Candidate], Iterable[str] | Mapping[str, int]] | None = None,
    channels: Channels | None = None,
) -> Ranking:
    """Score and sort ``candidates`` (module doc), best first; drops the orthogonal
    noise below the similarity floor. Candidates must have distinct keys. ``channels``:
    their precomputed dense and lexical scores (else computed here). The result is
    columns (:class:`Ranking`; its ``items()`` are the :class:`Scored` ones)."""
    n = len(candidates)
    if n == 0:
        return Ranking([], np.zeros((len(_PARTS), 0)), np.zeros(0, dtype=np.intp))
    ch = channels if channels is not None else Channels.compute(query, candidates, lexical)
    dense, lex = ch.dense, ch.lexical
    rel = fuse(dense, lex, cfg)
    # every field read once per candidate, in one pass (the candidates are scattered in
    # memory and usually cold)
    kinds, sids, seqs, scopes, stamps, metas, feats = zip(
        *[
            (c.kind, c.session_id, c.seq, c.scope, c.ts, c.metadata, c._features or features(c))
            for c in candidates
        ],
        strict=True,
    )
    neigh, sess = _context(rel, kinds, sids, seqs, cfg)
    spk_names = [f.speaker for f in feats]
    speakers = named_speakers(query.text, set(spk_names))
    named = speakers[0] if len(speakers) == 1 else ""
    spk = np.array([cfg.speaker_weight if named and s == named else 0.0 for s in spk_names])
    ctx = rel + neigh + sess + spk

    # prior P = alpha' + beta*R + gamma*S, vectorised
    beta = min(max(cfg.beta, 0.0), 1.0)
    gamma = min(max(cfg.gamma, 0.0), 1.0 - beta)
    params = {name: cfg.scope(name) for name in set(scopes)}
    decay = np.array([params[name].decay_per_s for name in scopes])
    weight = np.clip(np.array([params[name].weight for name in scopes]), 0.0, 1.0)
    if query.now_ms is not None:
        now = query.now_ms
        ts = np.array([t if t is not None and t > 0 else now for t in stamps])
        age = np.maximum(0.0, (now - ts) / 1000.0)
    else:
        age = np.zeros(n)
    pri = (1.0 - beta - gamma) + beta * np.exp(-decay * age) + gamma * weight

    # summary_quality and authority, from the cached parts
    q = 1.0 - clamp01(cfg.delta) * np.array([f.decay for f in feats])
    acc = _access_counts(metas)
    max_acc = float(acc.max())
    freq = np.log1p(acc) / math.log1p(max_acc) if max_acc > 0 else np.zeros(n)
    auth = np.array([f.authority for f in feats])
    omega = 1.0 + cfg.frequency_weight * freq + cfg.authority_weight * auth

    keys = query.keywords
    overlap = np.zeros(n)
    if keys:
        overlap = _keyword_overlap(keys, candidates, feats, terms_of, ch.keyword_hits)
    cov = overlap / len(keys) if keys else np.zeros(n)
    kw = (1.0 + cfg.kappa * cov) / (1.0 + cfg.kappa)

    plan = query.plan
    aff = np.zeros(n)
    order_term = np.zeros(n)
    if plan is not None and plan.windows:
        aff = plan.affinities(stamps)
        for i, meta in enumerate(metas):
            mentions = meta.get("mentions")
            if mentions:  # the times the record talks about, resolved at ingest
                aff[i] = max(aff[i], plan.mention_affinity(mentions))
    if plan is not None and plan.order is not None and cfg.order_weight > 0:
        with_ts = sorted((t, i) for i, t in enumerate(stamps) if t is not None)
        m = len(with_ts)
        for pos, (_, i) in enumerate(with_ts):
            frac = pos / (m - 1) if m > 1 else 0.0
            order_term[i] = (1.0 - frac) if plan.order == "asc" else frac
    t = 1.0 + cfg.tau * aff + cfg.order_weight * order_term
    final = ctx * pri * q * omega * kw * t
    if any(f.superseded for f in feats) and not asks_history(query.text):
        final = final * np.array([cfg.superseded_factor if f.superseded else 1.0 for f in feats])
    keep = ~((dense < cfg.theta1) & (lex <= 0) & (overlap == 0) & (neigh <= 0))
    parts = np.vstack((final, dense, lex, rel, ctx, pri, cov, spk, q, omega, aff, np.zeros(n)))
    kept = np.flatnonzero(keep)
    pick = kept[
        np.asarray(_best_first(final[kept], [candidates[i] for i in kept.tolist()]), dtype=np.intp)
    ]
    return Ranking([candidates[i] for i in pick.tolist()], parts[:, pick], pick, ch.vectors)


def _keyword_overlap(
    keys: Sequence[str],
    candidates: Sequence[Candidate],
    feats: Sequence[Features],
    terms_of: Callable[[Candidate], Iterable[str] | Mapping[str, int]] | None,
    hits: F64 | None,
) -> F64:
    """How many of ``keys`` each candidate's terms contain: the lexical index's count
    where it holds the document (the same analyzed terms, counted in the pass that scored
    it), else the terms from ``terms_of`` (or the candidate's analyzed text)."""
    n = len(candidates)
    if hits is not None and hits.shape == (n,):
        rest = np.flatnonzero(hits < 0).tolist()
        if not rest:
            return hits
        out = hits.copy()
        sub = [candidates[i] for i in rest]
        out[rest] = _keyword_overlap(keys, sub, [feats[i] for i in rest], terms_of, None)
        return out
    if terms_of is None:
        terms: Iterable[Container[str]] = map(_analyzed, candidates, feats)
    else:
        terms = (t if isinstance(t, _TERM_SETS) else set(t) for t in map(terms_of, candidates))
    return np.array([sum(map(t.__contains__, keys)) for t in terms], dtype=np.float64)


def rescore(item: Scored, factor: float) -> Scored:
    """A copy of ``item`` with its score multiplied by ``factor`` (an attenuation)."""
    return replace(item, score=item.score * factor)
