"""Fixtures and data generators for the store tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.store import Store


def clustered(
    n: int,
    dims: int = 384,
    clusters: int = 100,
    noise: float = 0.8,
    seed: int = 0,
    queries: int = 0,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Synthetic Gaussian clusters: ``n`` vectors and ``queries`` drawn from the same clusters.

    Centers are random unit vectors; each point is its center plus isotropic noise of total
    norm ~``noise``. Returns (vectors, queries), float32, not normalized.
    """
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dims)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)

    def draw(m: int) -> np.ndarray[Any, Any]:
        lab = rng.integers(0, clusters, m)
        pts = centers[lab] + noise * rng.standard_normal((m, dims)).astype(np.float32) / np.sqrt(
            dims
        )
        return pts.astype(np.float32)

    return draw(n), draw(queries)


def exact_topk(data: np.ndarray[Any, Any], query: np.ndarray[Any, Any], k: int) -> list[int]:
    dn = data / np.linalg.norm(data, axis=1, keepdims=True)
    qn = query / np.linalg.norm(query)
    scores = dn @ qn
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    return order[:k]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    s = Store.open(data_dir, embed_dims=4, fingerprint="fp-test")
    try:
        yield s
    finally:
        s.close()


def unit(*xs: float) -> list[float]:
    return list(xs)
