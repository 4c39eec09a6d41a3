"""A view's rows and matrix saved beside the store (sidecar/assembly/view_snapshot.py,
sidecar/store/view_files.py): a start takes them instead of reading every record, replays
what was put or patched since, serves the same rows, drops a file that does not hold (a
removal, other dimensions, damage), and a kill -9 during a save leaves a store that opens
and answers the same. The same on PostgreSQL, whose saved views are rows of the database:
test_pg_saved_views.py."""

from __future__ import annotations

import os
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.assembly import view_snapshot, view_terms
from sidecar.assembly.cache import CollectionView
from sidecar.assembly.density import Density
from sidecar.assembly.view_snapshot import Snapshot
from sidecar.assembly.view_terms import text_digests
from sidecar.priority import BACKGROUND_NICE
from sidecar.store import lexical_files, mapped_rows, view_files
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Put
from sidecar.store.view_place import FileViewPlace
from tests.support import kill_9_while_saving

COLL = "turns:u1"
N = 1500  # past view_snapshot.SAVE_MIN_CHANGED
MIN_ROWS = 1000  # the views of these tests save from this many rows


@pytest.fixture(autouse=True, params=["read", "mapped"])
def matrix_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: the saved matrix read into memory, and mapped from the file
    (``mapped_rows``; a real view maps from 1 MiB, these tests' matrices are smaller)."""
    mode = str(request.param)
    if mode == "mapped":
        if not mapped_rows.supported():
            pytest.skip("files are mapped over a region on Linux only")
        monkeypatch.setattr(mapped_rows, "MIN_BYTES", 1)
    return mode


def _meta(i: int) -> dict[str, Any]:
    return {"ts": 1_000 + i, "seq": i % 50, "sessionId": f"s{i // 50}", "role": "user"}


def _seed(data_dir: Path, n: int = N) -> None:
    store = open_store(data_dir, embed_dims=8, fingerprint="fp")
    try:
        rng = np.random.default_rng(1)
        puts = [
            Put(COLL, f"r{i:05d}", f"Note {i}: tennis é {i % 97}", _meta(i), rng.standard_normal(8))
            for i in range(n)
        ]
        puts.append(Put(COLL, "zero", "", {"text": "from metadata"}, np.zeros(8)))
        store.put_many(puts)
    finally:
        store.close()


def _load(store: StoreBackend) -> CollectionView:
    view = CollectionView(COLL, snapshot_min_rows=MIN_ROWS)
    view.reload(store, store.collection_states([COLL])[COLL])
    return view


def _content(view: CollectionView) -> dict[str, Any]:
    """What the view serves, by id: the record, the candidate's fields, the vector."""
    mat = view.matrix
    assert mat is not None
    out: dict[str, Any] = {}
    for i, rid in enumerate(view.ids):
        c = view.candidate(i)
        fields = (c.kind, c.text, c.session_id, c.role, c.ts, c.seq, c.turn_ids, c.tokens)
        out[rid] = (view.records[i], fields, mat[i].tobytes(), c.vector is None)
    out["#bm25"] = view.bm25.search("tennis 42", 20)
    out["#by_pos"] = sorted((k, view.ids[v]) for k, v in view.by_pos.items())
    return out


def test_a_start_takes_the_saved_rows_and_serves_the_same(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        first = _load(store)
        first.close()  # waits for the saves
        assert lexical_files.saved(tmp_path, lexical_files.VIEWS) == [COLL]
        expected = _content(first)
        assert first.restored == 0
        second = _load(store)
        assert second.restored == N + 1  # every row from the file
        assert _content(second) == expected
        assert second.rows.nbytes == first.rows.nbytes
        # put and patched since the save: replayed from the store over the saved rows
        store.put(COLL, "r00003", text="new text", metadata=_meta(3), vector=np.ones(8))
        store.put(COLL, "zz-new", text="lighthouse", metadata=_meta(9), vector=np.ones(8))
        second.close()
        third = _load(store)
        assert third.restored == N + 1
        view_files.remove(tmp_path, COLL)
        fresh = _load(store)
        assert _content(third) == _content(fresh)
        assert third.ids[-1] == "zz-new"  # appended after the saved rows
        # the replay made the view a catch-up away from the file: it saves again once
        # enough changed, not before
        third.close()
        fresh.close()
    finally:
        store.close()


def test_a_saved_view_holds_its_texts_digests_and_a_file_without_them_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start compares the saved view's digests with the saved terms' instead of hashing
    every text; a version-2 file (no digests) is read as before, the texts hashed."""
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    place = FileViewPlace(tmp_path)
    try:
        first = _load(store)
        first.close()
        expected = _content(first)
        state = store.collection_states([COLL])[COLL]
        got = view_snapshot.load(place, COLL, state, 8)
        assert got is not None and got.digests is not None
        assert got.digests.tolist() == text_digests(got.rows.record_texts()).tolist()
        hashed: list[int] = []

        def counted(texts: Any) -> Any:
            hashed.append(len(texts))
            return text_digests(texts)

        monkeypatch.setattr(view_terms, "text_digests", counted)
        second = _load(store)
        assert second.restored == N + 1 and second.analyzed == 0  # terms from their file
        assert hashed == []  # the file's digests compared, no text hashed
        for view in (first, second):  # keyed as the index's slots (copied) or anew: by row
            assert view.by_id == {rid: i for i, rid in enumerate(view.ids)}
            assert view.by_id is not view.bm25._slot_of
        assert _content(second) == expected
        snap = view_snapshot.snapshot(COLL, state, second.rows, second.matrix)
        header = view_snapshot.header_of(snap)
        header["version"] = 2
        del header["digests"]
        assert place.write(COLL, header, view_snapshot.sections(snap)[:-1])
        old = view_snapshot.load(place, COLL, state, 8)
        assert old is not None and old.digests is None
        third = _load(store)
        assert third.restored == N + 1 and third.analyzed == 0
        assert hashed == [N + 1]
        assert _content(third) == expected
        second.close()
        third.close()
    finally:
        store.close()


def test_a_removal_other_dimensions_or_damage_drop_the_file(tmp_path: Path) -> None:
    _seed(tmp_path)
    path = view_files.path_of(tmp_path, COLL)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _load(store).close()
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0xFF  # a flipped bit in the matrix: the checksum fails
        path.write_bytes(bytes(raw))
        damaged = _load(store)
        damaged.close()
        assert path.exists()  # the view loaded from the store and saved anew
        assert _content(damaged) == _content(_load(store))
        path.write_bytes(path.read_bytes()[:-100])  # cut short
        short = _load(store)
        short.close()
        assert _content(short) == _content(_load(store))
        store.delete(COLL, "r00007")
        assert lexical_files.scrub_store(store) >= 1  # the forget's scrub removes it
        assert not path.exists()
    finally:
        store.close()
    # a file saved before a delete no scrub saw is not used either
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _load(store).close()
        assert path.exists()
        store.delete(COLL, "r00008")
        view = _load(store)
        assert "r00008" not in view.by_id and len(view.ids) == N - 1
    finally:
        store.close()


def test_a_file_of_other_dimensions_is_not_used(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _load(store).close()
    finally:
        store.close()
    state = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        st = state.collection_states([COLL])[COLL]
        assert view_snapshot.load(FileViewPlace(tmp_path), COLL, st, 16) is None
        assert not view_files.path_of(tmp_path, COLL).exists()
        # a header whose counts do not fit its file (damage the checksum has not seen yet)
        # is dropped before anything that size is allocated
        header = {"version": view_snapshot.VERSION, "cid": st.cid, "removals": st.removals}
        header |= {"max_seq": 1, "rows": 10**12, "dims": 8, "roles": 1, "sessions": 1}
        tiny = view_files.of_buffer(memoryview(b"x" * 64))
        assert view_files.write(tmp_path, COLL, {**header, "density": None}, [tiny])
        assert view_snapshot.load(FileViewPlace(tmp_path), COLL, st, 8) is None
        assert not view_files.path_of(tmp_path, COLL).exists()
    finally:
        state.close()


#: A child that saves a view of ``sys.argv[2]`` again and again where its store keeps
#: views (``sys.argv[1]``: a data directory, or a PostgreSQL URL: test_pg_saved_views.py).
CHILD = textwrap.dedent(
    """
    import sys
    from sidecar.assembly import view_snapshot
    from sidecar.assembly.cache import CollectionView
    from sidecar.store.backend import open_store

    where, coll, ann_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = open_store(where, embed_dims=8, fingerprint="fp")
    view = CollectionView(coll, ann_rows, snapshot_min_rows=10**9)  # no save of its own
    state = store.collection_states([coll])[coll]
    view.reload(store, state)
    snap = view_snapshot.snapshot(coll, state, view.rows, view.matrix)
    place = store.view_place()
    print("saving", flush=True)
    while True:  # saves until killed
        view_snapshot.save(place, snap)
    """
)


@pytest.mark.parametrize("ann_rows", [100_000, 1000], ids=["float32", "float16"])
def test_kill_9_during_saves_leaves_a_store_that_opens_and_answers_the_same(
    tmp_path: Path, ann_rows: int
) -> None:
    # a view past ann_rows keeps (and saves) a float16 matrix (test_half_matrix.py)
    _seed(tmp_path, 20_000)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        view = CollectionView(COLL, ann_rows, snapshot_min_rows=10**9)
        view.reload(store, store.collection_states([COLL])[COLL])
        expected = _content(view)
    finally:
        store.close()
    path = view_files.path_of(tmp_path, COLL)
    for delay in (0.0, 0.03, 0.07, 0.15, 0.3):
        kill_9_while_saving(CHILD, str(tmp_path), COLL, str(ann_rows), delay=delay)
        store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
        try:
            had = path.exists()
            view = CollectionView(COLL, ann_rows, snapshot_min_rows=MIN_ROWS)
            view.reload(store, store.collection_states([COLL])[COLL])
            assert view.restored == (20_001 if had else 0)
            assert _content(view) == expected
            view.close()
            assert path.exists()  # taken (had) or saved anew
            assert had or lexical_files.scrub_store(store) >= 0
            assert lexical_files.scrub_store(store) >= 0  # leftovers go
            assert not list(lexical_files.directory(tmp_path, lexical_files.VIEWS).glob("*.tmp"))
        finally:
            store.close()


def _speaker_seed(data_dir: Path, n: int = N) -> dict[str, np.ndarray]:
    """Turns of two speakers (labels in the texts, as the densities read them); returns
    the label vectors."""
    rng = np.random.default_rng(3)
    labels = {"Ana": rng.standard_normal(8), "Bo": rng.standard_normal(8)}
    store = open_store(data_dir, embed_dims=8, fingerprint="fp")
    try:
        puts = []
        for i in range(n):
            who = "Ana" if i % 3 else "Bo"
            vec = rng.standard_normal(8) + 0.8 * labels[who]
            text = f"{who}: note {i % 400} about tennis"  # copies: the same text again
            puts.append(Put(COLL, f"r{i:05d}", text, {**_meta(i), "role": "user"}, vec))
        store.put_many(puts)
    finally:
        store.close()
    return {k: v.astype(np.float32) for k, v in labels.items()}


def _densities(view: CollectionView, labels: dict[str, np.ndarray]) -> tuple[Density, object]:
    from sidecar.assembly.density import SAVED

    d = Density()
    d.sync(view, labels)
    q = np.ones(8, np.float32) / np.sqrt(8)
    mat = view.matrix
    assert mat is not None
    got = [getattr(d, name).tobytes() for name in SAVED], d.corrected(mat @ q, None, q).tobytes()
    return d, got


def test_a_start_takes_the_saved_density_when_its_labels_are_the_same(tmp_path: Path) -> None:
    labels = _speaker_seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        first = _load(store)
        first.close()  # the rows' save (no density yet)
        _, expected = _densities(first, labels)  # built: saved with the rows
        first.close()
        second = _load(store)
        saved = second.saved_density
        assert saved is not None and saved.n == N
        d, got = _densities(second, labels)
        assert got == expected  # the same arrays and scores as the build
        assert second.saved_density is None  # taken
        assert d.key == (second.stamp, ("Ana", "Bo"))
        # other label vectors: built again, as a start without the file would
        other = {"Ana": labels["Ana"], "Bo": labels["Bo"] + 1e-3}
        third = _load(store)
        _, built = _densities(third, other)
        view_files.remove(tmp_path, COLL)
        _, fresh = _densities(_load(store), other)
        assert built == fresh
        # rows put and rewritten since the save are brought in as a live view would
        store.put(COLL, "r00004", text="Ana: new", metadata=_meta(4), vector=np.ones(8))
        store.put(COLL, "zz-new", text="Bo: newer", metadata=_meta(9), vector=-np.ones(8))
        third.close()
        view_files.remove(tmp_path, COLL)
        live = _load(store)  # no file: loaded from the store, saved
        live.close()
        _densities(live, labels)
        live.close()  # saved again, with the density
        fifth = _load(store)
        assert fifth.saved_density is not None
        assert Density().adopt(fifth.saved_density, fifth.stamp, len(fifth.rows), labels)
        store.put(COLL, "r00005", text="Ana: changed", metadata=_meta(5), vector=np.ones(8))
        store.put(COLL, "zz-last", text="Bo: last", metadata=_meta(10), vector=-np.ones(8))
        sixth = _load(store)  # the file, then the two records replayed
        state = store.collection_states([COLL])[COLL]
        d_live, _ = _densities(fifth, labels)
        fifth.catch_up(store, state)  # the live view takes the same two records
        d_live.sync(fifth, labels)
        d6, _ = _densities(sixth, labels)
        assert sixth.ids == fifth.ids
        assert d6.values.tobytes() == d_live.values.tobytes()
        assert d6.top.tobytes() == d_live.top.tobytes()
    finally:
        store.close()


def _snapshot_now(store: StoreBackend) -> tuple[CollectionView, Snapshot]:
    """A view loaded now (saving nothing itself) and its rows as a save takes them."""
    view = CollectionView(COLL, snapshot_min_rows=10**9)
    state = store.collection_states([COLL])[COLL]
    view.reload(store, state)
    assert view.matrix is not None
    return view, view_snapshot.snapshot(COLL, state, view.rows, view.matrix)


def test_a_save_does_not_put_back_records_removed_while_it_was_written(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        view, snap = _snapshot_now(store)
        store.delete(COLL, "r00001")  # a forget between the snapshot and the write
        assert not view_snapshot.save(FileViewPlace(tmp_path), snap, store)
        assert not view_files.path_of(tmp_path, COLL).exists()
        assert not list(lexical_files.directory(tmp_path, lexical_files.VIEWS).glob("*.tmp"))
        fresh = store.collection_states([COLL])[COLL]
        view.reload(store, fresh)
        assert view.matrix is not None
        snap = view_snapshot.snapshot(COLL, fresh, view.rows, view.matrix)
        assert view_snapshot.save(FileViewPlace(tmp_path), snap, store)  # nothing removed: written
    finally:
        store.close()


def test_a_file_from_a_later_state_than_the_store_is_not_used(tmp_path: Path) -> None:
    """A store put back from an older copy (``libravdb restore``, a copied directory) has
    the same collection and no removal, but records the file holds are not in it: the
    view is read from the store, never from the file."""
    import shutil

    _seed(tmp_path)
    older = tmp_path / "older.sqlite3"
    shutil.copy2(tmp_path / "store.sqlite3", older)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        later = [
            Put(COLL, f"later{i}", f"written after the copy {i}", _meta(i), np.ones(8))
            for i in range(5)
        ]
        store.put_many(later)
        _load(store).close()  # saves the view with the later records
    finally:
        store.close()
    assert view_files.path_of(tmp_path, COLL).exists()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"store.sqlite3{suffix}").unlink(missing_ok=True)
    shutil.copy2(older, tmp_path / "store.sqlite3")
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        view = _load(store)
        try:
            assert not any(rid.startswith("later") for rid in view.ids)
            assert len(view.ids) == N + 1
        finally:
            view.close()
    finally:
        store.close()


def test_a_start_takes_saved_rows_whose_metadata_is_not_ascii(tmp_path: Path) -> None:
    """Regression: the metadata blob (byte offsets) was also split as characters, which
    fails on any non-ASCII metadata, so such a view's file was dropped at every start."""
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        rng = np.random.default_rng(3)
        store.put_many(
            [
                Put(
                    COLL,
                    f"r{i:05d}",
                    f"note {i}",
                    {**_meta(i), "place": "Zürich café 東京"},
                    rng.standard_normal(8),
                )
                for i in range(N)
            ]
        )
        first = _load(store)
        first.close()  # waits for the save
        second = _load(store)
        assert second.restored == N
        assert _content(second) == _content(first)
        assert second.records[5].metadata["place"] == "Zürich café 東京"
        second.close()
    finally:
        store.close()


def test_rows_appended_past_the_saved_capacity_grow_the_matrix(tmp_path: Path) -> None:
    """A start takes the file's rows (mapped, or read) with room for a quarter more; a
    catch-up that appends more than that moves them into a larger matrix, and the view
    serves what a load from the store serves."""
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _load(store).close()  # saves the file
        rng = np.random.default_rng(7)
        more = N // 4 + 100  # past the room the file's rows are given

        def later(i: int) -> dict[str, Any]:  # sessions of their own (positions unique)
            return {**_meta(i), "sessionId": f"later{i // 50}"}

        store.put_many(
            [
                Put(COLL, f"zz{i:05d}", f"later {i}", later(i), rng.standard_normal(8))
                for i in range(more)
            ]
        )
        store.put(COLL, "r00007", text="rewritten", metadata=_meta(7), vector=np.ones(8))
        grown = _load(store)
        assert grown.restored == N + 1
        matrix = grown.matrix
        assert matrix is not None and len(matrix) == N + 1 + more
        view_files.remove(tmp_path, COLL)
        fresh = _load(store)
        assert _content(grown) == _content(fresh)
        grown.close()
        fresh.close()
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class _NiceRecording(FileViewPlace):
    """Files as a store keeps them, and the CPU priority each write ran at."""

    nice: list[int] = field(default_factory=list)

    def write(self, *args: Any, **kwargs: Any) -> bool:
        self.nice.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return FileViewPlace.write(self, *args, **kwargs)


def test_a_background_save_runs_at_the_lowest_priority(tmp_path: Path) -> None:
    """Only a shutdown waits for a view's save: it takes the CPU the loads leave."""
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _, snap = _snapshot_now(store)
        place = _NiceRecording(tmp_path)
        view_snapshot.save_in_background(place, snap, store).join(60)
        assert place.nice == [BACKGROUND_NICE] and view_files.path_of(tmp_path, COLL).exists()
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) != BACKGROUND_NICE
    finally:
        store.close()
