"""A view's BM25 terms saved beside the store (sidecar/assembly/view_terms.py,
sidecar/store/lexical_files.py): a start takes them instead of analyzing every text,
answers the same, drops a file that does not hold, and a forget removes the file of the
collection it removed records from. SQLite only: a shared store keeps no such files."""

from __future__ import annotations

import os
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.assembly import view_terms
from sidecar.assembly.cache import CollectionView
from sidecar.priority import BACKGROUND_NICE
from sidecar.store import lexical_files
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.terms_place import FilePlace
from sidecar.store.types import Put
from tests.support import kill_9_while_saving

COLL = "turns:u1"
N = 1500  # past view_terms.SAVE_MIN_ANALYZED
WORDS = [
    "biscuit",
    "tennis",
    "ball",
    "puppy",
    "garden",
    "lighthouse",
    "violin",
    "paella",
    "shellfish",
    "marathon",
]
QUERIES = ["tennis puppy", "lighthouse violin garden", "shellfish paella", "marathon 17"]


def _text(i: int) -> str:
    rng = np.random.default_rng(i)
    words = [WORDS[j] for j in rng.integers(0, len(WORDS), 6)]
    return f"Note {i}: " + " ".join(words) + f" number {i % 97}"


def _seed(data_dir: Path, n: int = N) -> None:
    store = open_store(data_dir, embed_dims=8, fingerprint="fp")
    try:
        rng = np.random.default_rng(1)
        puts = [
            Put(COLL, f"r{i:05d}", _text(i), {"ts": i}, rng.standard_normal(8).astype(np.float32))
            for i in range(n)
        ]
        store.put_many(puts)
    finally:
        store.close()


def _load(store: object) -> CollectionView:
    view = CollectionView(COLL)
    states = store.collection_states([COLL])  # type: ignore[attr-defined]
    view.reload(store, states[COLL])  # type: ignore[arg-type]
    return view


def _answers(view: CollectionView) -> list[object]:
    out: list[object] = [view.bm25.search(q, 20) for q in QUERIES]
    out.append({rid: dict(view.bm25.doc_terms(rid)) for rid in view.ids})
    return out


def _saved(view: CollectionView) -> None:
    """Wait for the view's save of its terms."""
    view.close()


