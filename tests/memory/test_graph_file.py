"""A large view's graph saved beside its rows (sidecar/assembly/graph_file.py): a start
that takes the saved rows loads the graph instead of building it (and never asks the
store for its own), inserts again the rows put or patched since, and ranks as the exact
product does; a graph file that does not hold (another layout, a removal, damage) is
dropped and the graph built anew; a kill -9 during a save leaves a store that opens and
answers the same. SQLite only: a shared store keeps no files."""

from __future__ import annotations

import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from sidecar.assembly import graph_file
from sidecar.assembly.cache import CollectionView
from sidecar.assembly.view_graph import GraphParams, new_index
from sidecar.assembly.view_snapshot import SAVE_MIN_CHANGED
from sidecar.store import lexical_files, view_files
from sidecar.store.backend import open_store
from sidecar.store.graph_place import KIND, FileGraphPlace
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Put
from tests.support import kill_9_while_saving

pytestmark = pytest.mark.sqlite_only("a shared store keeps no files beside it")

COLL = "turns:u1"
N = 1500
ANN_ROWS = 1000  # the view is ranked by a graph from this many rows
DIMS = 8


def _seed(data_dir: Path, n: int = N) -> None:
    store = open_store(data_dir, embed_dims=DIMS, fingerprint="fp")
    try:
        rng = np.random.default_rng(1)
        store.put_many(
            [
                Put(COLL, f"r{i:05d}", f"note {i}", {"ts": i}, rng.standard_normal(DIMS))
                for i in range(n)
            ]
        )
    finally:
        store.close()


def _load(store: StoreBackend) -> CollectionView:
    view = CollectionView(COLL, ANN_ROWS, GraphParams(), snapshot_min_rows=ANN_ROWS)
    view.reload(store, store.collection_states([COLL])[COLL])
    assert view.graph is not None and view.graph.wait(60)
    return view


def _exact(view: CollectionView, q: np.ndarray, k: int) -> list[int]:
    mat = view.matrix
    assert mat is not None
    sims = mat.astype(np.float32) @ q
    return [int(i) for i in np.argsort(-sims, kind="stable")[:k] if sims[i] > 0]


def _ranks_exactly(view: CollectionView, queries: list[np.ndarray]) -> None:
    assert view.dense_mode == "graph"
    for q in queries:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        assert view.dense_top(q, 5) == _exact(view, q, 5)


def _queries(view: CollectionView, rows: list[int]) -> list[np.ndarray]:
    mat = view.matrix
    assert mat is not None
    rng = np.random.default_rng(7)
    return [*(mat[i].astype(np.float32) for i in rows), *rng.standard_normal((5, DIMS))]


def _origin(view: CollectionView) -> str:
    assert view.graph is not None
    return view.graph.origin


def test_a_start_loads_the_saved_graph_instead_of_building_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(tmp_path)
    path = view_files.path_of(tmp_path, COLL, lexical_files.GRAPHS)
    store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
    try:
        first = _load(store)
        assert _origin(first) == "built" and path.exists()
        first.close()  # the rows' save
        asked: list[str] = []
        monkeypatch.setattr(store, "prefetch_index", asked.append)
        second = _load(store)
        assert second.restored == N and second.layout == first.layout
        assert _origin(second) == "loaded" and asked == []  # the store's graph not needed
        _ranks_exactly(second, _queries(second, [0, 3, 777]))
        # put and patched since the save, replayed over the saved rows: inserted again
        old = second.matrix[3].astype(np.float32).copy()  # type: ignore[index]
        store.put(COLL, "r00003", text="moved", metadata={"ts": 3}, vector=-old)
        store.put(COLL, "zz-new", text="new", metadata={"ts": 9}, vector=np.ones(DIMS))
        second.close()
        third = _load(store)
        assert _origin(third) == "loaded" and third.ids[-1] == "zz-new"
        _ranks_exactly(third, [old, -old, np.ones(DIMS, np.float32)])
        assert third.dense_top(old / np.linalg.norm(old), 1) != [3]  # its old vector is gone
        # the rows saved again after many changes, the graph not: a start inserts again
        # the rows the graph lacks or holds an older version of, and only those
        rng = np.random.default_rng(5)
        more = [
            Put(COLL, f"r{i:05d}" if i < 100 else f"more{i}", "x", {"ts": i}, rng.random(DIMS))
            for i in range(SAVE_MIN_CHANGED + 50)
        ]
        store.put_many(more)
        third.catch_up(store, store.collection_states([COLL])[COLL])  # saves the rows
        third.close()
        fourth = _load(store)
        graph = fourth.graph
        assert _origin(fourth) == "loaded" and graph is not None
        assert graph.built_rows == len(more) + 1  # and r00003, rewritten after the graph
        _ranks_exactly(fourth, _queries(fourth, [0, 50, len(fourth.ids) - 1]))
    finally:
        store.close()


