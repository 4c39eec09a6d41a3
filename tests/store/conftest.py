"""Fixtures and data generators for the store tests.

The store's contract runs on both backends: a test that asks for ``store``, ``location``
or ``new_location`` is parametrised by ``tests/conftest.py``'s ``backend`` fixture
(``sqlite``: a data directory under ``tmp_path``; ``postgres``: a fresh database of the
session's PostgreSQL server, dropped after the test). Tests about SQLite's own machinery
(files, WAL, the writer thread, hnswlib graphs, the directory lock) use ``data_dir`` and
``Store`` directly and carry ``@pytest.mark.sqlite_only(reason)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend

Location = str | Path


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
def new_location(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[], Location]:
    """Make a new, empty store location of the test's backend (call it once per store)."""
    server: Any = request.getfixturevalue("pg_server") if backend == "postgres" else None
    numbers = itertools.count()

    def make() -> Location:
        if server is None:
            n = next(numbers)
            return tmp_path / ("data" if n == 0 else f"data{n}")
        # not dropped after the test: DROP DATABASE costs a checkpoint (~1 s here); the
        # server's directory goes at the end of the session
        url: str = server.new_database(migrated=True)
        return url

    return make


@pytest.fixture
def location(new_location: Callable[[], Location]) -> Location:
    """The test's store location (SQLite: ``tmp_path / "data"``, the same as ``data_dir``)."""
    return new_location()


@pytest.fixture
def store(location: Location) -> Iterator[StoreBackend]:
    s = open_store(location, embed_dims=4, fingerprint="fp-test")
    try:
        yield s
    finally:
        s.close()


def unit(*xs: float) -> list[float]:
    return list(xs)