def test_a_start_takes_the_saved_terms_and_answers_the_same(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        first = _load(store)
        assert first.analyzed == N
        _saved(first)
        assert lexical_files.saved(tmp_path) == [COLL]
        second = _load(store)
        assert second.analyzed == 0  # every record's terms came from the file
        assert _answers(second) == _answers(first)
        # a changed text and a new record are analyzed; the rest still comes from the file
        store.put(
            COLL,
            "r00003",
            text="a brand new violin text",
            metadata={"ts": 3},
            vector=np.ones(8, np.float32),
        )
        store.put(
            COLL,
            "zz-new",
            text="the lighthouse keeper",
            metadata={"ts": 9},
            vector=np.ones(8, np.float32),
        )
        third = _load(store)
        assert third.analyzed == 2
        lexical_files.remove(tmp_path, COLL)
        fresh = _load(store)
        assert fresh.analyzed == N + 1
        assert _answers(third) == _answers(fresh)
    finally:
        store.close()


def test_a_damaged_or_foreign_file_is_dropped_and_everything_analyzed(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        first = _load(store)
        _saved(first)
        path = lexical_files.path_of(tmp_path, COLL)
        raw = bytearray(path.read_bytes())
        raw[-5] ^= 0xFF  # a flipped bit in the body: the checksum fails
        path.write_bytes(bytes(raw))
        second = _load(store)
        assert second.analyzed == N
        assert _answers(second) == _answers(first)
        _saved(second)  # saved anew
        assert path.exists()
        # a file made by another analyzer does not hold either
        header, body = view_terms.encode(
            view_terms.snapshot(
                COLL,
                store.collection_states([COLL])[COLL],
                second.bm25,
                second.ids,
                [second.rows.record_text(i) for i in range(len(second.rows))],
            )
            or pytest.fail("no snapshot")
        )
        lexical_files.write(tmp_path, COLL, {**header, "analyzer": "none:0"}, body)
        assert _load(store).analyzed == N
    finally:
        store.close()


def test_a_forget_removes_the_file_of_the_collection_it_removed_from(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _saved(_load(store))
        path = lexical_files.path_of(tmp_path, COLL)
        assert lexical_files.scrub_store(store) == 0  # nothing removed: the file stays
        assert path.exists()
        store.delete(COLL, "r00007")
        assert lexical_files.scrub_store(store) == 1
        assert not path.exists()
        # a file the scrub did not see (a delete no caller scrubs) is not used either
        view = _load(store)
        _saved(view)
        store.delete(COLL, "r00008")
        again = _load(store)
        assert again.analyzed == N - 2
        assert "r00008" not in again.bm25
    finally:
        store.close()


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from sidecar.assembly import view_terms
    from sidecar.assembly.cache import CollectionView
    from sidecar.store.backend import open_store

    data_dir, coll = sys.argv[1], sys.argv[2]
    store = open_store(data_dir, embed_dims=8, fingerprint="fp")
    view = CollectionView(coll)
    state = store.collection_states([coll])[coll]
    view.reload(store, state)
    view.close()
    texts = [view.rows.record_text(i) for i in range(len(view.rows))]
    snap = view_terms.snapshot(coll, state, view.bm25, view.ids, texts)
    print("saving", flush=True)
    while True:  # saves until killed
        view_terms.save(store.terms_place(), snap)
    """
)


def test_kill_9_during_saves_leaves_a_store_that_opens_and_answers_the_same(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, 4000)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        lexical_files.remove(tmp_path, COLL)
        expected = _answers(_load(store))  # analyzed, no file
    finally:
        store.close()
    for delay in (0.0, 0.03, 0.07, 0.15, 0.3):
        kill_9_while_saving(CHILD, str(tmp_path), COLL, delay=delay)
        store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
        try:
            view = _load(store)
            assert view.analyzed in (0, 4000)  # the whole file, or none of it
            assert _answers(view) == expected
            view.close()
            assert lexical_files.scrub_store(store) >= 0  # leftovers go
            assert not list(lexical_files.directory(tmp_path).glob("*.tmp"))
        finally:
            store.close()


def test_the_scrub_after_a_forget_removes_the_file(tmp_path: Path) -> None:
    # the path every forget and delete RPC takes before answering (AsyncStore)
    import asyncio

    from sidecar.store.aio import AsyncStore

    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _saved(_load(store))
        path = lexical_files.path_of(tmp_path, COLL)
        assert path.exists()
        aio = AsyncStore(store)
        asyncio.run(aio.scrub_after_forget())
        assert path.exists()  # nothing removed from the collection: the file holds
        store.delete(COLL, "r00042")
        asyncio.run(aio.scrub_after_forget())
        assert not path.exists()
    finally:
        store.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-10],  # cut short
        lambda raw: raw + b"more",  # bytes past the body
        lambda raw: raw[:40],  # within the header
        lambda raw: b"",  # empty
        lambda raw: b"LIBRAVDB-TERMS\n\xff\xff\xff\x7f{}",  # a header length past the end
    ],
)
def test_a_file_that_is_not_whole_is_refused_and_removed(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    body = bytes(range(256)) * 40
    lexical_files.write(tmp_path, COLL, {"version": 2}, [body[:1000], body[1000:]])
    got = lexical_files.read(tmp_path, COLL)
    assert got is not None and got[0]["version"] == 2 and bytes(got[1]) == body
    path = lexical_files.path_of(tmp_path, COLL)
    path.write_bytes(damage(path.read_bytes()))
    assert lexical_files.read(tmp_path, COLL) is None
    assert not path.exists()


def _unsaved_snapshot(
    store: StoreBackend, data_dir: Path
) -> tuple[CollectionView, list[str], view_terms.Snapshot]:
    """A view loaded now, its saved terms file removed, its texts, and its terms as a
    save takes them."""
    view = CollectionView(COLL)
    state = store.collection_states([COLL])[COLL]
    view.reload(store, state)
    view.close()
    lexical_files.remove(data_dir, COLL)
    texts = [view.rows.record_text(i) for i in range(len(view.rows))]
    snap = view_terms.snapshot(COLL, state, view.bm25, view.ids, texts)
    assert snap is not None
    return view, texts, snap


def test_a_save_taken_before_a_removal_writes_no_file(tmp_path: Path) -> None:
    """A view's background save that ends after a forget (and after the forget's scrub)
    must not put the forgotten record's words back on disk."""
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        view, texts, snap = _unsaved_snapshot(store, tmp_path)
        assert store.delete(COLL, "r00011")
        assert lexical_files.scrub_store(store) == 0  # the forget's scrub: nothing yet
        assert not view_terms.save(store.terms_place(), snap)
        assert lexical_files.saved(tmp_path) == []
        current = store.collection_states([COLL])[COLL]
        fresh = view_terms.snapshot(COLL, current, view.bm25, view.ids, texts)
        assert fresh is not None and view_terms.save(store.terms_place(), fresh)
        assert lexical_files.saved(tmp_path) == [COLL]
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class _NiceRecording(FilePlace):
    """Files as a store keeps them, and the CPU priority each write ran at."""

    nice: list[int] = field(default_factory=list)

    def write(self, *args: Any, **kwargs: Any) -> bool:
        self.nice.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return FilePlace.write(self, *args, **kwargs)


def test_a_background_save_runs_at_the_lowest_priority(tmp_path: Path) -> None:
    """Only a shutdown waits for a terms save: it takes the CPU the loads leave."""
    _seed(tmp_path)
    store = open_store(tmp_path, embed_dims=8, fingerprint="fp")
    try:
        _, _, snap = _unsaved_snapshot(store, tmp_path)
        place = _NiceRecording(tmp_path, store.collection_states)
        view_terms.save_in_background(place, snap).join(60)
        assert place.nice == [BACKGROUND_NICE] and lexical_files.saved(tmp_path) == [COLL]
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) != BACKGROUND_NICE
    finally:
        store.close()
