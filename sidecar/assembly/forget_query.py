"""Which memories a query ``forget`` may delete: the clear matches among a search's hits.

A search always ranks something first, even for a query that matches nothing ("my cat's
name" on a store without a cat ranks the plumber reminder first); forgetting the top hits
deleted unrelated memories, one more on every retry. Here the search only proposes: each
hit is kept when it clearly matches the query (``forget_match.clear_match``: its cosine
with the query plus the share of the query's keywords it holds reaches the profile's bar).

The caller deletes all the clear matches or none: when more memories clearly match than
the request's ``limit``, nothing is deleted (:class:`TooManyMatches`), so a retry after a
forget that succeeded finds nothing left to delete instead of the next memory down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sidecar.assembly.search import SearchRequest
from sidecar.assembly.service import Retrieval
from sidecar.memory.core.analyzer import analyze, query_terms
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.lifecycle.forget_match import ForgetBar, clear_match, keyword_coverage

# What a query may forget: the namespace's own memory of turns (never authored rules or
# shared global memory, which a search also reads).
QUERY_SCOPES = ("history", "durable", "elevated", "dream")
# Hits looked at: every clear match is expected well inside a search's first 50.
CANDIDATES = 50


@dataclass(frozen=True, slots=True)
class QueryMatch:
    collection: str
    id: str
    text: str
    cosine: float
    coverage: float


class TooManyMatches(MemoryInputError):
    """More memories clearly match than the request's ``limit``: nothing is forgotten."""


async def clear_matches(retrieval: Retrieval, namespace: str, query: str) -> list[QueryMatch]:
    """The search hits of ``query`` in the namespace that clearly match it, best first."""
    if not query.strip():
        raise MemoryInputError("query must not be blank")
    hits = await retrieval.search(
        SearchRequest(query=query, namespace=namespace, scopes=QUERY_SCOPES, k=CANDIDATES)
    )
    qvec = await retrieval.embed_query(query)
    if not hits or qvec is None:
        return []
    cfg = retrieval.config
    bar = ForgetBar(cfg.forget_weight, cfg.forget_bar)
    terms = query_terms(query)
    store = retrieval.memory.store
    out: list[QueryMatch] = []
    for hit in hits:
        rec = await store.get(hit.collection, hit.id, include_vector=True)
        if rec is None or rec.vector is None:
            continue
        vec = np.asarray(rec.vector, dtype=np.float32)
        norm = float(np.linalg.norm(vec))
        cosine = float(vec @ qvec) / norm if norm > 1e-12 else 0.0
        coverage = keyword_coverage(terms, analyze(rec.text))
        if clear_match(cosine, coverage, bar):
            out.append(QueryMatch(hit.collection, hit.id, rec.text, cosine, coverage))
    return out


def too_many(query: str, found: int, limit: int) -> TooManyMatches:
    return TooManyMatches(
        f"{found} memories clearly match the query, more than limit {limit}: nothing was "
        f"forgotten. List them with dryRun and limit {found}, then forget the ones you mean "
        "by records (or repeat with that limit to forget them all)"
    )
