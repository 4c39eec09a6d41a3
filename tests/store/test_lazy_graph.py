"""Saved HNSW graphs load on first use (``graph_lazy.py``): not at open, with the answers
an open that loaded them gave, every write made before the load found after it, and a
graph that was never loaded still scrubbed of deleted vectors, saved, dropped and
reopened as one that was."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scripts.stress.disk_traces import stored_vector, traces, vector_needles
from sidecar.store import Put, Store, graph_lazy

from .conftest import clustered

pytestmark = pytest.mark.sqlite_only("the hnswlib graph files of the SQLite store")

DIMS = 32
N = 3000
COLL = "user:u1"


def _open(data_dir: Path, **kw: Any) -> Store:
    opts: dict[str, Any] = {"embed_dims": DIMS, "fingerprint": "fp", "exact_threshold": 500}
    opts.update(kw)
    return Store.open(data_dir, **opts)


def _fill(store: Store, data: np.ndarray[Any, Any]) -> None:
    for lo in range(0, len(data), 1000):
        store.put_many(
            [Put(COLL, f"r{i:06d}", f"text {i}", {"i": i}, data[i]) for i in range(lo, lo + 1000)]
        )


def _answers(store: Store, queries: np.ndarray[Any, Any], k: int = 10) -> list[list[Any]]:
    return [[(h.id, round(h.score, 6)) for h in store.search(COLL, q, k)] for q in queries]


@pytest.fixture
def saved(data_dir: Path) -> tuple[Path, np.ndarray[Any, Any], list[list[Any]]]:
    """A store whose graph was built and saved, and the answers it gave before closing."""
    data, queries = clustered(N, DIMS, clusters=30, noise=0.6, seed=1, queries=20)
    with _open(data_dir, background=False) as store:
        _fill(store, data)
        store.run_index_work()
        assert store.index_status()[0].mode == "hnsw"
        before = _answers(store, queries)
    return data_dir, queries, before


def _mode(store: Store) -> str:
    return store.index_status()[0].mode


def test_not_loaded_at_open_and_the_first_search_loads_it(saved: Any) -> None:
    data_dir, queries, before = saved
    with _open(data_dir) as store:
        assert store.open_report["indexes_loaded"] == 1
        assert _mode(store) == "saved"
        idx = store._indexes[store.collection(COLL).cid]  # type: ignore[union-attr]
        assert idx.ann is None and len(idx.exact) == 0
        assert _answers(store, queries) == before  # what the graph gave when it was saved
        assert _mode(store) == "hnsw" and idx.ann is not None


def test_writes_before_the_first_search_are_found_after_it(saved: Any) -> None:
    data_dir, queries, _before = saved
    rng = np.random.default_rng(4)
    with _open(data_dir, background=False) as store:
        store.put_many([Put(COLL, f"new{i}", "", {}, queries[i]) for i in range(5)])
        moved = {f"r{i:06d}": rng.standard_normal(DIMS).astype(np.float32) for i in range(10)}
        store.put_many([Put(COLL, rid, "", {}, v) for rid, v in moved.items()])
        store.delete_many(COLL, [f"r{i:06d}" for i in range(10, 40)])
        assert _mode(store) == "saved"
        for i in range(5):
            assert store.search(COLL, queries[i], 1)[0].id == f"new{i}"
        for rid, v in moved.items():
            hit = store.search(COLL, v, 1)[0]
            assert hit.id == rid and hit.score == pytest.approx(1.0, abs=1e-5)
        everything = {h.id for h in store.search(COLL, queries[0], 0)}
        assert len(everything) == N + 5 - 30 and "r000010" not in everything
        (status,) = store.index_status()
        assert status.mode == "hnsw" and status.pending == 15  # the tail, as at a start
        store.run_index_work()
        assert store.index_status()[0].pending == 0
        assert store.search(COLL, queries[0], 1)[0].id == "new0"


def test_writes_during_the_load_are_not_lost(saved: Any) -> None:
    """The writer applies each commit under the index's lock; the load reads SQLite
    under it too, so a commit lands in the load's reads or on the loaded graph."""
    data_dir, _queries, _before = saved
    rng = np.random.default_rng(8)
    vecs = rng.standard_normal((300, DIMS)).astype(np.float32)
    with _open(data_dir) as store:
        stop = threading.Event()
        written: list[int] = []

        def write() -> None:
            for i in range(len(vecs)):
                if stop.is_set():
                    return
                store.put(COLL, f"w{i}", vector=vecs[i])
                written.append(i)

        t = threading.Thread(target=write)
        t.start()
        try:
            while len(written) < 20:
                threading.Event().wait(0.001)
            store.search(COLL, vecs[0], 1)  # loads while the writes go on
        finally:
            t.join()
        assert len(written) == len(vecs)
        for i in written:
            hit = store.search(COLL, vecs[i], 1)[0]
            assert hit.id == f"w{i}" and hit.score == pytest.approx(1.0, abs=1e-5)


