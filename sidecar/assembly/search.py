"""``search``: hybrid (dense + BM25) search over a namespace's memory scopes, with filters.

Reads the same cached collection views as ``assemble`` and hands the pool to the pure
:func:`~sidecar.assembly.plan.plan_search`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sidecar.assembly.cache import CollectionView, SharedLexical
from sidecar.assembly.candidates import Candidate
from sidecar.assembly.plan import SearchHit, plan_search
from sidecar.assembly.scoring import F32
from sidecar.assembly.selection import AssemblyConfig, HitFilter
from sidecar.assembly.view_where import rows_where
from sidecar.memory.core import layout as C
from sidecar.memory.core.temporal import plan_temporal

DENSE_K = 50  # per scope, as the in-process evaluation's pool

#: ``search`` scope names -> collections (``<ns>``/``<sid>`` filled in).
SEARCH_SCOPES = ("history", "durable", "summary", "global", "authored", "dream", "elevated")


# Scope -> collection, in the order they are read.
_NAMESPACE_SCOPES: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("durable", C.user),
    ("dream", C.dream),
    ("elevated", C.elevated_user),
)
_SESSION_SCOPES: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("summary", C.session_summary),
    ("elevated", C.elevated_session),
)
_SHARED_SCOPES = (("global", C.GLOBAL), ("authored", C.AUTHORED_VARIANT))


@dataclass(frozen=True)
class SearchRequest:
    """One ``search`` call: the query, where to look and the filters."""

    query: str
    namespace: str
    session_id: str | None = None
    scopes: Sequence[str] | None = None
    k: int = 8
    role: str | None = None
    since: int | None = None
    until: int | None = None
    kind: str | None = None

    @property
    def wanted(self) -> set[str]:
        return set(self.scopes) if self.scopes else set(SEARCH_SCOPES)

    @property
    def filters(self) -> HitFilter:
        return HitFilter(self.role, self.since, self.until, self.kind)


def terms_lookup(colls: Mapping[str, CollectionView]) -> Any:
    def terms_of(c: Candidate) -> Mapping[str, int]:
        coll = colls.get(c.collection)
        if coll is None or c.id not in coll.bm25:
            return {}
        return coll.bm25.doc_terms(c.id)

    return terms_of


def collections_for(req: SearchRequest) -> list[str]:
    """The collections the request's scopes read, in a fixed order."""
    wanted, ns, sid = req.wanted, req.namespace, req.session_id
    names: list[str] = []
    if "history" in wanted or "session" in wanted:
        names.append(C.turns(ns))
    names += [f(ns) for scope, f in _NAMESPACE_SCOPES if scope in wanted]
    if sid:
        names += [f(sid) for scope, f in _SESSION_SCOPES if scope in wanted]
    names += [name for scope, name in _SHARED_SCOPES if scope in wanted]
    return names


def _rows(
    coll: CollectionView, req: SearchRequest, qvec: F32 | None, lex_query: str, depth: int
) -> list[int]:
    """The rows of one collection that enter the pool."""
    filters = req.filters
    if not filters.active:
        return list(dict.fromkeys(coll.dense_top(qvec, depth) + coll.lexical_top(lex_query, depth)))
    # filters can empty a top-k: take the whole collection's matches
    idx = rows_where(coll.rows, filters)  # filters.passes, read from the arrays
    if len(idx) > 4 * depth and qvec is not None and coll.matrix is not None:
        sims = coll.matrix[idx] @ qvec
        top = np.argsort(-sims, kind="stable")[:depth].tolist()
        lex = set(coll.lexical_top(lex_query, 4 * depth))
        idx = list(dict.fromkeys([idx[t] for t in top] + [i for i in idx if i in lex]))
    return idx


def run_search(
    req: SearchRequest,
    qvec: F32 | None,
    colls: Mapping[str, CollectionView],
    config: AssemblyConfig,
) -> list[SearchHit]:
    """Pool the collections' dense and lexical top-k and rank them (pure over the views)."""
    wanted = req.wanted
    now = int(time.time() * 1000)
    tplan = plan_temporal(req.query, now, mention_slack_days=config.mention_slack_days)
    lex_query = tplan.content_query or req.query
    lexical = SharedLexical()
    cands: list[Candidate] = []
    depth = max(DENSE_K, 4 * req.k)
    for name, coll in colls.items():
        lexical.attach(name, coll.bm25)
        cands += coll.candidates(_rows(coll, req, qvec, lex_query, depth))
    if req.session_id and "session" in wanted and "history" not in wanted:
        cands = [c for c in cands if c.session_id == req.session_id or c.kind != "turn"]
    history = colls.get(C.turns(req.namespace))
    return plan_search(
        query=req.query,
        query_vector=qvec,
        candidates=cands,
        k=req.k,
        filters=req.filters,
        now_ms=now,
        lexical=lexical,
        terms_of=terms_lookup(colls),
        neighbors=history.neighbours if history is not None else None,
        config=config,
        # named scopes are what the caller asked for; by default dreams only answer
        # dream questions, as in assembly
        dreams=("dream" in wanted) if req.scopes else None,
    )
