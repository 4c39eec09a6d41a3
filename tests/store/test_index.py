"""Vector indexes: HNSW recall, persistence, staleness, corruption, dirty markers, rebuilds.

What a search returns (filters, funnel, tiers, exact again after shrinking) runs on both
backends; the hnswlib graphs' files, stamps and repairs are SQLite's (PostgreSQL's own
index checks: ``test_pg_backend.py``)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.config import StoreSettings
from sidecar.store import Put, Store
from sidecar.store import index as index_mod
from sidecar.store.backend import open_store
from sidecar.store.index import VectorIndex
from sidecar.store.interface import StoreBackend

from .conftest import Location, clustered, exact_topk

SQLITE_GRAPH = "the hnswlib graph files, their stamps and repairs"


def _fill(store: StoreBackend, coll: str, data: np.ndarray[Any, Any], batch: int = 2000) -> None:
    for lo in range(0, len(data), batch):
        store.put_many(
            [
                Put(coll, f"r{i:06d}", f"text {i}", {"i": i, "even": i % 2 == 0}, data[i])
                for i in range(lo, min(lo + batch, len(data)))
            ]
        )


def _ids(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


def _open(path: Location, **kw: Any) -> Any:
    args: dict[str, Any] = {"embed_dims": 32, "fingerprint": "fp", "exact_threshold": 500}
    args.update(kw)
    return open_store(path, **args)


@pytest.mark.sqlite_only("hnswlib's recall (PostgreSQL's: test_pg_backend.py)")
def test_hnsw_recall_20k_clustered(tmp_path: Path) -> None:
    """Recall@10 of the HNSW path >= 0.98 against exact search (20k x 384, clustered)."""
    data, queries = clustered(20_000, 384, clusters=200, noise=0.8, seed=7, queries=200)
    settings = StoreSettings(hnsw_ef_construction=100)  # recommended default (docs/store.md)
    with Store.open(
        tmp_path / "d",
        embed_dims=384,
        settings=settings,
        exact_threshold=1000,
        index_threads=2,
        background=False,  # bulk load, then one graph build in this thread
    ) as store:
        _fill(store, "user:u1", data, batch=5000)
        store.run_index_work()
        (status,) = store.index_status()
        assert status.mode == "hnsw" and status.pending == 0 and status.ann_count == 20_000
        norm = data / np.linalg.norm(data, axis=1, keepdims=True)
        hits = 0
        for q in queries:
            qn = q / np.linalg.norm(q)
            exact = set(np.argpartition(-(norm @ qn), 10)[:10].tolist())
            got = {int(h.id[1:]) for h in store.search("user:u1", q, 10)}
            hits += len(exact & got)
        recall = hits / (10 * len(queries))
        assert recall >= 0.98, recall


def _filled_at(path: Location) -> tuple[Location, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    data, queries = clustered(3000, 32, clusters=30, noise=0.6, seed=1, queries=30)
    with _open(path) as store:
        _fill(store, "user:u1", data)
        assert store.wait_indexed(60)
        assert store.index_status()[0].mode == "hnsw"
    return path, data, queries


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Location, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """3000 records with their graph (SQLite)."""
    return _filled_at(tmp_path / "d")


@pytest.fixture
def filled_any(location: Location) -> tuple[Location, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """3000 records with their ANN index, on either backend."""
    return _filled_at(location)


def _answers(store: StoreBackend, queries: np.ndarray[Any, Any]) -> list[list[str]]:
    return [_ids(store.search("user:u1", q, 10)) for q in queries]


def _agreement(a: list[list[str]], b: list[list[str]]) -> float:
    return sum(len(set(x) & set(y)) for x, y in zip(a, b, strict=True)) / sum(len(x) for x in a)


@pytest.mark.sqlite_only(SQLITE_GRAPH)
def test_saved_index_loads_without_rebuild(filled: Any) -> None:
    path, data, queries = filled
    with _open(path) as store:
        assert store.open_report["indexes_loaded"] == 1
        assert store.open_report["backfilled"] == 0
        before = _answers(store, queries)
    assert list((path / "index").glob("*.hnsw"))
    with _open(path) as store:
        assert _answers(store, queries) == before
        exact = [[f"r{i:06d}" for i in exact_topk(data, q, 10)] for q in queries]
        assert _agreement(exact, before) >= 0.98


@pytest.mark.sqlite_only(SQLITE_GRAPH)
def test_deleted_index_files_are_rebuilt(filled: Any) -> None:
    path, _data, queries = filled
    with _open(path) as store:
        before = _answers(store, queries)
    shutil.rmtree(path / "index")
    with _open(path) as store:
        assert store.open_report["indexes_loaded"] == 0
        assert store.open_report["rebuilding"] == 1
        assert _answers(store, queries) == before  # exact while the graph rebuilds
        assert store.wait_indexed(60)
        assert store.index_status()[0].mode == "hnsw"
        assert _agreement(before, _answers(store, queries)) >= 0.98


@pytest.mark.sqlite_only(SQLITE_GRAPH)
def test_stale_index_is_backfilled(filled: Any, tmp_path: Path) -> None:
    path, data, queries = filled
    saved = tmp_path / "saved-index"
    shutil.copytree(path / "index", saved)
    rng = np.random.default_rng(9)
    with _open(path) as store:
        # newer writes: inserts, vector updates, metadata-only updates, deletes
        store.put_many([Put("user:u1", f"new{i}", "", {}, queries[i]) for i in range(10)])
        store.put_many(
            [Put("user:u1", f"r{i:06d}", "", {}, rng.standard_normal(32)) for i in range(20)]
        )
        store.patch("user:u1", "r000100", {"note": "metadata only"})
        store.delete_many("user:u1", [f"r{i:06d}" for i in range(20, 60)])
        expected = _answers(store, queries)
    shutil.rmtree(path / "index")
    shutil.copytree(saved, path / "index")  # the older, stale graph
    with _open(path, background=False) as store:
        rep = store.open_report
        assert rep["indexes_loaded"] == 1
        assert rep["backfilled"] == 30  # 10 new + 20 changed vectors
        assert rep["marked_deleted"] == 60  # 20 stale versions + 40 deleted
        got = _answers(store, queries)
        assert _agreement(expected, got) >= 0.98
        for i in range(10):
            assert store.search("user:u1", queries[i], 1)[0].id == f"new{i}"
        everything = {h.id for h in store.search("user:u1", queries[0], 0)}
        assert "r000020" not in everything and len(everything) == 3000 + 10 - 40
        store.run_index_work()
        assert store.index_status()[0].pending == 0
        assert _agreement(expected, _answers(store, queries)) >= 0.98
        del data


@pytest.mark.sqlite_only(SQLITE_GRAPH)
@pytest.mark.parametrize("damage", ["flip", "truncate", "fingerprint", "future_seq", "junk_meta"])
def test_corrupt_or_foreign_index_is_rebuilt(filled: Any, damage: str) -> None:
    path, _data, queries = filled
    with _open(path) as store:
        before = _answers(store, queries)
    (graph,) = (path / "index").glob("*.hnsw")
    meta_path = graph.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    if damage == "flip":
        raw = bytearray(graph.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        graph.write_bytes(bytes(raw))
    elif damage == "truncate":
        graph.write_bytes(graph.read_bytes()[:1000])
    elif damage == "fingerprint":
        meta["fingerprint"] = "other-model"
        meta_path.write_text(json.dumps(meta))
    elif damage == "future_seq":
        meta["seq"] = 10**9
        meta_path.write_text(json.dumps(meta))
    else:
        meta_path.write_text("{not json")
    with _open(path) as store:
        # a flipped byte keeps the file's size: its checksum is read at the load, which
        # the first search runs (graph_lazy.py), and the graph is rebuilt from there
        assert store.open_report["indexes_loaded"] == (damage == "flip")
        assert _answers(store, queries) == before
        assert store.wait_indexed(60)
        assert _agreement(before, _answers(store, queries)) >= 0.98


@pytest.mark.sqlite_only(SQLITE_GRAPH)
def test_failed_index_update_leaves_dirty_marker_repaired(
    filled: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _data, queries = filled
    real_apply = VectorIndex.apply
    calls = {"n": 0}

    def flaky(self: VectorIndex, changes: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise MemoryError("simulated")
        real_apply(self, changes)

    with _open(path) as store:
        monkeypatch.setattr(VectorIndex, "apply", flaky)
        store.put("user:u1", "fresh", vector=queries[0] * 3)  # acknowledged despite the failure
        assert store.search("user:u1", queries[0], 1)[0].id == "fresh"  # SQLite scan
        assert store.index_status()[0].mode == "broken"
        deadline = time.monotonic() + 5
        while not store._dirty_cids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store._dirty_cids(), "dirty marker not written"
        store.checkpoint()  # repairs
        assert not store._dirty_cids()
        assert store.index_status()[0].mode in ("exact", "hnsw")
        assert store.search("user:u1", queries[0], 1)[0].id == "fresh"
        assert store.wait_indexed(60)
        assert store.search("user:u1", queries[0], 1)[0].id == "fresh"


@pytest.mark.sqlite_only(SQLITE_GRAPH)
def test_dirty_marker_at_start_forces_rebuild(filled: Any) -> None:
    path, _data, queries = filled
    with _open(path) as store:
        before = _answers(store, queries)
        cid = store.collection("user:u1").cid  # type: ignore[union-attr]
        store._writer.submit(
            lambda tx: tx.conn.execute("INSERT INTO dirty_tiers VALUES (?, 32, 'test', 0)", (cid,))
        ).result()
        store._indexer.stop()  # type: ignore[union-attr]
        store._indexer = None
    with _open(path) as store:
        assert store.open_report["indexes_loaded"] == 0
        assert not store._dirty_cids()
        assert _answers(store, queries) == before


def test_rebuild_after_many_deletes(filled_any: Any) -> None:
    path, data, queries = filled_any
    with _open(path) as store:
        _answers(store, queries)  # the graph in use (SQLite loads a saved one on first use)
        store.delete_many("user:u1", [f"r{i:06d}" for i in range(0, 3000, 3)])  # 33 %
        assert store.wait_indexed(60)
        (status,) = store.index_status()
        assert status.deleted_fraction <= 0.2 and status.ann_count == 2000
        keep = np.array([i for i in range(3000) if i % 3])
        exact = [[f"r{keep[j]:06d}" for j in exact_topk(data[keep], q, 10)] for q in queries]
        assert _agreement(exact, _answers(store, queries)) >= 0.98


def test_shrinks_back_to_exact(filled_any: Any) -> None:
    path, _data, queries = filled_any
    with _open(path) as store:
        store.delete_many("user:u1", [f"r{i:06d}" for i in range(100, 3000)])
        assert store.wait_indexed(60)
        assert len(store.search("user:u1", queries[0], 0)) == 100
        assert store.index_status()[0].mode == "exact"


def test_filtered_search_on_hnsw(filled_any: Any) -> None:
    path, data, queries = filled_any
    with _open(path) as store:
        even = np.arange(0, 3000, 2)
        for q in queries[:10]:
            # large allowed set: graph search with a filter
            got = _ids(store.search("user:u1", q, 10, where={"even": True}))
            exact = [f"r{even[j]:06d}" for j in exact_topk(data[even], q, 10)]
            assert len(set(got) & set(exact)) >= 9
            # small allowed set: scored exactly
            few = [f"r{i:06d}" for i in range(0, 3000, 300)]
            got_few = _ids(store.search("user:u1", q, 3, where={"i": 600}))
            assert got_few == ["r000600"]
            # exclusions
            top = _ids(store.search("user:u1", q, 5))
            rest = _ids(store.search("user:u1", q, 5, exclude_ids=top[:2]))
            assert not set(top[:2]) & set(rest) and rest[:3] == top[2:5]
            del few


def test_matryoshka_funnel(location: Location) -> None:
    """A coarse tier (prefix graph) + exact rerank with full vectors keeps recall."""
    rng = np.random.default_rng(11)
    # Matryoshka-like: most of the signal in the leading dimensions.
    base, queries = clustered(4000, 64, clusters=40, noise=0.7, seed=2, queries=40)
    scale = np.linspace(1.0, 0.15, 64, dtype=np.float32)
    data = base * scale
    queries = queries * scale
    with open_store(
        location, embed_dims=64, tiers=(16, 32), ann_dims=32, exact_threshold=500
    ) as store:
        assert store.ann_dims == 32
        _fill(store, "user:u1", data)
        assert store.wait_indexed(60)
        assert store.index_status()[0].dims == 32
        exact = [[f"r{i:06d}" for i in exact_topk(data, q, 10)] for q in queries]
        got = [_ids(store.search("user:u1", q, 10)) for q in queries]
        assert _agreement(exact, got) >= 0.95
        # scores are full-dimension cosines
        h = store.search("user:u1", data[5], 1)[0]
        assert h.id == "r000005" and h.score == pytest.approx(1.0, abs=1e-5)
    del rng


def test_tier_collections_take_query_prefix(location: Location) -> None:
    with open_store(location, embed_dims=256) as store:
        info = store.ensure_collections(["user:u1:64d"])[0]
        assert info.dims == 64
        v = np.zeros(64, dtype=np.float32)
        v[0] = 1
        store.put("user:u1:64d", "a", vector=v)
        q = np.zeros(256, dtype=np.float32)
        q[0] = 1
        assert store.search("user:u1:64d", q, 1)[0].score == pytest.approx(1.0)


@pytest.mark.sqlite_only("the hnswlib graph of the SQLite store (PostgreSQL: test_pg_backend)")
def test_a_larger_graph_is_searched_wider(
    location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the graph's ef grows with its size (scaled_ef); the scaling starts at 1,000 here
    monkeypatch.setattr(index_mod, "EF_SCALE_FROM", 1000)
    data, queries = clustered(4000, 16, clusters=20, noise=0.6, seed=8, queries=10)
    with open_store(location, embed_dims=16, exact_threshold=500) as store:
        _fill(store, "user:u1", data)
        assert store.wait_indexed(60)
        exact = [[f"r{i:06d}" for i in exact_topk(data, q, 10)] for q in queries]
        got = [_ids(store.search("user:u1", q, 10)) for q in queries]
        assert _agreement(exact, got) >= 0.95
        graph = next(iter(store._indexes.values())).ann
        assert graph is not None
        assert graph.ef == index_mod.scaled_ef(store.params.ef_search, 4000, 10) == 128
