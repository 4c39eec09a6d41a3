"""Behaviour kept by the hot-path optimizations: group commit without a savepoint for the
first job, the reader-writer lock, query normalization, validation fast paths, and the
materialization of many hits."""

from __future__ import annotations

import math
import threading
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.store import InvalidInput, Put, Store, VersionConflict
from sidecar.store import names as N
from sidecar.store.exact import RWLock
from sidecar.store.interface import StoreBackend
from sidecar.store.writer import Tx

# ---- writer: one transaction per group, the first job without a savepoint ------------------


def _hold_writer(store: StoreBackend) -> tuple[threading.Event, Future[Any]]:
    """Occupy the writer thread until the returned event is set (so that the jobs submitted
    meanwhile are run as one group, in submission order)."""
    running, release = threading.Event(), threading.Event()

    def block(tx: Tx) -> None:
        running.set()
        release.wait()

    fut = store._writer.submit(block)
    assert running.wait(30)
    return release, fut


@pytest.mark.sqlite_only("the SQLite writer thread's group commit and savepoints")
def test_group_first_job_fails_others_commit(data_dir: Path) -> None:
    with Store.open(data_dir, embed_dims=4) as store:
        store.put("user:u1", "v", vector=[1, 0, 0, 0])  # version 1
        release, blocker = _hold_writer(store)
        futs = [
            # first job of the group: writes a record, then fails -> nothing of it stays
            store.write_future(
                [
                    Put("user:u1", "a1", "", {}, [1, 0, 0, 0]),
                    Put("user:u1", "v", "", {}, [0, 1, 0, 0], 7),
                ]
            ),
            store.write_future([Put("user:u1", "b", "", {}, [0, 1, 0, 0])]),
            # a later job that fails the same way is rolled back to its savepoint
            store.write_future(
                [
                    Put("user:u1", "c1", "", {}, [1, 0, 0, 0]),
                    Put("user:u1", "v", "", {}, [0, 1, 0, 0], 9),
                ]
            ),
            store.write_future([Put("user:u1", "d", "", {}, [0, 0, 1, 0])]),
        ]
        release.set()
        blocker.result(30)
        with pytest.raises(VersionConflict):
            futs[0].result(30)
        assert futs[1].result(30)[0].created
        with pytest.raises(VersionConflict):
            futs[2].result(30)
        assert futs[3].result(30)[0].created
        assert not store._wconn.in_transaction
        assert sorted(r.id for r in store.list_records("user:u1")) == ["b", "d", "v"]
        assert [h.id for h in store.search("user:u1", [0, 0, 1, 0], 1)] == ["d"]
        store.put("user:u1", "e", vector=[0, 0, 0, 1])  # the writer still works
    with Store.open(data_dir, embed_dims=4) as store:  # committed, durably
        assert sorted(r.id for r in store.list_records("user:u1")) == ["b", "d", "e", "v"]
        assert store.get("user:u1", "v").version == 1  # type: ignore[union-attr]


@pytest.mark.sqlite_only("the SQLite writer thread's group commit and savepoints")
def test_group_where_every_job_fails(data_dir: Path) -> None:
    with Store.open(data_dir, embed_dims=4) as store:
        store.put("user:u1", "v", vector=[1, 0, 0, 0])
        release, blocker = _hold_writer(store)
        futs = [
            store.write_future(
                [
                    Put("user:u1", f"x{i}", "", {}, [1, 0, 0, 0]),
                    Put("user:u1", "v", "", {}, [1, 0, 0, 0], 5),
                ]
            )
            for i in range(3)
        ]
        release.set()
        blocker.result(30)
        for fut in futs:
            with pytest.raises(VersionConflict):
                fut.result(30)
        assert not store._wconn.in_transaction
        assert [r.id for r in store.list_records("user:u1")] == ["v"]
        assert store.put("user:u1", "after", vector=[1, 0, 0, 0]).created


def test_lone_failing_job_leaves_no_transaction(store: StoreBackend) -> None:
    with pytest.raises(VersionConflict):
        store.write(
            [
                Put("user:u1", "a", "", {}, [1, 0, 0, 0]),
                Put("user:u1", "a", "", {}, [1, 0, 0, 0], 5),
            ]
        )
    if isinstance(store, Store):
        assert not store._wconn.in_transaction
    assert store.get("user:u1", "a") is None
    assert store.put("user:u1", "a", vector=[1, 0, 0, 0]).version == 1


