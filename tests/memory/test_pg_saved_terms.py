"""A PostgreSQL store's saved BM25 terms (sidecar/store/pg/saved_terms.py): one daemon's
view analyzes and saves them in the database, another daemon's view takes them, and no
removal leaves a saved record's words behind its commit (a real PostgreSQL server)."""

from __future__ import annotations

import threading
import time

import numpy as np
import psycopg
import pytest

from sidecar.assembly import view_terms
from sidecar.assembly.cache import CollectionView
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Put
from tests.pg_server import PgTestServer

COLL = "turns:u1"
N = 1500  # past view_terms.SAVE_MIN_ANALYZED
WORDS = ["biscuit", "tennis", "puppy", "garden", "lighthouse", "violin", "paella", "marathon"]
QUERIES = ["tennis puppy", "lighthouse violin garden", "paella", "marathon 17"]


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    if request.config.getoption("--backend") == "sqlite":
        pytest.skip("PostgreSQL tests deselected (--backend sqlite)")
    server: PgTestServer = request.getfixturevalue("pg_server")
    return server.new_database(migrated=True)


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
        row = conn.execute("SELECT count(*) FROM libravdb.saved_terms").fetchone()
    assert row is not None
    return int(row[0])


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
        one.terms_place().remove(COLL)
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
        view = CollectionView(COLL)
        state = store.collection_states([COLL])[COLL]
        view.reload(store, state)
        view.close()
        store.terms_place().remove(COLL)
        texts = [view.rows.record_text(i) for i in range(len(view.rows))]
        snap = view_terms.snapshot(COLL, state, view.bm25, view.ids, texts)
        assert snap is not None
        assert store.delete(COLL, "r00011")
        assert not view_terms.save(store.terms_place(), snap)  # it holds r00011's words
        assert _saved_rows(pg_url) == 0
        current = store.collection_states([COLL])[COLL]
        fresh = view_terms.snapshot(COLL, current, view.bm25, view.ids, texts)
        assert fresh is not None and view_terms.save(store.terms_place(), fresh)
        assert _saved_rows(pg_url) == 1


def test_a_save_that_meets_an_uncommitted_removal_waits_and_is_refused(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        view = CollectionView(COLL)
        state = store.collection_states([COLL])[COLL]
        view.reload(store, state)
        view.close()
        store.terms_place().remove(COLL)
        texts = [view.rows.record_text(i) for i in range(len(view.rows))]
        snap = view_terms.snapshot(COLL, state, view.bm25, view.ids, texts)
        assert snap is not None
        results: list[bool] = []
        with psycopg.connect(pg_url) as conn:  # a removal, as the store's writes make it
            conn.execute(
                "DELETE FROM libravdb.records WHERE id = 'r00005' AND cid = %s", (state.cid,)
            )
            conn.execute("SELECT libravdb.finish_collection(%s, -1, 1, 0)", (state.cid,))
            saver = threading.Thread(
                target=lambda: results.append(view_terms.save(store.terms_place(), snap))
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
            conn.execute("UPDATE libravdb.saved_terms SET body = body || '\\x00'::bytea")
        second = _load(store)
        assert second.analyzed == N
        assert _answers(second) == _answers(first)
        assert _saved_rows(pg_url) == 1  # saved anew
        assert _load(store).analyzed == 0


def test_two_daemons_saving_one_collection_at_once_leave_one_whole_row(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as one, _open(pg_url) as two:
        view = CollectionView(COLL)
        state = one.collection_states([COLL])[COLL]
        view.reload(one, state)
        view.close()
        texts = [view.rows.record_text(i) for i in range(len(view.rows))]
        snap = view_terms.snapshot(COLL, state, view.bm25, view.ids, texts)
        assert snap is not None
        results: list[bool] = []
        savers = [
            threading.Thread(target=lambda s=s: results.append(view_terms.save(s, snap)))
            for s in (one.terms_place(), two.terms_place()) * 2
        ]
        for t in savers:
            t.start()
        for t in savers:
            t.join(60)
        assert results == [True] * 4
        assert _saved_rows(pg_url) == 1
        assert _load(two).analyzed == 0  # whole: it checks and every record's terms hold
