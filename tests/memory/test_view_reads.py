"""The saved files of a sync's later views read ahead (sidecar/assembly/view_reads.py): only
for views loading for the first time that are large enough to have a file, never the
first one (its load starts at once); a view's load takes the file read ahead and serves
what reading it itself would. Real SQLite store and files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sidecar.assembly.cache import CollectionView
from sidecar.assembly.view_reads import read_ahead
from sidecar.store import lexical_files
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Put

MIN_ROWS = 1000
LARGE, OTHER, SMALL = "turns:u1", "user:u1", "dream:u1"


def _seed(store: StoreBackend, coll: str, n: int) -> None:
    rng = np.random.default_rng(len(coll))
    meta = {"ts": 1_000, "sessionId": "s1", "role": "user"}
    store.put_many(
        [
            Put(coll, f"{coll}-{i}", f"note {i} of {coll}", meta, rng.standard_normal(8))
            for i in range(n)
        ]
    )


def _view(name: str) -> CollectionView:
    return CollectionView(name, snapshot_min_rows=MIN_ROWS)


def test_the_later_large_views_files_are_read_ahead_and_taken(tmp_path: Path) -> None:
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        for name, n in ((LARGE, 1500), (OTHER, 1200), (SMALL, 50)):
            _seed(store, name, n)
        names = [LARGE, OTHER, SMALL]
        states = store.collection_states(names)
        for name in (LARGE, OTHER):  # first loads: they save their files
            v = _view(name)
            v.reload(store, states[name])
            v.close()
        assert lexical_files.saved(tmp_path, lexical_files.VIEWS) == sorted([LARGE, OTHER])
        fresh = {name: _view(name) for name in names}
        ahead = read_ahead(store, names, states, fresh)
        assert list(ahead) == [OTHER]  # not the first large one, not the small one
        expected = _view(OTHER)
        expected.reload(store, states[OTHER])  # reads its file itself
        got = fresh[OTHER]
        got.reload(store, states[OTHER], ahead=ahead[OTHER])
        assert got.restored == expected.restored == 1200
        assert got.ids == expected.ids and got.records[:] == expected.records[:]
        assert got.matrix is not None and expected.matrix is not None
        assert got.matrix.tobytes() == expected.matrix.tobytes()
        # the first large view's load starts at once; a view loaded already has its rows
        assert read_ahead(store, names, states, {LARGE: _view(LARGE), OTHER: got}) == {}
        for v in (*fresh.values(), expected):
            v.close()
    finally:
        store.close()