def _needles(data_dir: Path, rid: str) -> dict[str, bytes]:
    raw = stored_vector(data_dir, COLL, rid)
    assert raw is not None
    return {f"{rid} {name}": b for name, b in vector_needles(raw).items()}


def _in_graph_files(data_dir: Path, needles: dict[str, bytes]) -> list[str]:
    return [t for t in traces(data_dir, needles) if t.startswith("c")]


def test_a_delete_leaves_no_vector_in_the_file_of_a_graph_never_loaded(saved: Any) -> None:
    data_dir, queries, _before = saved
    with _open(data_dir, background=False) as store:
        needles = {**_needles(data_dir, "r000123"), **_needles(data_dir, "r000124")}
        assert len(_in_graph_files(data_dir, needles)) == 4  # unit vectors, 2 windows each
        assert store.delete(COLL, "r000123")
        store.put(COLL, "r000124", vector=queries[0])  # a rewritten vector: its old one goes
        store.checkpoint()  # in the daemon: the checkpoint thread's tick after a scrub
        assert _mode(store) == "saved"  # scrubbed in place, not loaded
        assert _in_graph_files(data_dir, needles) == []
        answers = _answers(store, queries)
        assert all("r000123" not in {h for h, _ in a} for a in answers)
        assert store.search(COLL, queries[0], 1)[0].id == "r000124"
    with _open(data_dir) as store:  # the patched file is accepted and answers the same
        assert store.open_report["indexes_loaded"] == 1
        assert store.open_report["marked_deleted"] == 0  # nothing left to mark
        assert _answers(store, queries) == answers
        store.delete(COLL, "r000200")
        store.checkpoint()  # a save of the loaded graph: its deleted flags add up
        idx = store._indexes[store.collection(COLL).cid]  # type: ignore[union-attr]
        assert idx.persist and not idx.ann_dirty


def test_the_old_vector_of_a_rewritten_record_leaves_the_unloaded_file(saved: Any) -> None:
    data_dir, queries, _before = saved
    with _open(data_dir, background=False) as store:
        needles = _needles(data_dir, "r000123")
        store.put(COLL, "r000123", vector=queries[1])
        store.checkpoint()
        assert _mode(store) == "saved"
        assert _in_graph_files(data_dir, needles) == []
        assert store.search(COLL, queries[1], 1)[0].id == "r000123"


def test_close_keeps_the_file_of_a_graph_never_loaded(saved: Any) -> None:
    data_dir, queries, before = saved
    graph = next((data_dir / "index").glob("*.hnsw"))
    stamp = graph.with_suffix(".json").read_bytes()
    with _open(data_dir) as store:
        store.put(COLL, "late", vector=queries[2])
    assert graph.with_suffix(".json").read_bytes() == stamp  # not loaded, nothing to save
    with _open(data_dir, background=False) as store:
        assert store.open_report["backfilled"] == 1
        assert store.search(COLL, queries[2], 1)[0].id == "late"
        store.delete(COLL, "late")
        assert _answers(store, queries) == before


def test_a_collection_that_shrank_before_its_first_search_drops_the_file(saved: Any) -> None:
    data_dir, queries, _before = saved
    with _open(data_dir) as store:
        store.delete_many(COLL, [f"r{i:06d}" for i in range(100, N)])
        assert store.wait_indexed(60)
        assert not list((data_dir / "index").glob("*.hnsw"))
        assert len(store.search(COLL, queries[0], 0)) == 100
        assert _mode(store) == "exact"


