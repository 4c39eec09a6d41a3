"""A PostgreSQL store's saved views (sidecar/store/pg/saved_views.py, saves.py): one daemon's view
saves its rows in the database, another daemon's start takes them and replays what was
written since, a removal deletes them in its own transaction, a save taken before a
removal is refused, damaged or incomplete parts are dropped, and a kill -9 during a save
leaves a database that opens and answers the same (a real PostgreSQL server)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import psycopg

from sidecar.assembly import view_snapshot
from sidecar.assembly.cache import CollectionView
from sidecar.store import view_files
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.pg.saved_views import PgViewPlace
from sidecar.store.types import Put
from tests.memory.test_view_snapshot import CHILD, _content, _meta
from tests.support import kill_9_while_saving

COLL = "turns:u1"
N = 1500  # past view_snapshot.SAVE_MIN_CHANGED
MIN_ROWS = 1000  # the views of these tests save from this many rows


def _open(url: str) -> StoreBackend:
    return open_store(url, embed_dims=8, fingerprint="fp")


def _seed(url: str, n: int = N) -> None:
    rng = np.random.default_rng(1)
    puts = [
        Put(COLL, f"r{i:05d}", f"Note {i}: tennis é {i % 97}", _meta(i), rng.standard_normal(8))
        for i in range(n)
    ]
    puts.append(Put(COLL, "zero", "", {"text": "from metadata"}, np.zeros(8)))
    with _open(url) as store:
        store.put_many(puts)


def _load(store: StoreBackend, min_rows: int = MIN_ROWS, ann_rows: int = 100_000) -> CollectionView:
    view = CollectionView(COLL, ann_rows, snapshot_min_rows=min_rows)
    view.reload(store, store.collection_states([COLL])[COLL])
    view.close()  # waits for its saves
    return view


def _parts(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT part FROM libravdb.saved_parts WHERE kind = 2 ORDER BY cid, part"
        ).fetchall()
    return [int(r[0]) for r in rows]


def _sql(url: str, sql: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(sql)


def _place(store: StoreBackend) -> PgViewPlace:
    place = store.view_place()
    assert isinstance(place, PgViewPlace)
    return place


def _unsaved(store: StoreBackend) -> tuple[CollectionView, view_snapshot.Snapshot]:
    """A view read from the rows (saving nothing itself) and its snapshot now."""
    view = _load(store, min_rows=10**9)
    state = store.collection_states([COLL])[COLL]
    assert view.matrix is not None
    return view, view_snapshot.snapshot(COLL, state, view.rows, view.matrix)


def test_a_daemon_takes_the_view_another_saved_and_replays_what_came_since(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as first:
        saver = _load(first)  # read from the rows, then saved
        assert saver.restored == 0 and _parts(pg_url) == [0]
        expected = _content(saver)
    with _open(pg_url) as other:  # another daemon
        taker = _load(other)
        assert taker.restored == N + 1
        assert _content(taker) == expected
        rng = np.random.default_rng(5)
        later_meta = [
            {"ts": 9_000 + i, "seq": i, "sessionId": "later", "role": "user"} for i in range(7)
        ]
        other.put_many(
            [
                Put(COLL, f"n{i}", f"later {i}", later_meta[i], rng.standard_normal(8))
                for i in range(7)
            ]
        )
        other.put_many([Put(COLL, "r00003", "rewritten tennis", _meta(3), rng.standard_normal(8))])
    with _open(pg_url) as third:
        later = _load(third)  # the saved view, 8 records replayed (too few to save again)
        fresh = CollectionView(COLL, snapshot_min_rows=10**9)
        _place(third).remove(COLL)
        fresh.reload(third, third.collection_states([COLL])[COLL])
        assert later.restored == N + 1 and len(later.ids) == N + 8
        assert fresh.restored == 0
        assert sorted(_content(later).items()) == sorted(_content(fresh).items())


def test_a_view_in_many_parts_reads_back_whole_and_a_missing_part_drops_it(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        view, snap = _unsaved(store)
        state = snap.state
        assert view.matrix is not None
        place = PgViewPlace(store, part_bytes=4096)  # type: ignore[arg-type]
        assert view_snapshot.save(place, snap)
        parts = _parts(pg_url)
        assert len(parts) > 10 and parts == list(range(len(parts)))
        got = view_snapshot.load(place, COLL, state, 8)
        assert got is not None and got.rows.ids == view.ids
        assert got.matrix[: len(view.ids)].tobytes() == view.matrix[: len(view.ids)].tobytes()
        _sql(pg_url, "DELETE FROM libravdb.saved_parts WHERE kind = 2 AND part = 3")
        assert view_snapshot.load(place, COLL, state, 8) is None
        assert _parts(pg_url) == []  # dropped


def test_a_damaged_view_is_dropped_and_the_view_loads_from_the_rows(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        expected = _content(_load(store))
        assert _parts(pg_url) == [0]
        _sql(
            pg_url,
            "UPDATE libravdb.saved_parts SET body = overlay(body placing '\\xff00ff'::bytea "
            "from length(body) - 400) WHERE kind = 2",
        )
        again = _load(store)  # dropped, read from the rows, saved anew
        assert again.restored == 0 and _content(again) == expected
        assert _parts(pg_url) == [0]
        assert _load(store).restored == N + 1


def test_a_removal_deletes_the_saved_view_in_its_own_transaction(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        _load(store)
        assert _parts(pg_url) == [0]
        assert store.delete(COLL, "r00010")
        assert _parts(pg_url) == []
        view = _load(store, min_rows=10**9)
        assert view.restored == 0 and "r00010" not in view.ids


def test_a_save_taken_before_a_removal_is_refused(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        _, snap = _unsaved(store)
        assert store.delete(COLL, "r00010")
        assert not view_snapshot.save(_place(store), snap)
        assert _parts(pg_url) == []
        assert view_snapshot.save(_place(store), _unsaved(store)[1])
        assert _parts(pg_url) == [0]


def test_dropping_the_collection_drops_its_saved_view(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        _load(store)
        assert _parts(pg_url) == [0]
        assert store.drop_collections([COLL]) == 1
        assert _parts(pg_url) == []


def test_kill_9_during_saves_leaves_a_database_that_opens_and_answers_the_same(
    pg_url: str,
) -> None:
    _seed(pg_url, 5_000)
    ann_rows = 100_000  # (a float16 view's candidates read their metadata: slower here)
    with _open(pg_url) as store:
        expected = _content(_load(store, min_rows=10**9, ann_rows=ann_rows))
    for delay in (0.0, 0.05, 0.15, 0.4):
        kill_9_while_saving(CHILD, pg_url, COLL, str(ann_rows), delay=delay)
        with _open(pg_url) as store:
            had = _parts(pg_url) != []
            view = _load(store, min_rows=MIN_ROWS, ann_rows=ann_rows)
            assert view.restored == (5_001 if had else 0)
            assert _content(view) == expected
            assert _parts(pg_url) != []  # taken (had) or saved anew


def test_a_header_length_past_the_blob_allocates_no_more_than_the_blob(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        _load(store)
        assert _parts(pg_url) == [0]
        with psycopg.connect(pg_url) as conn:  # the length after the magic: 2 GiB - 1
            row = conn.execute("SELECT length(body) FROM libravdb.saved_parts").fetchone()
            conn.execute(
                "UPDATE libravdb.saved_parts SET body = overlay(body placing "
                "'\\xffffff7f'::bytea from %s for 4)",
                (len(view_files.KIND.magic) + 1,),
            )
        assert row is not None
        state = store.collection_states([COLL])[COLL]
        tracemalloc.start()
        try:
            assert view_snapshot.load(_place(store), COLL, state, 8, MIN_ROWS) is None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 * int(row[0]) + (16 << 20)  # the blob's size, not 2 GiB
        assert _parts(pg_url) == []  # dropped
