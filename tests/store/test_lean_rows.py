"""Lean rows (sidecar/assembly/view_metas.py, ``ViewRows.lean``): a view the store's index
ranks keeps no metadata and reads it from the store (``StoreBackend.metadata_many``, one
query for the rows a request makes candidates of). Its candidates are those of a view that
keeps its metadata, summaries' covered turns included; a record removed since the view's
sync has none; the saved file of lean rows holds no metadata and loads lean. On both
backends where the store is all there is; the files beside the store are SQLite's."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.assembly import view_snapshot
from sidecar.assembly.cache import CollectionView
from sidecar.assembly.candidates import Candidate
from sidecar.memory.core import layout as C
from sidecar.store import Store, view_files
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Put

COLL = C.TURNS_PREFIX + "u1"
DIMS = 4
N = 40
LEAN = 10  # ann_min_rows of the lean views here
FULL = 10**9  # ann_min_rows of views that keep their metadata


def _meta(i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"ts": 1_000 + i, "sessionId": "s1", "role": "user", "seq": i}
    meta |= {"k": i, "note": "é ü \u2028" * (i % 3), "nested": {"a": [i, None, 2.5]}}
    if i >= N - 3:  # summaries: the last covers the one before it (transitively)
        meta |= {"type": C.TYPE_SUMMARY, "source_turn_ids": [f"t{i}"]}
        if i > N - 3:
            meta["continuity_lineage"] = {"parent_summary_ids": [f"r{i - 1:03d}"]}
    return meta


def _seed(store: StoreBackend) -> None:
    rng = np.random.default_rng(4)
    store.put_many(
        [Put(COLL, f"r{i:03d}", f"turn {i}", _meta(i), rng.standard_normal(DIMS)) for i in range(N)]
    )


def _view(store: StoreBackend, ann_min_rows: int, **kw: Any) -> CollectionView:
    view = CollectionView(COLL, ann_min_rows, **kw)
    view.reload(store, store.collection_states([COLL])[COLL])
    return view


def _plain(c: Candidate) -> Candidate:
    """A candidate without its vector (float16 rows in a lean view, float32 otherwise)."""
    return replace(c, vector=None)


def test_metadata_many_reads_the_metadata_get_many_reads(store: StoreBackend) -> None:
    _seed(store)
    ids = [f"r{i:03d}" for i in range(0, N, 3)] + ["missing", "r001", "a\x00b"]
    got = store.metadata_many(COLL, ids)
    want = {r.id: r.metadata for r in store.get_many(COLL, ids)}
    assert got == want and len(got) == len(range(0, N, 3)) + 1
    assert store.metadata_many(COLL, []) == {}
    assert store.metadata_many("turns:nobody", ids) == {}


def test_a_lean_view_makes_the_candidates_of_a_view_that_keeps_its_metadata(
    store: StoreBackend,
) -> None:
    _seed(store)
    lean, kept = _view(store, LEAN), _view(store, FULL)
    try:
        assert lean.rows.lean and not kept.rows.lean and lean.ann and not kept.ann
        assert set(lean.rows.metas) == {b""}
        assert lean.rows.nbytes < kept.rows.nbytes
        rows = list(range(N))
        assert [_plain(c) for c in lean.candidates(rows)] == [_plain(c) for c in kept.cands]
        # the summaries' covered turns, resolved through their parents' metadata
        assert lean.cands[N - 1].turn_ids == (f"t{N - 1}", f"t{N - 2}", f"t{N - 3}")
        # one by one too, and as records
        lean.trim(0)
        assert _plain(lean.candidate(5)) == _plain(kept.candidate(5))
        assert lean.records[7] == kept.records[7]
        assert lean.neighbours([kept.cands[4]]) == [lean.cands[3], lean.cands[5]]
    finally:
        lean.close()
        kept.close()


def test_a_record_removed_since_the_sync_has_no_metadata(store: StoreBackend) -> None:
    _seed(store)
    view = _view(store, LEAN)
    try:
        store.delete_many(COLL, ["r002"])
        c = view.candidates([2, 3])
        assert c[0].id == "r002" and c[0].metadata == {} and c[1].metadata == _meta(3)
    finally:
        view.close()


def test_a_view_that_grows_lean_drops_its_metadata_and_stays_right(store: StoreBackend) -> None:
    _seed(store)
    view = _view(store, N + 1)
    try:
        assert not view.rows.lean and view.cands[1].metadata == _meta(1)
        rng = np.random.default_rng(5)
        store.put_many(
            [Put(COLL, f"z{i}", f"later {i}", _meta(i), rng.standard_normal(DIMS)) for i in (1, 2)]
        )
        store.patch(COLL, "r001", {"k": "patched"})  # a row rewritten as it turns lean
        view.catch_up(store, store.collection_states([COLL])[COLL])
        assert view.ann and view.rows.lean and set(view.rows.metas) == {b""}
        fresh = _view(store, FULL)
        assert [_plain(c) for c in view.cands] == [_plain(c) for c in fresh.cands]
        fresh.close()
        # a refresh (a shared store's path after removals) keeps every row's metadata
        store.delete_many(COLL, ["r000"])
        view.refresh(store, store.collection_states([COLL])[COLL])
        fresh = _view(store, FULL)
        assert view.ids == fresh.ids and view.rows.lean
        assert [_plain(c) for c in view.cands] == [_plain(c) for c in fresh.cands]
        fresh.close()
    finally:
        view.close()


def _metadata_bytes(data_dir: Path) -> int:
    """The size of the metadata blob in the saved file of COLL (sections: the ids' offsets
    and blob, the texts', then the metadata's)."""
    meta = view_files.read(data_dir, COLL, lambda _m: True, lambda _i, n: memoryview(bytearray(n)))
    assert meta is not None
    return int(meta["sections"][5])


@pytest.mark.sqlite_only("the saved view and damaged records are SQLite's files")
def test_the_file_of_lean_rows_holds_no_metadata_and_loads_lean(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view_snapshot, "SAVE_MIN_CHANGED", 1)
    with Store.open(data_dir, embed_dims=DIMS) as store:
        _seed(store)
        first = _view(store, LEAN, snapshot_min_rows=LEAN)
        first.close()  # waits for the save
        assert _metadata_bytes(data_dir) == 0
        kept = _view(store, FULL, snapshot_min_rows=10**9)
        kept.close()
        state = store.collection_states([COLL])[COLL]
        assert first.matrix is not None
        # a float16 file that holds metadata (as the sixth step wrote them) loads lean
        snap = view_snapshot.snapshot(COLL, state, kept.rows, first.matrix)
        header = {
            "version": 2,  # no texts' digests: the last section, from version 3
            "cid": state.cid,
            "removals": state.removals,
            "max_seq": state.max_seq,
            "rows": N,
            "dims": DIMS,
            "roles": len(snap.roles),
            "sessions": len(snap.sessions),
            "density": None,
            "matrix": "float16",
        }
        assert view_files.write(data_dir, COLL, header, view_snapshot.sections(snap)[:-1])
        assert _metadata_bytes(data_dir) == sum(map(len, kept.rows.metas)) > 0
        again = _view(store, LEAN, snapshot_min_rows=LEAN)  # taken whole: saves nothing
        assert again.restored == N and again.rows.lean and set(again.rows.metas) == {b""}
        assert [_plain(c) for c in again.cands] == [_plain(c) for c in kept.cands]
        again.close()
    # a damaged record's metadata is left out and reported, as get_many leaves it out
    conn = sqlite3.connect(data_dir / "store.sqlite3")
    with conn:
        conn.execute("UPDATE records SET metadata = '{\"a\": ' WHERE id = 'r005'")
    conn.close()
    with Store.open(data_dir, embed_dims=DIMS) as store:
        got = store.metadata_many(COLL, ["r004", "r005"])
        assert got == {"r004": _meta(4)}
        assert (COLL, "r005") in store.bad_records


def test_a_durable_view_keeps_its_history_twins_strings(store: StoreBackend) -> None:
    _seed(store)
    user = C.USER_PREFIX + "u1"
    copies = store.get_many(COLL, [f"r{i:03d}" for i in range(0, N, 2)], include_vectors=True)
    store.put_many(
        [Put(user, r.id, r.text if r.id != "r004" else "changed", {}, r.vector) for r in copies]
    )
    turns = _view(store, LEAN)
    durable = CollectionView(user, LEAN)
    durable.reload(store, store.collection_states([user])[user], twin=turns)
    alone = CollectionView(user, FULL)
    alone.reload(store, store.collection_states([user])[user])
    try:
        for i, rid in enumerate(durable.ids):
            j = turns.by_id[rid]
            assert rid is turns.ids[j]
            same = durable.rows.texts[i] is turns.rows.texts[j]
            assert same == (rid != "r004")
        assert durable.rows.texts[durable.by_id["r004"]] == "changed"
        assert [_plain(c) for c in durable.cands] == [_plain(c) for c in alone.cands]
    finally:
        for v in (turns, durable, alone):
            v.close()
