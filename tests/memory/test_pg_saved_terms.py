"""A PostgreSQL store's saved BM25 terms (sidecar/store/pg/saved_terms.py): one daemon's
view analyzes and saves them in the database, another daemon's view takes them, and no
removal leaves a saved record's words behind its commit (a real PostgreSQL server)."""

from __future__ import annotations

import threading
import time

import numpy as np
import psycopg

from sidecar.assembly import view_terms
from sidecar.assembly.cache import CollectionView
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.pg.saved_terms import PgTermsPlace
from sidecar.store.terms_place import TermsPlace
from sidecar.store.types import Put

COLL = "turns:u1"
N = 1500  # past view_terms.SAVE_MIN_ANALYZED
WORDS = ["biscuit", "tennis", "puppy", "garden", "lighthouse", "violin", "paella", "marathon"]
QUERIES = ["tennis puppy", "lighthouse violin garden", "paella", "marathon 17"]


def _open(url: str) -> StoreBackend:
    return open_store(url, embed_dims=8, fingerprint="fp")


def _seed(url: str, n: int = N) -> None:
    rng = np.random.default_rng(1)
    puts = []
    for i in range(n):
        words = " ".join(WORDS[j] for j in np.random.default_rng(i).integers(0, len(WORDS), 6))
        text = f"Note {i}: {words} number {i % 97}"
        puts.append(Put(COLL, f"r{i:05d}", text, {"ts": i}, rng.standard_normal(8)))
    with _open(url) as store:
        store.put_many(puts)


def _load(store: StoreBackend) -> CollectionView:
    view = CollectionView(COLL)
    view.reload(store, store.collection_states([COLL])[COLL])
    view.close()  # waits for its save of the terms
    return view


def _answers(view: CollectionView) -> list[object]:
    out: list[object] = [view.bm25.search(q, 20) for q in QUERIES]
    out.append({rid: dict(view.bm25.doc_terms(rid)) for rid in view.ids})
    return out


def _saved_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM libravdb.saved_parts WHERE kind = 1 AND part = 0"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _place(store: StoreBackend) -> TermsPlace:
    place = store.terms_place()
    assert place is not None
    return place


def _snapshot(store: StoreBackend) -> view_terms.Snapshot:
    """A view's terms as a save would write them, taken at the collection's state now,
    with nothing saved in the database."""
    view = CollectionView(COLL)
    state = store.collection_states([COLL])[COLL]
    view.reload(store, state)
    view.close()
    _place(store).remove(COLL)
    texts = [view.rows.record_text(i) for i in range(len(view.rows))]
    snap = view_terms.snapshot(COLL, state, view.bm25, view.ids, texts)
    assert snap is not None
    return snap


def test_a_second_daemon_takes_the_terms_the_first_saved(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as one, _open(pg_url) as two:  # two daemons on one database
        first = _load(one)
        assert first.analyzed == N
        assert _saved_rows(pg_url) == 1
        second = _load(two)
        assert second.analyzed == 0  # every record's terms came from the database
        assert _answers(second) == _answers(first)
        # a changed text and a new record are analyzed; the rest still comes from the row
        two.put(COLL, "r00003", text="a brand new violin text", vector=np.ones(8))
        two.put(COLL, "zz-new", text="the lighthouse keeper", vector=np.ones(8))
        third = _load(one)
        assert third.analyzed == 2
        _place(one).remove(COLL)
        fresh = _load(two)
        assert fresh.analyzed == N + 1
        assert _answers(third) == _answers(fresh)


def test_a_removal_deletes_the_saved_terms_in_its_transaction(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as one, _open(pg_url) as two:
        _load(one)
        assert _saved_rows(pg_url) == 1
        assert two.delete(COLL, "r00007")  # another daemon's forget
        assert _saved_rows(pg_url) == 0  # gone with the commit, not at some later load
        again = _load(one)
        assert again.analyzed == N - 1
        assert "r00007" not in again.ids
        assert _saved_rows(pg_url) == 1  # saved anew, without it
        assert one.drop_collections([COLL]) == 1
        assert _saved_rows(pg_url) == 0


def test_a_save_taken_before_a_removal_is_refused(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        snap = _snapshot(store)
        assert store.delete(COLL, "r00011")
        assert not view_terms.save(_place(store), snap)  # it holds r00011's words
        assert _saved_rows(pg_url) == 0
        assert view_terms.save(_place(store), _snapshot(store))  # taken after it
        assert _saved_rows(pg_url) == 1


def test_a_save_that_meets_an_uncommitted_removal_waits_and_is_refused(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        snap = _snapshot(store)
        results: list[bool] = []
        with psycopg.connect(pg_url) as conn:  # a removal, as the store's writes make it
            conn.execute(
                "DELETE FROM libravdb.records WHERE id = 'r00005' AND cid = %s", (snap.state.cid,)
            )
            conn.execute("SELECT libravdb.finish_collection(%s, -1, 1, 0)", (snap.state.cid,))
            saver = threading.Thread(
                target=lambda: results.append(view_terms.save(_place(store), snap))
            )
            saver.start()
            time.sleep(0.5)
            assert saver.is_alive()  # held by the removal's lock on the collection row
            conn.commit()
        saver.join(30)
        assert results == [False]
        assert _saved_rows(pg_url) == 0


def test_a_damaged_row_is_dropped_and_every_text_analyzed(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        first = _load(store)
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE libravdb.saved_parts SET body = body || '\\x00'::bytea")
        second = _load(store)
        assert second.analyzed == N
        assert _answers(second) == _answers(first)
        assert _saved_rows(pg_url) == 1  # saved anew
        assert _load(store).analyzed == 0


def test_two_daemons_saving_one_collection_at_once_leave_one_whole_row(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as one, _open(pg_url) as two:
        snap = _snapshot(one)
        results: list[bool] = []
        savers = [
            threading.Thread(target=lambda s=s: results.append(view_terms.save(s, snap)))
            for s in (_place(one), _place(two)) * 2
        ]
        for t in savers:
            t.start()
        for t in savers:
            t.join(60)
        assert results == [True] * 4
        assert _saved_rows(pg_url) == 1
        assert _load(two).analyzed == 0  # whole: it checks and every record's terms hold


def test_terms_in_many_parts_read_back_whole_and_a_missing_part_drops_them(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        snap = _snapshot(store)
        place = PgTermsPlace(store, part_bytes=1000)  # type: ignore[arg-type]
        assert view_terms.save(place, snap)
        with psycopg.connect(pg_url) as conn:
            parts = [r[0] for r in conn.execute("SELECT part FROM libravdb.saved_parts")]
        assert sorted(parts) == list(range(len(parts))) and len(parts) > 10
        whole = _load(store)
        assert whole.analyzed == 0  # every record's terms from the parts
        with psycopg.connect(pg_url) as conn:
            conn.execute("DELETE FROM libravdb.saved_parts WHERE part = 2")
        assert place.read(COLL) is None
        assert _saved_rows(pg_url) == 0  # dropped
        assert _answers(_load(store)) == _answers(whole)