def test_a_loaded_graph_stays_mapped_and_takes_what_changed_beside_it(tmp_path: Path) -> None:
    # the saved graph is mapped from its file, not read into the process; rows appended
    # or rewritten after the start go into a small graph beside it, and a rewritten row's
    # old version no longer answers (nor does a row rewritten twice, nor one patched
    # without a new vector leave the mapped graph)
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
    try:
        _load(store).close()
        view = _load(store)
        graph = view.graph
        assert graph is not None and _origin(view) == "loaded"
        assert graph._base is not None and len(graph._base) == N and graph.built_rows == 0
        mat = view.matrix
        assert mat is not None
        old = mat[5].astype(np.float32).copy()
        rng = np.random.default_rng(9)
        new_vec = rng.standard_normal(DIMS)
        store.put(COLL, "r00005", text="moved", metadata={"ts": 5}, vector=new_vec)
        store.patch(COLL, "r00006", {"tag": "x"})  # the same vector: stays in the base
        store.put(COLL, "zz-new", text="new", metadata={"ts": 9}, vector=-old)
        view.catch_up(store, store.collection_states([COLL])[COLL])
        _ranks_exactly(view, [old, new_vec.astype(np.float32), -old, *_queries(view, [0, 6])])
        assert graph._masked == {5} and graph._index is not None and len(graph._index) == 2
        assert view.dense_top(old / np.linalg.norm(old), 1) != [5]
        store.put(COLL, "r00005", text="again", metadata={"ts": 5}, vector=old)  # back again
        view.catch_up(store, store.collection_states([COLL])[COLL])
        assert view.dense_top(old / np.linalg.norm(old), 1) == [5]
        _ranks_exactly(view, _queries(view, [5, 6, len(view.ids) - 1]))
        assert graph._masked == {5}  # its current version is the small graph's
    finally:
        store.close()


