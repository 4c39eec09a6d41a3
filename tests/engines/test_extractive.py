"""Extractive summarizer: the reference behaviours (contract §7.4/§11) plus MMR."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sidecar.engines import InvalidInputError
from sidecar.engines.extractive import (
    DEFAULT_LAMBDA,
    assemble,
    lexical_vectors,
    pick_count,
    prepare_turns,
    select,
    summarize_sync,
)

A, B, C = [1.0, 0.0], [0.9, 0.1], [0.0, 1.0]


@pytest.mark.parametrize("lam", [1.0, DEFAULT_LAMBDA])
def test_density_one_third_picks_b(lam: float) -> None:
    sel = select(np.array([A, B, C]), density=1 / 3, lambda_=lam)
    assert sel.indices == [1]


@pytest.mark.parametrize("lam", [1.0, DEFAULT_LAMBDA])
def test_duplicates_with_density_two_thirds(lam: float) -> None:
    # a = b = [1, 0], c = [0, 1]: pure relevance picks a and b with confidence 2/sqrt(5).
    # The default MMR lambda (0.7) still prefers b over c here: 0.7*0.894 - 0.3*1 > 0.7*0.447.
    sel = select(np.array([A, A, C]), density=2 / 3, lambda_=lam)
    assert sel.indices == [0, 1]
    assert sel.confidence == pytest.approx(2 / math.sqrt(5), abs=1e-9)


def test_mmr_skips_redundant_turn_when_lambda_is_low() -> None:
    sel = select(np.array([A, A, C]), density=2 / 3, lambda_=0.5)
    assert sel.indices == [0, 2]


def test_mmr_prefers_diverse_turn_over_near_duplicate() -> None:
    vecs = np.array([[1.0, 0.0, 0.0], [0.99, 0.05, 0.0], [0.7, 0.7, 0.0], [0.8, 0.0, 0.6]])
    relevance_only = select(vecs, density=0.5, lambda_=1.0)
    mmr = select(vecs, density=0.5, lambda_=0.5)
    assert relevance_only.indices == [0, 1]
    # MMR keeps only one of the two near-duplicates (0 and 1) and adds a diverse turn.
    assert len({0, 1} & set(mmr.indices)) == 1


def test_ties_go_to_the_earlier_turn() -> None:
    sel = select(np.array([C, A, A, C]), density=0.25, lambda_=1.0)
    assert sel.indices == [0]


@pytest.mark.parametrize(
    ("n", "density", "k"),
    [
        (3, 1 / 3, 1),
        (3, 2 / 3, 2),
        (10, 0.4, 4),
        (10, None, 4),
        (10, 0.0, 4),
        (10, 1.5, 4),
        (10, float("nan"), 4),
        (1, 0.1, 1),
        (5, 1.0, 5),
        (7, 0.01, 1),
    ],
)
def test_pick_count(n: int, density: float | None, k: int) -> None:
    assert pick_count(n, density) == k


def test_deterministic_and_chronological() -> None:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(12, 16))
    first = select(vecs, density=0.5)
    for _ in range(3):
        assert select(vecs, density=0.5) == first
    assert first.indices == sorted(first.indices)
    assert 0.0 <= first.confidence <= 1.0


def test_confidence_is_mean_relevance_clamped() -> None:
    # Opposite vectors: centroid is zero -> relevance 0 -> confidence 0, no NaN.
    sel = select(np.array([[1.0, 0.0], [-1.0, 0.0]]), density=1.0)
    assert sel.confidence == 0.0


def test_assemble_joins_in_chronological_order_and_counts_words() -> None:
    out = assemble(
        [0, 2, 5],
        ["first turn", "second turn here", "third"],
        np.array([A, B, C]),
        density=2 / 3,
        lambda_=1.0,
        max_tokens=None,
    )
    assert out.text == "first turn second turn here"
    assert out.tokens == 5
    assert out.indices == [0, 2]


def test_max_tokens_budget_skips_long_turns() -> None:
    turns = ["one two three four five six", "alpha beta", "gamma"]
    vecs = np.array([A, B, [0.5, 0.5]])  # relevance order: 1, 0, 2
    out = assemble([0, 1, 2], turns, vecs, density=1.0, lambda_=1.0, max_tokens=3)
    assert out.indices == [1, 2]  # turn 0 (6 words) would exceed the budget and is skipped
    assert out.tokens == 3
    # The most relevant turn is always kept, even when it alone exceeds the budget.
    vecs = np.array([A, [0.7, 0.7], [0.7, -0.7]])
    out = assemble([0, 1, 2], turns, vecs, density=1.0, lambda_=1.0, max_tokens=2)
    assert out.indices[0] == 0


def test_prepare_turns_skips_empty_and_rejects_all_empty() -> None:
    keep, turns = prepare_turns(["  a ", "", "   ", "b\ud800"])
    assert keep == [0, 3]
    assert turns == ["a", "b\ufffd"]
    with pytest.raises(InvalidInputError):
        prepare_turns(["", "  "])
    with pytest.raises(InvalidInputError):
        prepare_turns("not a list")


def test_lexical_vectors_are_deterministic_and_unit() -> None:
    a = lexical_vectors(["the cat sat", "dogs bark loudly", ""])
    b = lexical_vectors(["the cat sat", "dogs bark loudly", ""])
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0)
    assert np.all(a[2] == 0)


def test_summarize_without_embedder_uses_lexical_and_says_so() -> None:
    out = summarize_sync(["cats purr", "cats purr softly", "stock markets fell"], None)
    assert out.fallback_reason.startswith("no embedder")
    assert out.text


def test_summarize_with_real_embedder_picks_central_turns(minilm: object) -> None:
    turns = [
        "We need to fix the login bug before the release.",
        "The login bug blocks the release; fix it first.",
        "Did you see the football game last night?",
        "Fixing the authentication failure is the top priority for shipping.",
        "Lunch is at noon.",
    ]
    out = summarize_sync(turns, minilm, density=0.4)  # type: ignore[arg-type]
    assert out.fallback_reason == ""
    assert len(out.indices) == 2
    assert 2 not in out.indices and 4 not in out.indices
    assert 0.0 < out.confidence <= 1.0
