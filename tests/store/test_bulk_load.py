"""``bulk_load()``: a block of many writes whose ANN index work may wait for its end.

On both backends the writes inside keep every semantic (versions, upserts, compare-and-swap,
counts, collection versions, exact search) and the indexes are there once the block has
exited. PostgreSQL's deferral itself (no daemon builds a deferred index during the load,
the block's exit builds it) is checked on two stores sharing one database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sidecar.store import Put, VersionConflict
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.pg.bulk import MAX_BUILD_MEMORY_MB, MIN_BUILD_MEMORY_MB, build_memory_mb
from sidecar.store.pg.store import PgStore

from .conftest import Location, clustered, exact_topk

DIMS = 8
THRESHOLD = 200


def _open(location: Location, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "embed_dims": DIMS,
        "fingerprint": "fp",
        "exact_threshold": THRESHOLD,
    }
    args.update(kw)
    return open_store(location, **args)


def _puts(coll: str, data: np.ndarray[Any, Any], lo: int, hi: int) -> list[Put]:
    return [Put(coll, f"r{i:05d}", f"text {i}", {"i": i}, data[i]) for i in range(lo, hi)]


def _mode(store: StoreBackend, coll: str) -> str:
    return next(s.mode for s in store.index_status() if s.collection == coll)


def test_bulk_load_keeps_write_semantics_and_ends_indexed(
    new_location: Callable[[], Location],
) -> None:
    data, queries = clustered(600, DIMS, clusters=20, noise=0.5, seed=3, queries=5)
    with _open(new_location()) as store:
        seen: list[int] = []
        with store.bulk_load(), store.bulk_load():  # blocks nest
            for lo in range(0, 600, 150):
                res = store.put_many(
                    [
                        *_puts("turns:b", data, lo, lo + 150),
                        Put(f"session_raw:s{lo}", "a", "", {}, data[lo]),
                    ]
                )
                assert all(r.created and r.version == 1 for r in res)
                seen.append(store.collection_versions(["turns:b"])["turns:b"])
            assert len(set(seen)) == len(seen), "every write moves the collection version"
            # upserts and compare-and-swap as outside a bulk load
            again = store.put_many(_puts("turns:b", data, 0, 2))
            assert [(r.version, r.created) for r in again] == [(2, False), (2, False)]
            with pytest.raises(VersionConflict):
                store.put("turns:b", "r00003", vector=data[3], if_version=0)
            assert store.count("turns:b") == 600
            assert store.count_prefix("session_raw:") == 4
            # searches stay exact-correct whatever the index state
            for q in queries:
                want = [f"r{i:05d}" for i in exact_topk(data, q, 5)]
                assert [h.id for h in store.search("turns:b", q, 5)] == want
        assert store.wait_indexed(timeout=60)
        assert _mode(store, "turns:b") == "hnsw"
        assert store.count("turns:b") == 600
        rec = store.get("turns:b", "r00000")
        assert rec is not None and rec.version == 2
        for q in queries:
            want = [f"r{i:05d}" for i in exact_topk(data, q, 5)]
            got = [h.id for h in store.search("turns:b", q, 5)]
            assert got[0] == want[0] and len(set(got) & set(want)) >= 4


def test_a_failed_bulk_load_keeps_its_writes_and_indexes_later(
    new_location: Callable[[], Location],
) -> None:
    data, _ = clustered(300, DIMS, seed=4)
    with _open(new_location()) as store:
        with pytest.raises(RuntimeError, match="stop"), store.bulk_load():
            store.put_many(_puts("user:b", data, 0, 300))
            raise RuntimeError("stop")
        assert store.count("user:b") == 300
        assert store.wait_indexed(timeout=60)
        assert _mode(store, "user:b") == "hnsw"


# ---- PostgreSQL: the deferral across daemons -------------------------------------------------


def test_pg_bulk_load_defers_every_daemons_build_to_its_exit(pg_url: str) -> None:
    data, queries = clustered(500, DIMS, clusters=10, seed=5, queries=3)
    with _open(pg_url) as a, _open(pg_url) as b:
        assert isinstance(a, PgStore) and isinstance(b, PgStore)
        with a.bulk_load():
            for lo in range(0, 500, 50):
                a.put_many(_puts("turns:b", data, lo, lo + 50))
            # due, but held: neither this daemon's indexer nor another's builds it
            assert a.run_index_work() == 0 and b.run_index_work() == 0
            status = next(s for s in b.index_status() if s.collection == "turns:b")
            assert (status.mode, status.pending) == ("exact", 500)
            assert [h.id for h in b.search("turns:b", queries[0], 3)] == [
                f"r{i:05d}" for i in exact_topk(data, queries[0], 3)
            ]
        # the exit built it: no waiting, and the other daemon sees it valid
        assert _mode(a, "turns:b") == "hnsw" and _mode(b, "turns:b") == "hnsw"
        held = a.db.read(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
            (0x6C76_0003,),
        )
        assert held[0][0] == 0, "the index locks are released"


def test_pg_bulk_load_leaves_small_collections_and_indexed_ones_alone(pg_url: str) -> None:
    data, _ = clustered(400, DIMS, seed=6)
    with _open(pg_url) as store:
        assert isinstance(store, PgStore)
        store.put_many(_puts("user:b", data, 0, 300))
        assert store.wait_indexed(timeout=60) and _mode(store, "user:b") == "hnsw"
        with store.bulk_load():
            store.put_many(_puts("user:b", data, 300, 400))  # indexed already: maintained
            for s in range(30):  # small: never locked
                store.put_many([Put(f"session_raw:s{s}", "a", "", {}, data[s])])
            assert store._bulk.held == set()
        assert _mode(store, "user:b") == "hnsw" and store.count("user:b") == 400


def test_pg_bulk_build_memory_fits_the_graph() -> None:
    assert build_memory_mb(1000, 384, 16) == MIN_BUILD_MEMORY_MB
    assert 1500 <= build_memory_mb(1_000_000, 384, 16) <= 2000
    assert build_memory_mb(10**8, 384, 16) == MAX_BUILD_MEMORY_MB
