"""The int8-prefiltered exact top-k (sidecar.engines.int8scan): the hand-written ONNX kernel,
the error bound, and the ranking against a plain float32 product."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.engines.int8scan import Int8Rows, Scan, kernel_model

F32 = np.float32


def _units(rng: np.random.Generator, n: int, d: int, centers: int = 20) -> Any:
    """Clustered unit rows (close neighbours are where a loose bound would show), with
    exact duplicates and a zero row."""
    base = rng.normal(size=(centers, d))
    mat = base[rng.integers(0, centers, n)] + 0.4 * rng.normal(size=(n, d))
    mat = (mat / np.linalg.norm(mat, axis=1, keepdims=True)).astype(F32)
    if n > 10:
        mat[3] = mat[7]  # a tie
        mat[5] = 0.0  # a vectorless record
    return mat


def _exact(mat: Any, q: Any, k: int, subset: Any = None) -> tuple[list[int], Any]:
    rows = np.arange(len(mat)) if subset is None else subset
    sims = mat[rows] @ q
    order = np.lexsort((np.arange(len(rows)), -sims))[:k]
    return order.tolist(), sims[order]


def _query(rng: np.random.Generator, mat: Any) -> Any:
    q = mat[rng.integers(0, len(mat))] + 0.3 * rng.normal(size=mat.shape[1])
    return (q / np.linalg.norm(q)).astype(F32)


def test_kernel_is_an_onnx_integer_matmul() -> None:
    session = ort.InferenceSession(kernel_model(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(1, 24), dtype=np.uint8)
    b = rng.integers(-127, 128, size=(24, 37), dtype=np.int8)
    (y,) = session.run(None, {"A": a, "B": b})
    assert y.dtype == np.int32 and y.shape == (1, 37)
    assert np.array_equal(y, a.astype(np.int64) @ b.astype(np.int64))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    d=st.sampled_from([8, 33, 384]),
    k=st.integers(1, 60),
)
def test_top_k_equals_the_float32_top_k(seed: int, n: int, d: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    mat = _units(rng, n, d)
    shadow = Int8Rows(d)
    shadow.assign(mat)
    q = _query(rng, mat)
    scan = Scan(mat, q, shadow)
    assert scan.approx is not None  # the prefilter path, not the exact fallback
    # the stated bound holds for every row
    approx = scan.approx * (np.abs(q).max() / 127.0)
    bound = scan.bound * (np.abs(q).max() / 127.0)
    assert np.all(np.abs(mat @ q - approx) <= bound)
    pos, sims = scan.top(k)
    want, want_sims = _exact(mat, q, k)
    assert pos.tolist() == want
    assert np.allclose(sims, want_sims, atol=1e-6)
    subset = np.flatnonzero(rng.random(n) < 0.5)
    pos, _ = scan.top(k, subset)
    assert pos.tolist() == _exact(mat, q, k, subset)[0]


def test_rows_updated_in_place_and_appended_match_a_rebuild() -> None:
    rng = np.random.default_rng(7)
    mat = _units(rng, 3000, 64)
    grown = Int8Rows(64)
    grown.assign(mat[:1000])
    grown.set_rows(1000, mat[1000:1100])  # into the tail block
    assert grown.main.shape[1] == 1000 and grown.tail.shape[1] >= 100
    grown.set_rows(1100, mat[1100:2400])  # past a quarter of main: merged
    assert grown.main.shape[1] == 2400
    for lo in range(2400, 3000, 7):  # small appends
        grown.set_rows(lo, mat[lo : min(lo + 7, 3000)])
    mat[17] = mat[2999]  # a record replaced with another vector
    grown.set_rows(17, mat[17:18])
    mat[2990] = mat[4]  # one in the tail block
    grown.set_rows(2990, mat[2990:2991])
    fresh = Int8Rows(64)
    fresh.assign(mat)
    assert grown.n == fresh.n == 3000
    assert 0 < grown.n - grown.main.shape[1] <= grown.main.shape[1] // 4
    assert np.array_equal(grown.columns(), fresh.columns())
    assert np.array_equal(grown.scale[:3000], fresh.scale[:3000])
    for _ in range(20):
        q = _query(rng, mat)
        for k in (1, 10, 100):
            assert Scan(mat, q, grown).top(k)[0].tolist() == _exact(mat, q, k)[0]


def test_without_a_usable_shadow_the_scan_is_exact() -> None:
    rng = np.random.default_rng(3)
    mat = _units(rng, 50, 16)
    stale = Int8Rows(16)
    stale.assign(mat[:40])  # behind the matrix: not used
    q = _query(rng, mat)
    for shadow in (None, stale):
        scan = Scan(mat, q, shadow)
        assert scan.exact is not None
        assert scan.top(5)[0].tolist() == _exact(mat, q, 5)[0]
    zero = Scan(mat, np.zeros(16, dtype=F32), Int8Rows(16))
    assert zero.exact is not None


@pytest.mark.parametrize("k", [0, 1, 50, 51, 500])
def test_edge_sizes(k: int) -> None:
    rng = np.random.default_rng(k)
    mat = _units(rng, 50, 16)
    shadow = Int8Rows(16)
    shadow.assign(mat)
    q = _query(rng, mat)
    pos, sims = Scan(mat, q, shadow).top(k)
    assert pos.tolist() == _exact(mat, q, k)[0]
    assert len(sims) == min(k, 50)


def test_a_failing_kernel_falls_back_to_the_exact_product(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def run(self, *_: Any) -> Any:
            raise RuntimeError("kernel fault")

    monkeypatch.setattr("sidecar.engines.int8scan._session", Broken())
    rng = np.random.default_rng(11)
    mat = _units(rng, 200, 16)
    shadow = Int8Rows(16)
    shadow.assign(mat)
    q = _query(rng, mat)
    scan = Scan(mat, q, shadow)
    assert scan.exact is not None
    assert scan.top(7)[0].tolist() == _exact(mat, q, 7)[0]
