from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sidecar.engines.vectors import cosine_matrix, l2_normalize, masked_mean, tier_vector, tiers


def test_masked_mean_reference_case() -> None:
    hidden = np.array([[[1, 2], [3, 4], [100, 200]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    assert masked_mean(hidden, mask).tolist() == [[2.0, 3.0]]


def test_masked_mean_all_masked_row_is_zero_not_nan() -> None:
    hidden = np.ones((1, 2, 3), dtype=np.float32)
    out = masked_mean(hidden, np.zeros((1, 2), dtype=np.int64))
    assert np.all(out == 0)


def test_normalize_changes_output() -> None:
    assert np.allclose(l2_normalize(np.array([3.0, 4.0])), [0.6, 0.8])
    assert np.all(l2_normalize(np.zeros(4)) == 0)


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float32,
        768,
        elements=st.floats(-1, 1, width=32, allow_nan=False),
    )
)
def test_tiers_have_unit_norm(vec: np.ndarray) -> None:
    if np.linalg.norm(vec[:64]) < 1e-3:
        return
    for dims, tv in tiers(vec, (64, 256, 768)).items():
        assert tv.shape == (dims,)
        assert abs(float(np.linalg.norm(tv)) - 1.0) < 1e-5


def test_tier_is_prefix_direction_and_batched() -> None:
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(5, 768)).astype(np.float32)
    t = tier_vector(mat, 64)
    assert t.shape == (5, 64)
    for row, full in zip(t, mat, strict=True):
        assert np.allclose(row * np.linalg.norm(full[:64]), full[:64], atol=1e-5)


def test_tier_rejects_bad_dims() -> None:
    with pytest.raises(ValueError):
        tier_vector(np.ones(384), 768)
    with pytest.raises(ValueError):
        tier_vector(np.ones(384), 0)


def test_tier_of_zero_prefix_is_left_as_is() -> None:
    v = np.zeros(768, dtype=np.float32)
    v[100] = 1
    assert np.all(tier_vector(v, 64) == 0)


def test_cosine_matrix() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert np.allclose(cosine_matrix(a, a), np.eye(2))