def test_a_graph_of_another_layout_a_removal_or_damage_is_built_anew(tmp_path: Path) -> None:
    _seed(tmp_path)
    path = view_files.path_of(tmp_path, COLL, lexical_files.GRAPHS)
    store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
    try:
        _load(store).close()
        # the rows' file gone: the view loads from the store in a new layout, whose row
        # numbers the saved graph does not label
        view_files.remove(tmp_path, COLL)
        other = _load(store)
        assert _origin(other) == "built" and path.exists()
        other.close()
        body = lexical_files.companion(path)
        raw = bytearray(body.read_bytes())
        raw[len(raw) // 2] ^= 0xFF  # a flipped bit in usearch's file: the checksum fails
        body.write_bytes(bytes(raw))
        damaged = _load(store)
        assert _origin(damaged) == "built"
        _ranks_exactly(damaged, _queries(damaged, [1, 2]))
        damaged.close()
        assert _origin(_load(store)) == "loaded"  # the damaged file was replaced
        path.unlink()  # a header lost (a kill between the two renames): its body goes too
        assert lexical_files.scrub_store(store) >= 1 and not body.exists()
        assert _origin(_load(store)) == "built"
        store.delete(COLL, "r00007")
        assert lexical_files.scrub_store(store) >= 1  # the forget's scrub removes them
        assert not path.exists() and not body.exists()
        after = _load(store)
        assert _origin(after) == "built" and "r00007" not in after.by_id
        _ranks_exactly(after, _queries(after, [6, 7]))
    finally:
        store.close()


def test_a_save_does_not_put_back_records_removed_while_it_was_built(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
    try:
        view = _load(store)
        graph = view.graph
        assert graph is not None
        state = store.collection_states([COLL])[COLL]
        stamp = graph_file.GraphStamp(view.layout, state.cid, state.removals, 0, N)
        index = new_index(DIMS, GraphParams())
        index.add(np.arange(3, dtype=np.uint64), np.eye(3, DIMS, dtype=np.float32))
        place = FileGraphPlace(tmp_path)
        place.remove(COLL)  # the build's own
        store.delete(COLL, "r00001")  # a forget between the build and the write
        assert not graph_file.save(place, COLL, stamp, GraphParams(), index, store)
        assert not place.exists(COLL)
        assert not lexical_files.companion(view_files.path_of(tmp_path, COLL, KIND)).exists()
        assert not list(lexical_files.directory(tmp_path, lexical_files.GRAPHS).glob("*.tmp"))
    finally:
        store.close()


def _intact(data_dir: Path) -> bool:
    """Whether the graph's header and body are there and agree (a kill between the body's
    rename and the header's leaves a body the header does not describe)."""
    meta = view_files.read(data_dir, COLL, lambda _m: True, lambda _i, _n: None, KIND)
    body = lexical_files.companion(view_files.path_of(data_dir, COLL, KIND))
    if meta is None or not body.exists():
        return False
    data = body.read_bytes()
    return (len(data), zlib.crc32(data)) == (meta["size"], meta["crc"])


CHILD = textwrap.dedent(
    """
    import sys
    from sidecar.assembly import graph_file
    from sidecar.assembly.view_graph import GraphParams
    from sidecar.store.backend import open_store

    where, coll, layout = sys.argv[1], sys.argv[2], sys.argv[3]  # a directory or a URL
    store = open_store(where, embed_dims=8, fingerprint="fp")
    place = store.graph_place()
    state = store.collection_states([coll])[coll]
    got = graph_file.load(place, coll, graph_file.layouts(layout, ()), state, 8, GraphParams())
    assert got is not None
    index, stamp = got
    print("saving", flush=True)
    while True:  # saves until killed
        graph_file.save(place, coll, stamp, GraphParams(), index)
    """
)


def test_kill_9_during_graph_saves_leaves_a_store_that_opens_and_answers_the_same(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, 20_000)
    path = view_files.path_of(tmp_path, COLL, lexical_files.GRAPHS)
    store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
    try:
        view = _load(store)
        view.close()
        layout, queries = view.layout, _queries(view, [5, 19_999])
        expected = [view.dense_top((q / np.linalg.norm(q)).astype(np.float32), 5) for q in queries]
    finally:
        store.close()
    for delay in (0.0, 0.01, 0.03, 0.08):
        kill_9_while_saving(CHILD, str(tmp_path), COLL, layout, delay=delay)
        store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
        try:
            had = _intact(tmp_path)
            view = _load(store)
            assert _origin(view) == ("loaded" if had else "built")
            got = [view.dense_top((q / np.linalg.norm(q)).astype(np.float32), 5) for q in queries]
            assert got == expected
            view.close()
            assert path.exists()  # taken (had) or saved anew
            assert lexical_files.scrub_store(store) >= 0  # leftovers go
            assert not list(lexical_files.directory(tmp_path, lexical_files.GRAPHS).glob("*.tmp"))
        finally:
            store.close()


def test_a_view_that_grows_past_the_graph_threshold_builds_under_a_new_layout(
    tmp_path: Path,
) -> None:
    """Rows appended after a view took its saved rows are in this daemon's order: a graph
    over them must not carry the saved rows' token, which another daemon that took the
    same rows (and appended in its own order) would match."""
    _seed(tmp_path, 1100)  # past SAVE_MIN_CHANGED: saved at its load
    store = open_store(tmp_path, embed_dims=DIMS, fingerprint="fp")
    try:
        first = CollectionView(COLL, 2500, GraphParams(), snapshot_min_rows=500)
        first.reload(store, store.collection_states([COLL])[COLL])
        first.close()  # its rows saved, under its token
        taker = CollectionView(COLL, 2500, GraphParams(), snapshot_min_rows=500)
        taker.reload(store, store.collection_states([COLL])[COLL])
        assert taker.restored == 1100 and taker.layout == first.layout and taker.graph is None
        rng = np.random.default_rng(3)
        store.put_many(
            [Put(COLL, f"z{i:05d}", f"more {i}", {"ts": i}, rng.random(DIMS)) for i in range(1500)]
        )
        taker.catch_up(store, store.collection_states([COLL])[COLL])
        graph = taker.graph
        assert graph is not None and graph.wait(60) and _origin(taker) == "built"
        assert taker.layout != first.layout
        meta = view_files.read(tmp_path, COLL, lambda _m: True, lambda _i, _n: None, KIND)
        assert meta is not None and meta["layout"] == taker.layout  # saved under the new one
        _ranks_exactly(taker, _queries(taker, [0, 2599]))
        taker.close()
    finally:
        store.close()