# ---- the reader-writer lock --------------------------------------------------------------


def test_rwlock_readers_share_writer_excludes() -> None:
    lock = RWLock()
    lock.acquire_read()
    lock.acquire_read()  # a second reader enters while the first holds it
    order: list[str] = []
    writer_in = threading.Event()

    def writer() -> None:
        with lock.write():
            order.append("writer")
            writer_in.set()

    t = threading.Thread(target=writer)
    t.start()
    assert not writer_in.wait(0.05)  # blocked by the readers
    lock.release_read()
    assert not writer_in.wait(0.05)  # one reader still inside
    order.append("readers done")
    lock.release_read()
    t.join(30)
    assert order == ["readers done", "writer"]


def test_rwlock_is_fifo_a_reader_waits_behind_a_queued_writer() -> None:
    lock = RWLock()
    lock.acquire_read()
    order: list[str] = []
    started = threading.Barrier(2)

    def writer() -> None:
        started.wait()
        with lock.write():
            order.append("writer")

    def reader() -> None:
        with lock.read():
            order.append("reader")

    tw = threading.Thread(target=writer)
    tw.start()
    started.wait()
    while lock._next < 2:  # wait until the writer holds its ticket (no timing involved)
        threading.Event().wait(0.001)
    tr = threading.Thread(target=reader)
    tr.start()
    while lock._next < 3:
        threading.Event().wait(0.001)
    assert order == []  # the late reader does not overtake the queued writer
    lock.release_read()
    tw.join(30)
    tr.join(30)
    assert order == ["writer", "reader"]


