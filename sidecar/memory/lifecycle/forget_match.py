"""What a query forget may delete: only memories that clearly match the query.

A search ranks everything; a forget must not. ``clear_match`` scores one memory against
the query as ``cosine + weight * coverage``: the embedder's cosine, plus the share of the
query's keywords (the lexical analyzer's terms, stop words excluded) that the memory
contains. The memory clearly matches when the score reaches the bar. Weight and bar are
chosen per embedding model by ``scripts/choose_forget_bar.py`` on forget requests written
for the project, for no wrong deletion at all on its dev stores (docs/memory.md,
"Forgetting by query"); a model without its own values gets MiniLM's, which are strict
for any model whose unrelated texts score lower (a cosine means something else per model).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ForgetBar:
    weight: float
    bar: float


PREFIX_MIN = 5  # a shorter term that starts a longer one is the same word from this length


def _present(term: str, memory_terms: set[str]) -> bool:
    if term in memory_terms:
        return True
    # The light stemmer leaves forms of one word apart ("allergi" for allergy, "allergic"):
    # a term that starts the other, at least PREFIX_MIN letters long, counts as the word.
    return len(term) >= PREFIX_MIN and any(
        len(m) >= PREFIX_MIN and (m.startswith(term) or term.startswith(m)) for m in memory_terms
    )


def keyword_coverage(query_terms: Sequence[str], memory_terms: Iterable[str]) -> float:
    """The share of the query's distinct terms found in the memory (0 without terms)."""
    wanted = set(query_terms)
    if not wanted:
        return 0.0
    have = set(memory_terms)
    return sum(1 for t in wanted if _present(t, have)) / len(wanted)


def clear_match(cosine: float, coverage: float, bar: ForgetBar) -> bool:
    return cosine + bar.weight * coverage >= bar.bar