def test_a_file_damaged_after_the_open_is_rebuilt_at_the_load(saved: Any) -> None:
    data_dir, queries, before = saved
    graph = next((data_dir / "index").glob("*.hnsw"))
    with _open(data_dir) as store:
        assert _mode(store) == "saved"
        raw = bytearray(graph.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        graph.write_bytes(bytes(raw))
        exact = _answers(store, queries)  # exact while the graph rebuilds
        assert [[h for h, _ in a] for a in exact] == [[h for h, _ in a] for a in before]
        assert store.wait_indexed(60)
        assert _mode(store) == "hnsw"


def test_a_scrub_does_not_checksum_a_damaged_file_as_its_own(saved: Any) -> None:
    """A delete while the graph is not loaded rewrites the file and its stamp; a file
    damaged since its save is dropped there, not given a checksum of the damage (which the
    load would then accept)."""
    data_dir, queries, before = saved
    graph = next((data_dir / "index").glob("*.hnsw"))
    with _open(data_dir, background=False) as store:
        assert _mode(store) == "saved"
        raw = bytearray(graph.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        graph.write_bytes(bytes(raw))
        store.delete(COLL, "r000008")
        store.checkpoint()  # the scrub of the file the graph was not loaded from
        assert not graph.exists() and not graph.with_suffix(".json").exists()
        want = [[h for h in a if h[0] != "r000008"] for a in before]
        got = _answers(store, queries)
        assert [[h for h, _ in a][:9] for a in got] == [[h for h, _ in a][:9] for a in want]


def test_an_idle_graph_goes_back_to_its_file_and_loads_again(saved: Any) -> None:
    data_dir, queries, before = saved
    with _open(data_dir, background=False) as store:
        assert _answers(store, queries) == before
        assert _mode(store) == "hnsw"
        assert graph_lazy.unload_idle(store) == 0  # used a moment ago
        store.graph_idle_s = 0.0
        store.put(COLL, "tail", vector=queries[3])  # in the exact tail, after the file's seq
        assert graph_lazy.unload_idle(store) == 1
        assert _mode(store) == "saved"
        assert _answers(store, queries[:3]) == before[:3]  # loaded again
        assert store.search(COLL, queries[3], 1)[0].id == "tail"
        store.delete(COLL, "r000007")  # the loaded graph changed: its file is not it
        assert graph_lazy.unload_idle(store) == 0
        store.checkpoint()
        assert graph_lazy.unload_idle(store) == 1
        store.delete(COLL, "r000008")  # a delete while unloaded: scrubbed in the file
        store.checkpoint()
        assert _mode(store) == "saved"
        hits = {h.id for h in store.search(COLL, queries[0], 0)}
        assert len(hits) == N + 1 - 2 and not {"r000007", "r000008"} & hits


def test_a_prefetch_loads_the_graph_before_the_first_search(saved: Any) -> None:
    data_dir, queries, before = saved
    with _open(data_dir) as store:
        store.put(COLL, "early", vector=queries[5])  # written before the prefetch
        assert store.prefetch_index(COLL) is True
        store._prefetcher.submit(lambda: None).result()  # the prefetch is done
        assert _mode(store) == "hnsw"
        assert store.prefetch_index(COLL) is False  # loaded: nothing to do
        assert store.prefetch_index("user:nobody") is False
        assert _answers(store, queries[:5]) == before[:5]
        assert store.search(COLL, queries[5], 1)[0].id == "early"


def test_a_search_during_a_prefetch_waits_for_it_and_answers_the_same(saved: Any) -> None:
    data_dir, queries, before = saved
    for _ in range(3):  # the search lands before, during or after the load
        with _open(data_dir) as store:
            assert store.prefetch_index(COLL) is True
            assert _answers(store, queries) == before
            assert _mode(store) == "hnsw"


def test_close_waits_for_a_prefetch_and_the_file_still_opens(saved: Any) -> None:
    data_dir, queries, before = saved
    with _open(data_dir) as store:
        assert store.prefetch_index(COLL) is True
    assert store.prefetch_index(COLL) is False  # closed
    with _open(data_dir) as store:
        assert _answers(store, queries) == before
