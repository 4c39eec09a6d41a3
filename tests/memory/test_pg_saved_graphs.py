"""A PostgreSQL store's saved view graphs (sidecar/store/pg/saved_graphs.py, graph_file.py):
the first daemon's graph is saved in the database and another daemon's start loads it
instead of building it, over the saved view that names the first daemon's layout as its
base; a removal deletes it in its own transaction, a damaged one is dropped and built
anew, a graph over more rows than the base holds is never taken, and a kill -9 during a
save leaves a database that opens and answers the same (a real PostgreSQL server)."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg

from sidecar.assembly import graph_file
from sidecar.assembly.cache import CollectionView
from sidecar.assembly.view_graph import GraphParams, new_index
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState, Put
from tests.memory.test_graph_file import CHILD, _origin, _queries, _ranks_exactly
from tests.support import kill_9_while_saving

COLL = "turns:u1"
N = 1500
ANN_ROWS = 1000  # the view is ranked by a graph, and saved, from this many rows
DIMS = 8


def _open(url: str) -> StoreBackend:
    return open_store(url, embed_dims=DIMS, fingerprint="fp")


def _seed(url: str, n: int = N) -> None:
    rng = np.random.default_rng(1)
    with _open(url) as store:
        store.put_many(
            [
                Put(COLL, f"r{i:05d}", f"note {i}", {"ts": i}, rng.standard_normal(DIMS))
                for i in range(n)
            ]
        )


def _load(store: StoreBackend) -> CollectionView:
    view = CollectionView(COLL, ANN_ROWS, GraphParams(), snapshot_min_rows=ANN_ROWS)
    view.reload(store, store.collection_states([COLL])[COLL])
    assert view.graph is not None and view.graph.wait(60)
    return view


def _rows(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()


def _graph_header(store: StoreBackend) -> dict[str, Any] | None:
    place = store.graph_place()
    assert place is not None
    got = place.read(COLL, lambda _m: True, lambda path: path.stat().st_size)
    return None if got is None else got[0]


def test_another_daemon_loads_the_graph_the_first_one_saved(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as first:
        built = _load(first)
        assert _origin(built) == "built"
        built.close()  # waits for the view's save
        saved = _graph_header(first)
        assert saved is not None and saved["layout"] == built.layout
        kinds = _rows(pg_url, "SELECT DISTINCT kind FROM libravdb.saved_parts WHERE part = 0")
        assert {2, 3} <= {int(k) for (k,) in kinds}  # its view and its graph
    with _open(pg_url) as other:
        taker = _load(other)
        # the saved view names the first daemon's rows as its base, under a token of its own
        assert taker.restored == N and taker.layout != built.layout
        assert taker.layout_bases == ((built.layout, N),)
        assert _origin(taker) == "loaded"
        _ranks_exactly(taker, _queries(taker, [0, 3, 777]))
        taker.close()
        # put and patched since: inserted again over the loaded graph
        old = np.asarray(taker.matrix)[3].astype(np.float32).copy()
        other.put(COLL, "r00003", text="moved", metadata={"ts": 3}, vector=-old)
        other.put(COLL, "zz-new", text="new", metadata={"ts": 9}, vector=np.ones(DIMS))
    with _open(pg_url) as third:
        later = _load(third)
        assert _origin(later) == "loaded" and later.ids[-1] == "zz-new"
        _ranks_exactly(later, [old, -old, np.ones(DIMS, np.float32)])
        # enough written since for this daemon to save the view again: under a third
        # token, whose bases name the second's and the first daemon's
        rng = np.random.default_rng(5)
        more = [Put(COLL, f"more{i}", "x", {"ts": i}, rng.random(DIMS)) for i in range(1100)]
        third.put_many(more)
        later.catch_up(third, third.collection_states([COLL])[COLL])
        later.close()
    with _open(pg_url) as fourth:
        last = _load(fourth)
        assert [b[0] for b in last.layout_bases] == [later.layout, built.layout]
        graph = last.graph
        assert _origin(last) == "loaded" and graph is not None  # the first daemon's graph
        assert graph.built_rows == len(more) + 2  # the rows after the first's, and r00003
        _ranks_exactly(last, _queries(last, [0, 50, len(last.ids) - 1]))
        header = _graph_header(fourth)  # a tenth of its rows redone: saved again, its own
        assert header is not None and header["layout"] == last.layout
        last.close()


def test_a_removal_deletes_the_graph_and_a_damaged_one_is_built_anew(pg_url: str) -> None:
    _seed(pg_url)
    with _open(pg_url) as store:
        _load(store).close()
        assert _graph_header(store) is not None
        with psycopg.connect(pg_url) as conn:  # a flipped byte in the middle of usearch's
            conn.execute(
                "UPDATE libravdb.saved_parts SET body = overlay(body placing '\\xff00ff'::bytea "
                "from length(body) / 2) WHERE kind = 3"
            )
        damaged = _load(store)
        assert _origin(damaged) == "built"  # dropped, built and saved anew
        _ranks_exactly(damaged, _queries(damaged, [1, 2]))
        damaged.close()
        assert _graph_header(store) is not None
        store.delete(COLL, "r00007")  # the removal's transaction deletes it
        assert _rows(pg_url, "SELECT part FROM libravdb.saved_parts WHERE kind = 3") == []
        after = _load(store)
        assert _origin(after) == "built" and "r00007" not in after.by_id
        after.close()


def test_a_graph_over_more_rows_than_the_base_holds_is_not_taken(pg_url: str) -> None:
    """Rows past those a daemon took are in its own order: a graph that labels more rows
    of a layout than a view's base shares with it would label another daemon's rows."""
    _seed(pg_url)
    with _open(pg_url) as store:
        place = store.graph_place()
        assert place is not None
        state = store.collection_states([COLL])[COLL]
        params = GraphParams()
        index = new_index(DIMS, params)
        index.add(np.arange(20, dtype=np.uint64), np.eye(20, DIMS, dtype=np.float32))
        stamp = graph_file.GraphStamp("base", state.cid, state.removals, state.max_seq, 20)
        assert graph_file.save(place, COLL, stamp, GraphParams(), index)
        at = CollectionState(cid=state.cid, removals=state.removals)
        assert graph_file.load(place, COLL, {"own": 1 << 62, "base": 19}, at, DIMS, params) is None
        assert not place.exists(COLL)  # one that does not hold is removed
        assert graph_file.save(place, COLL, stamp, GraphParams(), index)
        got = graph_file.load(place, COLL, {"own": 1 << 62, "base": 20}, at, DIMS, params)
        assert got is not None and got[1].layout == "base" and len(got[0]) == 20


def test_kill_9_during_graph_saves_leaves_a_database_that_opens_and_answers_the_same(
    pg_url: str,
) -> None:
    _seed(pg_url, 20_000)
    with _open(pg_url) as store:
        view = _load(store)
        view.close()
        queries = _queries(view, [5, 19_999])
        expected = [view.dense_top((q / np.linalg.norm(q)).astype(np.float32), 5) for q in queries]
    for delay in (0.0, 0.05, 0.2):
        with _open(pg_url) as store:
            header = _graph_header(store)  # the graph as the last start saved it
        assert header is not None
        kill_9_while_saving(CHILD, pg_url, COLL, header["layout"], delay=delay)
        with _open(pg_url) as store:
            had = _graph_header(store) is not None
            again = _load(store)
            assert _origin(again) == ("loaded" if had else "built")
            got = [again.dense_top((q / np.linalg.norm(q)).astype(np.float32), 5) for q in queries]
            assert got == expected
            again.close()