# ---- query vectors and validation ----------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 1e-9, 1e17, 1e30])
def test_query_normalization_any_magnitude(store: StoreBackend, scale: float) -> None:
    store.put("user:u1", "x", vector=[1, 0, 0, 0])
    store.put("user:u1", "xy", vector=[1, 1, 0, 0])
    q = np.array([scale, scale, 0, 0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # float32 overflow probing 1e30
        hits = store.search("user:u1", q, 2)
    assert [h.id for h in hits] == ["xy", "x"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)
    assert hits[1].score == pytest.approx(1 / math.sqrt(2), abs=1e-6)


def test_query_below_the_zero_threshold_scores_zero(store: StoreBackend) -> None:
    store.put("user:u1", "x", vector=[1, 0, 0, 0])
    tiny = np.array([1e-13, 0, 0, 0], dtype=np.float32)  # norm < 1e-12: a zero vector
    assert store.search("user:u1", tiny, 1)[0].score == 0.0


@pytest.mark.parametrize(
    "query",
    [
        [1, math.nan, 0, 0],
        [math.inf, 0, 0, 0],
        np.array([0, -np.inf, 0, 0], dtype=np.float32),
        [1, 0, 0],
        [[1, 0, 0, 0]],
        ["a", "b", "c", "d"],
    ],
)
def test_bad_query_vectors(store: StoreBackend, query: Any) -> None:
    store.put("user:u1", "x", vector=[1, 0, 0, 0])
    with pytest.raises(InvalidInput):
        store.search("user:u1", query, 1)


def test_zero_and_list_queries(store: StoreBackend) -> None:
    store.put("user:u1", "x", vector=[1, 0, 0, 0])
    assert store.search("user:u1", [0, 0, 0, 0], 1)[0].score == 0.0
    assert store.search("user:u1", [2.0, 0, 0, 0], 1)[0].score == pytest.approx(1.0)
    f64 = np.array([3.0, 0, 0, 0], dtype=np.float64)
    assert store.search("user:u1", f64, 1)[0].score == pytest.approx(1.0)
    strided = np.array([1, 9, 0, 9, 0, 9, 0, 9], dtype=np.float32)[::2]
    assert store.search("user:u1", strided, 1)[0].score == pytest.approx(1.0)


def test_vector_finiteness_check() -> None:
    huge = np.full(4, 3e38, dtype=np.float32)  # finite, but its sum overflows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert N.as_vector(huge, 4, "c") is huge
    for bad in ([1, math.nan, 0, 0], [1, math.inf, 0, 0], [-math.inf, 0, 0, 0]):
        with pytest.raises(InvalidInput, match="NaN or infinity"):
            N.as_vector(bad, 4, "c")
    with pytest.raises(InvalidInput, match="NaN or infinity"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        N.as_vector(np.array([3e38, 3e38, math.nan, 0], dtype=np.float32), 4, "c")
    v64 = N.as_vector(np.array([1, 2, 3, 4], dtype=np.float64), 4, "c")
    assert v64.dtype == np.float32


def test_metadata_validation_fast_path_keeps_rules() -> None:
    class Key(str):
        pass

    assert N.validate_metadata({Key("k"): 1}) == {"k": 1}
    with pytest.raises(InvalidInput, match="is not a string"):
        N.validate_metadata({"a": {1: "x"}})
    with pytest.raises(InvalidInput, match="not a finite number"):
        N.validate_metadata({"a": {"b": math.inf}})
    with pytest.raises(InvalidInput, match="not valid Unicode"):
        N.validate_metadata({"a\ud800": 1})
    with pytest.raises(InvalidInput, match="unsupported type"):
        N.validate_metadata({"a": {1, 2}})
    with pytest.raises(InvalidInput, match="not valid Unicode"):
        N.validate_metadata({"a": ["\udc00"]})

    def nested(depth: int, leaf: object) -> dict[str, Any]:
        value: Any = leaf
        for _ in range(depth):
            value = {"k": value}
        return dict(value)

    # the depth limit applies to scalars too, exactly at the boundary
    N.validate_metadata(nested(N.MAX_METADATA_DEPTH, 1))
    with pytest.raises(InvalidInput, match="nests deeper"):
        N.validate_metadata(nested(N.MAX_METADATA_DEPTH + 1, 1))
    with pytest.raises(InvalidInput, match="nests deeper"):
        N.validate_metadata(nested(N.MAX_METADATA_DEPTH + 1, None))


# ---- materialization -----------------------------------------------------------------------


def test_search_all_of_a_collection_larger_than_one_sql_chunk(store: StoreBackend) -> None:
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((1000, 4)).astype(np.float32)
    store.put_many([Put("user:u1", f"r{i:04d}", f"t{i}", {"i": i}, vecs[i]) for i in range(1000)])
    q = np.array([1, 0.5, 0, 0], dtype=np.float32)
    everything = store.search("user:u1", q, 0)
    assert len(everything) == 1000
    scores = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    want = sorted(range(1000), key=lambda i: (-float(scores[i]), f"r{i:04d}"))
    assert [h.id for h in everything][:50] == [f"r{i:04d}" for i in want[:50]]
    assert all(h.text == f"t{h.metadata['i']}" for h in everything)
    top = store.search("user:u1", q, 7)
    assert [h.id for h in top] == [h.id for h in everything[:7]]


# ---- applying committed writes to the index: the bulk append and its fallbacks ------------


@pytest.mark.sqlite_only("the hnswlib index's exact tail and bulk append")
def test_index_apply_bulk_and_mixed_batches(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    data = rng.standard_normal((1200, 8)).astype(np.float32)
    with Store.open(tmp_path / "d", embed_dims=8, exact_threshold=500, background=False) as s:
        # new records only: the bulk append
        s.put_many([Put("user:u1", f"r{i:05d}", "", {}, data[i]) for i in range(1000)])
        s.run_index_work()  # builds the graph over them
        (idx,) = s._indexes.values()
        assert idx.ann is not None and len(idx.ann_live) == 1000 and len(idx.exact) == 0
        # a batch mixing new records, records in the graph and a duplicate: per change
        far = np.zeros(8, dtype=np.float32)
        far[0] = 1.0
        s.put_many(
            [Put("user:u1", f"r{i:05d}", "", {}, data[i]) for i in range(1000, 1100)]
            + [Put("user:u1", "r00003", "", {}, far), Put("user:u1", "r01050", "", {}, -far)]
        )
        assert len(idx.ann_live) == 999 and len(idx.exact) == 101
        hit = s.search("user:u1", far, 1)[0]
        assert (hit.id, round(hit.score, 5)) == ("r00003", 1.0)
        assert s.search("user:u1", -far, 1)[0].id == "r01050"
        # new records again, while the graph exists: appended to the tail in one go
        s.put_many([Put("user:u1", f"r{i:05d}", "", {}, data[i]) for i in range(1100, 1200)])
        assert len(idx.exact) == 201
        q = data[1150]
        assert s.search("user:u1", q, 1)[0].id == "r01150"
        s.run_index_work()
        assert len(idx.exact) == 0 and len(idx.ann_live) == 1200
        assert s.search("user:u1", far, 1)[0].id == "r00003"
        assert s.search("user:u1", q, 1)[0].id == "r01150"
