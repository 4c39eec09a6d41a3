"""One :class:`~sidecar.memory.core.lexical.BM25Index` per collection, each with its own
statistics, searched and scored together; and the keyword coverage of a document."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sidecar.memory.core.analyzer import STOPWORDS, StemMode, analyze_query
from sidecar.memory.core.lexical import DEFAULT_B, DEFAULT_K1, BM25Index


@dataclass(frozen=True, slots=True)
class LexicalHit:
    collection: str
    id: str
    score: float


class LexicalIndex:
    """One :class:`BM25Index` per collection (scope), each with its own statistics."""

    def __init__(
        self,
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        stem: StemMode = "light",
        stopwords: frozenset[str] = STOPWORDS,
    ) -> None:
        self.k1 = k1
        self.b = b
        self.stem: StemMode = stem
        self.stopwords = stopwords
        self._indexes: dict[str, BM25Index] = {}

    def _terms(self, query: str) -> list[str]:
        return list(analyze_query(query, self.stem, self.stopwords))

    def collection(self, name: str) -> BM25Index:
        """The index of ``name``, created empty on first use."""
        idx = self._indexes.get(name)
        if idx is None:
            idx = BM25Index(k1=self.k1, b=self.b, stem=self.stem, stopwords=self.stopwords)
            self._indexes[name] = idx
        return idx

    @property
    def collections(self) -> list[str]:
        return sorted(self._indexes)

    def __len__(self) -> int:
        return sum(len(i) for i in self._indexes.values())

    def add(self, collection: str, doc_id: str, text: str) -> None:
        self.collection(collection).add(doc_id, text)

    def remove(self, collection: str, doc_id: str) -> bool:
        idx = self._indexes.get(collection)
        return idx.remove(doc_id) if idx is not None else False

    def drop(self, collection: str) -> bool:
        return self._indexes.pop(collection, None) is not None

    def search(
        self, query: str, collections: Iterable[str] | None = None, k: int = 10
    ) -> list[LexicalHit]:
        """The ``k`` best hits over ``collections`` (all when None), best first."""
        names = self.collections if collections is None else list(dict.fromkeys(collections))
        terms = self._terms(query)
        hits: list[LexicalHit] = []
        for name in names:
            idx = self._indexes.get(name)
            if idx is None:
                continue
            hits.extend(LexicalHit(name, i, s) for i, s in idx.search(terms, k))
        hits.sort(key=lambda h: (-h.score, h.collection, h.id))
        return hits[:k]

    def score(self, query: str, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """BM25 of ``(collection, id)`` pairs under their own collection's statistics."""
        wanted = list(keys)
        return dict(zip(wanted, self.score_list(query, wanted), strict=True))

    def score_list(self, query: str, keys: Sequence[tuple[str, str]]) -> list[float]:
        """:meth:`score` as a list aligned with ``keys``."""
        return self.score_hits(query, keys)[0]

    def score_hits(
        self, query: str, keys: Sequence[tuple[str, str]]
    ) -> tuple[list[float], list[int]]:
        """:meth:`score_list`, and the distinct query terms each document contains (-1 for
        a document no index holds); see :meth:`BM25Index.score_hits`."""
        terms = self._terms(query)
        at: dict[str, list[int]] = {}
        for j, key in enumerate(keys):
            at.setdefault(key[0], []).append(j)
        out = [0.0] * len(keys)
        hits = [-1] * len(keys)
        for coll, positions in at.items():
            idx = self._indexes.get(coll)
            if idx is not None:
                got, found = idx.score_hits(terms, [keys[j][1] for j in positions])
                for j, value, n in zip(positions, got, found, strict=True):
                    out[j] = value
                    hits[j] = n
        return out, hits


def keyword_coverage(
    query_keywords: Sequence[str], doc_terms: Mapping[str, int] | Iterable[str]
) -> float:
    """``|K ∩ terms(d)| / |K|``; 0 when ``K`` is empty."""
    keys = set(query_keywords)
    if not keys:
        return 0.0
    terms = doc_terms if isinstance(doc_terms, Mapping) else set(doc_terms)
    return sum(1 for k in keys if k in terms) / len(keys)
