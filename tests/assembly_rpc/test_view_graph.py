"""The in-process graph over a large view's vectors (``sidecar.assembly.view_graph``):
what it returns against an exact product, the rows noted while and after it is built,
growth past its capacity, closing and failing (the view then asks the store)."""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from usearch.index import Index

from sidecar.assembly import view_graph as VG
from sidecar.assembly.view_graph import GraphParams, ViewGraph
from sidecar.priority import BACKGROUND_NICE
from sidecar.store.index import EF_MAX, EF_SCALE_FROM, scaled_ef

pytestmark = pytest.mark.sqlite_only("no store: a graph over a numpy matrix")

DIMS = 24
F32 = npt.NDArray[np.float32]


def _units(rng: np.random.Generator, n: int) -> F32:
    m = rng.normal(size=(n, DIMS)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _exact(mat: F32, rows: int, q: F32, k: int) -> list[int]:
    sims = mat[:rows] @ q
    return [int(i) for i in np.argsort(-sims)[:k]]


def _built(mat: F32, rows: int, **params: int) -> ViewGraph:
    g = ViewGraph("turns:t", DIMS, GraphParams(**{"ef_search": 200, **params}))
    g.start(mat, rows)
    assert g.wait(60)
    return g


def test_a_small_graph_gives_the_exact_top_k() -> None:
    rng = np.random.default_rng(1)
    mat = _units(rng, 500)
    g = _built(mat, 500)
    assert g.ready and g.built_rows == g.total_rows == 500
    for q in _units(rng, 20):
        found = g.search(mat, q, 10)
        assert found is not None
        rows, sims = found
        assert rows.tolist() == _exact(mat, 500, q, 10)
        assert np.allclose(sims, mat[rows] @ q, atol=1e-5)


def test_rows_noted_during_and_after_the_build_are_searched() -> None:
    rng = np.random.default_rng(2)
    mat = np.zeros((2000, DIMS), dtype=np.float32)
    mat[:300] = _units(rng, 300)
    g = ViewGraph("turns:t", DIMS, GraphParams(ef_search=200))
    # rows appended and one rewritten before the build ran (the view keeps writing)
    g.start(mat, 300)
    mat[300:400] = _units(rng, 100)
    mat[7] = _units(rng, 1)[0]
    g.note([7, *range(300, 400)])
    assert g.wait(60)
    for q in [*_units(rng, 10), mat[7], mat[350]]:
        found = g.search(mat, q, 5)
        assert found is not None
        assert found[0].tolist() == _exact(mat, 400, q, 5)
    # far past the graph's capacity (a resize), and a rewrite of an inserted row
    mat[400:2000] = _units(rng, 1600)
    mat[350] = _units(rng, 1)[0]
    g.note([350, *range(400, 2000)])
    for q in [*_units(rng, 10), mat[1999], mat[350]]:
        found = g.search(mat, q, 5)
        assert found is not None
        assert found[0].tolist() == _exact(mat, 2000, q, 5)


def test_k_larger_than_the_graph_returns_every_row() -> None:
    rng = np.random.default_rng(3)
    mat = _units(rng, 12)
    g = _built(mat, 12)
    found = g.search(mat, mat[0], 50)
    assert found is not None and sorted(found[0].tolist()) == list(range(12))
    assert found[0][0] == 0  # the row itself first


def test_a_closed_graph_answers_nothing_and_a_cancelled_build_stops() -> None:
    rng = np.random.default_rng(4)
    mat = _units(rng, 100)
    g = _built(mat, 100)
    g.close()
    assert g.state == "closed" and g.search(mat, mat[0], 3) is None
    # closed before its queued build started: the build does nothing
    late = ViewGraph("turns:t", DIMS, GraphParams())
    late.close()
    late.start(mat, 100)
    assert not late.wait(60)
    assert late.state == "closed" and late.built_rows == 0


def test_a_failed_build_leaves_the_store_to_answer() -> None:
    rng = np.random.default_rng(5)
    wrong = _units(rng, 50)[:, :10]  # rows of the wrong width: the graph refuses them
    g = ViewGraph("turns:t", DIMS, GraphParams())
    g.start(np.ascontiguousarray(wrong), 50)
    assert not g.wait(60)
    assert g.state == "failed" and g.search(wrong, wrong[0], 3) is None


def test_a_long_build_reports_its_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    mat = _units(rng, 300)
    monkeypatch.setattr(VG, "BUILD_CHUNK", 64)
    seen: list[int] = []
    g = ViewGraph("turns:t", DIMS, GraphParams())
    real_add = Index.add

    def spy(index: Index, keys: npt.NDArray[np.uint64], data: F32, **kw: Any) -> object:
        seen.append(len(keys))
        return real_add(index, keys, data, **kw)

    monkeypatch.setattr(Index, "add", spy)
    g.start(mat, 300)
    assert g.wait(60)
    assert seen == [64, 64, 64, 64, 44] and g.built_rows == 300


def test_the_search_breadth_grows_with_the_graph() -> None:
    assert scaled_ef(64, 1_000, 10) == 64
    assert scaled_ef(64, EF_SCALE_FROM, 10) == 64
    assert scaled_ef(64, 1_000, 100) == 100  # never below k
    assert scaled_ef(64, 4 * EF_SCALE_FROM, 10) == 128  # sqrt of the size
    assert scaled_ef(64, 1_000_000, 10) == int(64 * (1_000_000 / EF_SCALE_FROM) ** 0.5)
    assert scaled_ef(64, 10**12, 10) == EF_MAX


def test_a_graph_the_memory_cannot_hold_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    mat = _units(rng, 200)
    need = VG.graph_bytes(200, DIMS, 16)
    assert need >= 200 * (DIMS + 8 * 16)
    monkeypatch.setattr(VG, "available_bytes", lambda: need + VG.MEMORY_RESERVE - 1)
    g = ViewGraph("turns:t", DIMS, GraphParams())
    g.start(mat, 200)
    assert not g.wait(60)
    assert g.state == "skipped" and g.search(mat, mat[0], 3) is None
    monkeypatch.setattr(VG, "available_bytes", lambda: need + VG.MEMORY_RESERVE)
    assert _built(mat, 200).ready
    monkeypatch.setattr(VG, "available_bytes", lambda: None)  # unknown: built
    assert _built(mat, 200).ready


def test_available_memory_is_read_from_the_system() -> None:
    avail = VG.available_bytes()
    assert avail is None or avail > 0


def test_a_failed_insert_retires_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    # rows noted but not inserted would be missing from every later answer: the graph
    # stops answering (the store's index does) instead
    rng = np.random.default_rng(8)
    mat = np.zeros((400, DIMS), dtype=np.float32)
    mat[:300] = _units(rng, 300)
    g = _built(mat, 300)
    mat[300:400] = _units(rng, 100)
    g.note(range(300, 400))

    def refuse(*_a: object, **_kw: object) -> None:
        raise RuntimeError("no room")

    monkeypatch.setattr(Index, "add", refuse)
    assert g.search(mat, mat[350], 5) is None
    assert g.state == "failed" and not g.ready
    monkeypatch.undo()
    assert g.search(mat, mat[350], 5) is None  # not ready again with rows it never took


def test_int8_rows_reranked_by_the_matrix_keep_the_recall() -> None:
    # the graph's 8-bit rows only propose; the view's rows rank, so the cosines are exact
    # and the top 10 is the exact one for nearly every query
    rng = np.random.default_rng(9)
    centres = _units(rng, 40)
    mat = centres[rng.integers(0, 40, 4000)] + 0.35 * _units(rng, 4000)
    mat = (mat / np.linalg.norm(mat, axis=1, keepdims=True)).astype(np.float16)
    g = ViewGraph("turns:t", DIMS, GraphParams())
    g.start(mat, 4000)
    assert g.wait(60)
    hits = 0
    for q in _units(rng, 50):
        found = g.search(mat, q, 10)
        assert found is not None
        rows, sims = found
        assert np.allclose(sims, mat[rows].astype(np.float32) @ q, atol=1e-6)
        assert list(sims) == sorted(sims, reverse=True)
        hits += len(set(rows.tolist()) & set(_exact(mat.astype(np.float32), 4000, q, 10)))
    assert hits / 500 >= 0.97


def test_the_graph_library_loads_beside_the_model_runtime_in_either_order() -> None:
    # usearch 2.26 crashed the process when onnxruntime was imported after it (pinned
    # below it in pyproject.toml): each order in a fresh interpreter
    import subprocess
    import sys

    for first, second in (("usearch.index", "onnxruntime"), ("onnxruntime", "usearch.index")):
        code = f"import {first}; import {second}; print('ok')"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == b"ok", (first, done.returncode)


def test_a_row_rewritten_with_the_same_vector_is_not_inserted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a record patched without a new vector (an access count) costs no graph update; one
    # with a new vector is removed and inserted again
    rng = np.random.default_rng(10)
    mat = _units(rng, 200)
    g = _built(mat, 200)
    removed: list[int] = []
    real_remove = Index.remove

    def spy(index: Index, keys: npt.NDArray[np.uint64], **kw: Any) -> object:
        removed.extend(int(k) for k in keys)
        return real_remove(index, keys, **kw)

    monkeypatch.setattr(Index, "remove", spy)
    mat[5] = _units(rng, 1)[0]
    g.note([3, 5, 9])  # 3 and 9 rewritten with the vectors they had
    for q in (mat[5], mat[3], *_units(rng, 5)):
        found = g.search(mat, q, 5)
        assert found is not None and found[0].tolist() == _exact(mat, 200, q, 5)
    assert removed == [5]


def test_a_build_from_scratch_runs_at_the_lowest_priority_a_resumed_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing waits for a build from scratch (the store's index ranks meanwhile): it
    takes only the CPU the daemon's loads and requests leave. A graph resumed from its
    file, which a search may wait for, keeps the daemon's priority; one resumed where
    nothing waits for it (PostgreSQL) does not."""
    rng = np.random.default_rng(8)
    mat = _units(rng, 200)
    nice: dict[str, int] = {}
    real_add = Index.add

    def spy(index: Index, keys: npt.NDArray[np.uint64], data: F32, **kw: Any) -> object:
        me = threading.current_thread().name
        nice[me] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return real_add(index, keys, data, **kw)

    monkeypatch.setattr(Index, "add", spy)
    fresh = _built(mat, 200)
    assert fresh.ready and fresh.origin == "built"
    [(built_by, built_nice)] = nice.items()
    assert built_nice == BACKGROUND_NICE and built_by.startswith("libravdb-view-graph-build")
    nice.clear()
    resumed = ViewGraph("turns:t", DIMS, GraphParams(ef_search=200))
    resumed.start(mat, 200, resume=lambda: (VG.new_index(DIMS, resumed.params), None))
    assert resumed.wait(60) and resumed.origin == "built"
    [(resumed_by, resumed_nice)] = nice.items()
    assert resumed_nice == os.getpriority(os.PRIO_PROCESS, 0) and resumed_by != built_by
    nice.clear()
    unwaited = ViewGraph("turns:t", DIMS, GraphParams(ef_search=200))
    unwaited.start(mat, 200, lambda: (VG.new_index(DIMS, unwaited.params), None), wait=False)
    assert unwaited.wait(60)
    [(unwaited_by, unwaited_nice)] = nice.items()
    assert unwaited_nice == BACKGROUND_NICE and unwaited_by == built_by


@pytest.mark.parametrize("wait", [True, False])
def test_a_search_waits_for_a_saved_graph_only_where_asked(wait: bool) -> None:
    """On SQLite the store's own graph would have to load too, so a search waits for a
    saved graph's load; on PostgreSQL the server answers at once, so it does not."""
    rng = np.random.default_rng(11)
    mat = _units(rng, 300)
    release = threading.Event()

    def slow_resume() -> tuple[Index, Any]:
        release.wait(30)  # the saved graph still loading
        index = VG.new_index(DIMS, GraphParams(ef_search=200))
        return index, None

    g = ViewGraph("turns:t", DIMS, GraphParams(ef_search=200))
    g.start(mat, 300, resume=slow_resume, wait=wait)
    assert g.loading is wait
    if not wait:
        assert g.search(mat, mat[0], 5) is None  # the store answers meanwhile
        release.set()
    else:
        threading.Timer(0.2, release.set).start()
        found = g.search(mat, mat[0], 5)  # waited for the load
        assert found is not None and found[0].tolist() == _exact(mat, 300, mat[0], 5)
    assert g.wait(60) and g.ready
