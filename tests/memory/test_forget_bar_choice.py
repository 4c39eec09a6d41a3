"""The bar a query forget applies is the one its forget requests choose (scripts/
choose_forget_bar.py), it deletes no non-match on the dev stores, and the keyword share
it adds counts forms of one word once."""

from __future__ import annotations

import numpy as np

from scripts.choose_forget_bar import DEFAULT_SET, fit, measure, pair_signals
from sidecar.assembly.selection import DEFAULT_ASSEMBLY
from sidecar.engines.embedding_spec import MINILM
from sidecar.memory.core.analyzer import analyze, query_terms
from sidecar.memory.lifecycle.forget_match import ForgetBar, clear_match, keyword_coverage


def test_configured_bar_is_the_chosen_one() -> None:
    pairs = pair_signals(DEFAULT_SET)
    dev = pairs.subset(np.array([s == "dev" for s in pairs.split]))
    chosen = fit(dev)
    assert (MINILM.forget_weight, MINILM.forget_bar) == (chosen.weight, chosen.bar)
    assert (DEFAULT_ASSEMBLY.forget_weight, DEFAULT_ASSEMBLY.forget_bar) == (
        chosen.weight,
        chosen.bar,
    )
    found, total, wrong = measure(dev, chosen)
    assert wrong == 0 and total >= 50 and found >= total // 2


def test_keyword_coverage_counts_a_word_in_another_form() -> None:
    fact = analyze("I'm allergic to peanuts, so never suggest recipes with peanuts.")
    assert keyword_coverage(query_terms("my peanut allergy"), fact) == 1.0
    assert keyword_coverage(query_terms("my dog"), fact) == 0.0
    assert keyword_coverage(query_terms("the"), fact) == 0.0  # no keyword: no coverage
    # short terms must match whole: "car" is not "career"
    assert keyword_coverage(query_terms("my car"), analyze("my career plans")) == 0.0


def test_the_bar_adds_coverage_to_the_cosine() -> None:
    bar = ForgetBar(weight=0.4, bar=0.859)
    assert clear_match(0.6, 1.0, bar)
    assert not clear_match(0.6, 0.5, bar)
    assert not clear_match(0.85, 0.0, bar)
