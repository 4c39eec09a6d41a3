"""Half-precision matrices (sidecar/assembly/cache.py ``dtype_for``, view_rows.Matrix): a
view the store's index ranks keeps its unit rows in float16, each the float32 unit vector
rounded once; a view that scans exactly keeps float32, bit for bit the store's; the saved
file keeps the view's type, and a start takes it only where that type is the one wanted.
Real SQLite stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sidecar.assembly import view_snapshot
from sidecar.assembly.cache import CollectionView
from sidecar.assembly.view_budget import view_bytes
from sidecar.assembly.view_inputs import Twins
from sidecar.assembly.view_rows import STRING
from sidecar.assembly.view_snapshot import Snapshot
from sidecar.store import view_files
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState, Put
from sidecar.store.view_place import FileViewPlace

COLL, USER = "turns:u1", "user:u1"
N = 1500
LARGE = 1000  # ann_min_rows of the views that the store ranks here
EXACT = 10**9  # ann_min_rows of views that always scan exactly


def _seed(data_dir: Path, coll: str = COLL, n: int = N, start: int = 0) -> StoreBackend:
    store = open_store(data_dir, embed_dims=8, fingerprint="fp")
    rng = np.random.default_rng(start + 1)
    meta = {"ts": 1_000, "sessionId": "s1", "role": "user"}
    store.put_many(
        [
            Put(coll, f"r{i:05d}", f"note {i}", {**meta, "seq": i}, rng.standard_normal(8))
            for i in range(start, start + n)
        ]
    )
    return store


def _view(store: StoreBackend, ann_min_rows: int, coll: str = COLL, **kw: Any) -> CollectionView:
    view = CollectionView(coll, ann_min_rows, **kw)
    view.reload(store, store.collection_states([coll])[coll])
    return view


def test_a_view_the_store_ranks_holds_each_unit_row_rounded_once(tmp_path: Path) -> None:
    store = _seed(tmp_path)
    try:
        exact, half = _view(store, EXACT), _view(store, LARGE)
        assert exact.matrix is not None and half.matrix is not None
        assert exact.matrix.dtype == np.float32 and not exact.ann
        assert half.matrix.dtype == np.float16 and half.ann
        assert np.array_equal(half.matrix, exact.matrix.astype(np.float16))
        assert half.ids == exact.ids and half.records[7] == exact.records[7]
        # a candidate's vector is float32 (the row, widened), as in a float32 view
        vec = half.candidate(7).vector
        assert isinstance(vec, np.ndarray) and vec.dtype == np.float32
        assert np.array_equal(vec, half.matrix[7].astype(np.float32))
        # the budget counts two bytes a dimension, and no metadata in the lean rows (no
        # candidates built on either side)
        half.trim(0)
        assert half.made == exact.made == 0
        metas = sum(map(len, exact.rows.metas)) + N * STRING
        assert half.rows.lean and not exact.rows.lean
        assert view_bytes(exact) - view_bytes(half) == N * 8 * 2 + metas
        exact.close()
        half.close()
    finally:
        store.close()


def test_a_view_that_grows_past_the_threshold_turns_half(tmp_path: Path) -> None:
    store = _seed(tmp_path, n=LARGE - 5)
    try:
        view = _view(store, LARGE)
        assert view.matrix is not None and view.matrix.dtype == np.float32 and not view.ann
        rng = np.random.default_rng(9)
        meta = {"ts": 2_000, "sessionId": "s2", "role": "user"}
        store.put_many(
            [Put(COLL, f"z{i}", f"later {i}", meta, rng.standard_normal(8)) for i in range(10)]
        )
        view.catch_up(store, store.collection_states([COLL])[COLL])
        assert view.ann and view.matrix is not None and view.matrix.dtype == np.float16
        fresh = _view(store, EXACT)
        assert fresh.matrix is not None and fresh.ids == view.ids
        assert np.array_equal(view.matrix, fresh.matrix.astype(np.float16))
        view.close()
        fresh.close()
    finally:
        store.close()


def test_a_start_takes_saved_half_rows_only_where_half_rows_are_wanted(tmp_path: Path) -> None:
    store = _seed(tmp_path)
    try:
        first = _view(store, LARGE, snapshot_min_rows=LARGE)
        first.close()  # waits for the save
        assert first.matrix is not None
        second = _view(store, LARGE, snapshot_min_rows=LARGE)
        assert second.restored == N and second.matrix is not None
        assert second.matrix.dtype == np.float16
        assert second.matrix.tobytes() == first.matrix.tobytes()
        second.close()
        # a view that scans exactly needs the store's float32 rows: it reads the store
        exact = _view(store, EXACT, snapshot_min_rows=LARGE)
        assert exact.restored == 0 and exact.matrix is not None
        assert exact.matrix.dtype == np.float32
        assert np.array_equal(exact.matrix.astype(np.float16), first.matrix)
        exact.close()
    finally:
        store.close()


def _write(data_dir: Path, state: CollectionState, snap: Snapshot, **header: Any) -> None:
    """``snap``'s file as version 2 wrote it (no texts' digests), with a header of its own
    (``header`` replaces or adds keys)."""
    base: dict[str, Any] = {
        "version": 2,
        "cid": state.cid,
        "removals": state.removals,
        "max_seq": state.max_seq,
        "rows": len(snap.ids),
        "dims": 8,
        "roles": len(snap.roles),
        "sessions": len(snap.sessions),
        "density": None,
    }
    sections = view_snapshot.sections(snap)[:-1]  # the digests came with version 3
    assert view_files.write(data_dir, COLL, base | header, sections)


def test_a_version_1_file_of_float32_rows_is_still_taken(tmp_path: Path) -> None:
    store = _seed(tmp_path)
    try:
        exact = _view(store, EXACT, snapshot_min_rows=10**9)  # saves nothing itself
        state = store.collection_states([COLL])[COLL]
        assert exact.matrix is not None
        snap = view_snapshot.snapshot(COLL, state, exact.rows, exact.matrix)
        _write(tmp_path, state, snap, version=1)  # as version 1 wrote it: no "matrix"
        # (a view reads a saved one from its own threshold on; taken whole, it saves nothing)
        again = _view(store, EXACT, snapshot_min_rows=N)
        assert again.restored == N and again.matrix is not None
        assert again.matrix.tobytes() == exact.matrix.tobytes()
        half = _view(store, LARGE, snapshot_min_rows=N)  # converted once, as a load would
        assert half.restored == N and half.matrix is not None
        assert np.array_equal(half.matrix, exact.matrix.astype(np.float16))
        for v in (exact, again, half):
            v.close()
    finally:
        store.close()


def test_twins_are_found_between_a_float32_and_a_float16_view(tmp_path: Path) -> None:
    store = _seed(tmp_path)
    try:
        # the durable memories: copies of 40 history records (same ids, texts, vectors)
        listed = store.get_many(COLL, [f"r{i:05d}" for i in range(40)], include_vectors=True)
        store.put_many([Put(USER, r.id, r.text, r.metadata, r.vector) for r in listed])
        turns, user = _view(store, LARGE), _view(store, EXACT, USER)
        assert turns.matrix is not None and turns.matrix.dtype == np.float16
        assert user.matrix is not None and user.matrix.dtype == np.float32
        rows = Twins(COLL).update(user, turns)
        assert rows.tolist() == [turns.by_id[i] for i in user.ids]
        turns.close()
        user.close()
    finally:
        store.close()


def test_a_file_naming_another_matrix_type_is_dropped(tmp_path: Path) -> None:
    store = _seed(tmp_path)
    try:
        view = _view(store, LARGE, snapshot_min_rows=10**9)
        state = store.collection_states([COLL])[COLL]
        assert view.matrix is not None
        snap = view_snapshot.snapshot(COLL, state, view.rows, view.matrix)
        for kind in ("bfloat16", ["float16"]):
            _write(tmp_path, state, snap, matrix=kind)
            assert view_snapshot.load(FileViewPlace(tmp_path), COLL, state, 8) is None
            assert not view_files.path_of(tmp_path, COLL).exists()
        view.close()
    finally:
        store.close()
