"""Records, upsert/CAS, deletes, lists, filters, search semantics, namespaces."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from sidecar.store import (
    Delete,
    DropCollection,
    InvalidInput,
    NotFound,
    Patch,
    Put,
    TimeRange,
    VersionConflict,
)
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend as Store

from .conftest import Location


def test_reference_alpha_beta(store: Store) -> None:
    # Port of the reference store test: insert alpha [1,0,0] and beta [0,1,0] ...
    store.put("user:u1", "alpha", text="alpha", vector=[1, 0, 0, 0])
    store.put("user:u1", "beta", text="beta", vector=[0, 1, 0, 0])
    hits = store.search("user:u1", [0.9, 0.1, 0, 0], 5)
    assert [h.id for h in hits] == ["alpha", "beta"]
    assert hits[0].collection == "user:u1" and hits[0].text == "alpha"
    assert store.delete("user:u1", "alpha")
    assert [h.id for h in store.search("user:u1", [0.9, 0.1, 0, 0], 5)] == ["beta"]
    # exclude list
    store.put("user:u1", "gamma", text="gamma", vector=[1, 1, 0, 0])
    hits = store.search("user:u1", [1, 1, 0, 0], 5, exclude_ids=["gamma"])
    assert [h.id for h in hits] == ["beta"]


def test_upsert_bumps_version_and_keeps_created(store: Store) -> None:
    r1 = store.put("user:u1", "a", text="one", metadata={"x": 1}, vector=[1, 0, 0, 0])
    assert (r1.version, r1.created) == (1, True)
    first = store.get("user:u1", "a")
    assert first is not None
    r2 = store.put("user:u1", "a", text="two", metadata={"y": 2}, vector=[0, 1, 0, 0])
    assert (r2.version, r2.created) == (2, False)
    rec = store.get("user:u1", "a", include_vector=True)
    assert rec is not None
    assert rec.text == "two" and rec.metadata == {"y": 2} and rec.version == 2
    assert rec.created_ms == first.created_ms
    assert rec.vector is not None and rec.vector.tolist() == [0, 1, 0, 0]
    assert store.count("user:u1") == 1
    # repeating is never an error
    for _ in range(3):
        store.put("user:u1", "a", text="two", vector=[0, 1, 0, 0])
    assert store.get("user:u1", "a").version == 5  # type: ignore[union-attr]
    assert [h.id for h in store.search("user:u1", [0, 1, 0, 0], 5)] == ["a"]


def test_compare_and_swap(store: Store) -> None:
    store.put("session_state:s1", "__session_state__", metadata={"g": 0}, if_version=0)
    with pytest.raises(VersionConflict) as exc:
        store.put("session_state:s1", "__session_state__", metadata={"g": 9}, if_version=0)
    assert exc.value.data["actual"] == 1
    assert (
        store.put("session_state:s1", "__session_state__", metadata={"g": 1}, if_version=1).version
        == 2
    )
    with pytest.raises(VersionConflict, match="expected version 1"):
        store.put("session_state:s1", "__session_state__", metadata={"g": 2}, if_version=1)
    # patch with CAS merges metadata
    assert (
        store.patch("session_state:s1", "__session_state__", {"last": "x"}, if_version=2).version
        == 3
    )
    rec = store.get("session_state:s1", "__session_state__")
    assert rec is not None and rec.metadata == {"g": 1, "last": "x"}
    with pytest.raises(VersionConflict):
        store.patch("session_state:s1", "__session_state__", {"g": 5}, if_version=2)
    with pytest.raises(VersionConflict) as exc2:
        store.put("session_state:s1", "absent", metadata={}, if_version=4)
    assert exc2.value.data["actual"] is None
    with pytest.raises(NotFound):
        store.patch("session_state:s1", "absent", {"a": 1})
    assert not store.patch("session_state:s1", "absent", {"a": 1}, missing_ok=True).changed


def test_atomic_batch_all_or_nothing(store: Store) -> None:
    store.put("session_state:s1", "state", metadata={"v": 1})
    ops = [
        Put("session_summary:s1", "sum1", "summary", {"type": "summary"}, [1, 0, 0, 0]),
        Put("session_edge:s1", "edge:sum1:t1", "", {"parent_summary_id": "sum1"}),
        Patch("session_state:s1", "state", {"v": 2}, if_version=7),  # conflicts
    ]
    with pytest.raises(VersionConflict):
        store.write(ops)
    assert store.get("session_summary:s1", "sum1") is None
    assert store.collection("session_summary:s1") is None  # created lazily, rolled back too
    assert store.count("session_edge:s1") == 0
    ops[2] = Patch("session_state:s1", "state", {"v": 2}, if_version=1)
    res = store.write(ops)
    assert [r.version for r in res] == [1, 1, 2]
    assert store.count("session_summary:s1") == 1
    assert [h.id for h in store.search("session_summary:s1", [1, 0, 0, 0], 3)] == ["sum1"]


def test_bad_input_writes_nothing(store: Store) -> None:
    good = Put("user:u1", "ok", "fine", {}, [1, 0, 0, 0])
    bad_cases = [
        Put("", "id", "t", {}, [1, 0, 0, 0]),
        Put("bad\x01name", "id", "t", {}, [1, 0, 0, 0]),
        Put("x" * 300, "id", "t", {}, [1, 0, 0, 0]),
        Put("user:u1", "", "t", {}, [1, 0, 0, 0]),
        Put("user:u1", "i" * 1025, "t", {}, [1, 0, 0, 0]),
        Put("user:u1", "id", "t", [1, 2], [1, 0, 0, 0]),  # type: ignore[arg-type]
        Put("user:u1", "id", "t", {}, [1, 0, 0]),
        Put("user:u1", "id", "t", {}, None),
        Put("user:u1", "id", "t", {"x": float("nan")}, [1, 0, 0, 0]),
        Put("authored:hard", "id", "t", {}, [1, 0]),  # 2-dim into a 1-dim collection
    ]
    for bad in bad_cases:
        with pytest.raises(InvalidInput):
            store.write([good, bad])
    assert store.get("user:u1", "ok") is None
    assert store.total_records() == 0
    assert store.collections() == []
    with pytest.raises(InvalidInput, match="dimensions 3 do not match collection user:u1"):
        store.put("user:u1", "a", vector=[1, 2, 3])


def test_vectorless_collections(store: Store) -> None:
    store.put("authored:hard", "doc#000002", text="Never X", metadata={"ordinal": 2})
    store.put("authored:hard", "doc#000001", text="Always Y", metadata={"ordinal": 1})
    store.put("authored:hard", "doc#000003", text="zero vec ok", vector=[0.0])
    info = store.collection("authored:hard")
    assert info is not None and info.dims == 1 and info.kind == "vectorless"
    hits = store.search("authored:hard", [1, 0, 0, 0], 2)
    assert [(h.id, h.score) for h in hits] == [("doc#000001", 0.0), ("doc#000002", 0.0)]
    assert [h.id for h in store.search("authored:hard", None, 0)] == [
        "doc#000001",
        "doc#000002",
        "doc#000003",
    ]
    rec = store.get("authored:hard", "doc#000003", include_vector=True)
    assert rec is not None and rec.vector is None


def test_delete_is_idempotent(store: Store) -> None:
    assert not store.delete("nope", "x")  # missing collection
    store.put("user:u1", "a", vector=[1, 0, 0, 0])
    assert not store.delete("user:u1", "missing")
    assert store.delete_many("user:u1", ["a", "a", "missing"]) == 1
    assert store.delete_many("user:u1", ["a"]) == 0
    assert store.count("user:u1") == 0
    assert store.search("user:u1", [1, 0, 0, 0], 3) == []


def test_drop_collections(store: Store) -> None:
    store.put("user:u1", "a", vector=[1, 0, 0, 0])
    store.put("user:u1:notes", "b", vector=[1, 0, 0, 0])
    assert store.drop_collections(["user:u1", "never"]) == 1
    assert store.collection("user:u1") is None
    assert store.search("user:u1", [1, 0, 0, 0], 3) == []
    assert store.count("user:u1:notes") == 1
    # recreate after drop in the same batch
    store.write(
        [
            Put("user:u2", "x", "", {}, [1, 0, 0, 0]),
            DropCollection("user:u2"),
            Put("user:u2", "y", "", {}, [0, 1, 0, 0]),
        ]
    )
    assert [r.id for r in store.list_records("user:u2")] == ["y"]
    assert [h.id for h in store.search("user:u2", [0, 1, 0, 0], 5)] == ["y"]


def test_increment_skips_missing_and_keeps_version(store: Store) -> None:
    store.put("user:u1", "a", metadata={"access_count": 0}, vector=[1, 0, 0, 0])
    store.put("user:u1", "b", metadata={}, vector=[0, 1, 0, 0])
    n = store.increment({"user:u1": ["a", "a", "b", "missing"], "no_such": ["x"]})
    assert n == 2
    a, b = store.get("user:u1", "a"), store.get("user:u1", "b")
    assert a is not None and b is not None
    assert a.metadata["access_count"] == 1 and b.metadata["access_count"] == 1
    assert a.version == 1 and b.version == 1


def test_metadata_number_fidelity(store: Store, location: Location) -> None:
    meta = {"int": 1, "float": 1.0, "neg": -0.5, "big": 2**70, "nested": {"l": [1, 2.0, True]}}
    store.put("user:u1", "a", metadata=meta, vector=[1, 0, 0, 0])
    store.close()
    with open_store(location, embed_dims=4, fingerprint="fp-test") as s2:
        rec = s2.get("user:u1", "a")
        assert rec is not None
        assert rec.metadata == meta
        assert type(rec.metadata["int"]) is int and type(rec.metadata["float"]) is float
        assert type(rec.metadata["nested"]["l"][1]) is float


def test_list_order_and_metadata_filters(store: Store) -> None:
    rows = {
        "b": {"sessionId": "s1", "n": 2, "flag": True, "tags": ["x"]},
        "a": {"sessionId": "s1", "n": 1.0, "flag": False, "none": None},
        "c": {"sessionId": "s10", "n": "2", "tags": ["x", "y"]},
        "Z": {"sessionId": "s1", 'we"ird': 1},
        "é": {"sessionId": "s1"},
    }
    for rid, meta in rows.items():
        store.put("session:s1", rid, text=rid, metadata=meta, vector=[1, 0, 0, 0])
    # id order is byte order (Go's sort): uppercase < lowercase < non-ASCII
    assert [r.id for r in store.list_records("session:s1")] == ["Z", "a", "b", "c", "é"]
    by = store.list_records
    assert [r.id for r in by("session:s1", where={"sessionId": "s1"})] == ["Z", "a", "b", "é"]
    assert [r.id for r in by("session:s1", where={"n": 2})] == ["b"]  # "2" is a string
    assert [r.id for r in by("session:s1", where={"n": 1})] == ["a"]  # 1 == 1.0
    assert [r.id for r in by("session:s1", where={"n": "2"})] == ["c"]
    assert [r.id for r in by("session:s1", where={"flag": True})] == ["b"]
    assert [r.id for r in by("session:s1", where={"flag": 0})] == []  # bool is not a number
    assert [r.id for r in by("session:s1", where={"none": None})] == ["a"]
    assert [r.id for r in by("session:s1", where={"tags": ["x"]})] == ["b"]
    assert [r.id for r in by("session:s1", where={'we"ird': 1})] == ["Z"]
    assert [r.id for r in by("session:s1", where={"sessionId": "s1", "n": 2})] == ["b"]
    assert [r.id for r in by("session:s1", limit=2)] == ["Z", "a"]
    assert [r.id for r in by("session:s1", after_id="b")] == ["c", "é"]
    assert by("missing") == []
    hits = store.search("session:s1", [1, 0, 0, 0], 10, where={"sessionId": "s1"})
    assert [h.id for h in hits] == ["Z", "a", "b", "é"]  # all tie at 1.0: id order


def test_time_range(store: Store) -> None:
    store.put("user:u1", "old", metadata={"ts": 1000}, vector=[1, 0, 0, 0])
    store.put("user:u1", "mid", metadata={"ts": "2000"}, vector=[1, 0, 0, 0])
    store.put("user:u1", "new", metadata={"ts": 3000.7}, vector=[1, 0, 0, 0])
    store.put("user:u1", "nots", metadata={}, vector=[1, 0, 0, 0])  # ts = creation time
    hits = store.search("user:u1", [1, 0, 0, 0], 10, time_range=TimeRange(1500, 3001))
    assert sorted(h.id for h in hits) == ["mid", "new"]
    assert {h.ts_ms for h in hits} == {2000, 3000}
    recent = store.list_records("user:u1", time_range=TimeRange(start_ms=10**12))
    assert [r.id for r in recent] == ["nots"]
    assert store.list_records("user:u1", time_range=TimeRange(end_ms=1001))[0].id == "old"


def test_search_scores_ties_and_k(store: Store) -> None:
    vecs = {"c": [1, 0, 0, 0], "a": [1, 0, 0, 0], "b": [2, 0, 0, 0], "d": [0, 1, 0, 0]}
    vecs |= {"zero": [0, 0, 0, 0], "neg": [-1, 0, 0, 0]}
    for rid, v in vecs.items():
        store.put("user:u1", rid, vector=v)
    hits = store.search("user:u1", [3, 0, 0, 0], 2)
    assert [(h.id, round(h.score, 6)) for h in hits] == [("a", 1.0), ("b", 1.0)]
    everything = store.search("user:u1", [1, 0, 0, 0], 0)
    assert [h.id for h in everything] == ["a", "b", "c", "d", "zero", "neg"]
    assert [round(h.score, 6) for h in everything] == [1, 1, 1, 0, 0, -1]
    assert store.search("user:u1", [1, 0, 0, 0], -1) == everything
    assert store.search("missing", [1, 0, 0, 0], 3) == []
    with pytest.raises(InvalidInput):
        store.search("user:u1", [1, 0, 0], 3)


def test_search_collections_merge(store: Store) -> None:
    store.put("elevated:user:u1", "x", vector=[1, 0, 0, 0])
    store.put("elevated:session:s1", "x", vector=[1, 0, 0, 0])
    store.put("elevated:session:s1", "y", vector=[0.9, 0.1, 0, 0])
    store.put("global", "g", vector=[0, 1, 0, 0])
    hits = store.search_collections(
        ["elevated:user:u1", "elevated:session:s1", "global", "missing"], [1, 0, 0, 0], 2
    )
    assert [(h.collection, h.id) for h in hits] == [
        ("elevated:session:s1", "x"),
        ("elevated:user:u1", "x"),
    ]
    hits = store.search_collections(
        ["elevated:user:u1", "elevated:session:s1", "global"],
        [1, 0, 0, 0],
        2,
        exclude_by_collection={"elevated:session:s1": ["x"]},
    )
    assert [(h.collection, h.id) for h in hits] == [
        ("elevated:user:u1", "x"),
        ("elevated:session:s1", "y"),
    ]
    assert store.search_collections(["global"], [1, 0, 0, 0], 0) == []


def test_namespace_isolation_and_counts(store: Store) -> None:
    for ns in ("user:u1", "user:u10", "user:u1:notes", "turns:u1", "turns:u10"):
        store.put(ns, "r1", vector=[1, 0, 0, 0])
        store.put(ns, "r2", vector=[0, 1, 0, 0])
    assert store.count_namespace("user:u1") == 4
    assert store.count_namespace("user:u10") == 2
    assert store.count_prefix("user:") == 6
    assert store.count_prefix("turns:") == 4
    assert store.total_records() == 10
    assert [c.name for c in store.collections(namespace="user:u1")] == [
        "user:u1",
        "user:u1:notes",
    ]
    assert store.drop_collections(c.name for c in store.collections(namespace="user:u1")) == 2
    assert store.count("user:u10") == 2 and store.count("user:u1") == 0
    assert [h.id for h in store.search("user:u10", [1, 0, 0, 0], 1)] == ["r1"]


def test_ensure_collections_idempotent(store: Store) -> None:
    a = store.ensure_collections(["session:s1", "session_state:s1", "authored:hard"])
    b = store.ensure_collections(["session:s1", "session_state:s1", "authored:hard"])
    assert a == b
    assert [c.dims for c in a] == [4, 1, 1]
    with pytest.raises(InvalidInput):
        store.ensure_collections(["ok", ""])
    assert store.collection("ok") is None


def test_persistence_across_reopen(location: Location) -> None:
    with open_store(location, embed_dims=4, fingerprint="fp") as s:
        s.put("user:u1", "a", text="alpha", metadata={"k": "v"}, vector=[1, 0, 0, 0])
        s.put("user:u1", "b", text="beta", vector=[0, 1, 0, 0])
        s.delete("user:u1", "b")
        s.add_tombstones("user:u1", ["b"], reason="forget")
    with open_store(location, embed_dims=4, fingerprint="fp") as s:
        assert [r.id for r in s.list_records("user:u1")] == ["a"]
        assert [h.id for h in s.search("user:u1", [0, 1, 0, 0], 3)] == ["a"]
        assert s.tombstoned("user:u1", ["a", "b"]) == {"b"}
        assert s.list_tombstones("user:u1")[0][:3] == ("user:u1", "b", "forget")
        assert s.remove_tombstones("user:u1") == 1


def test_concurrent_writers_group_commit(store: Store) -> None:
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for i in range(50):
                store.put(f"user:w{w}", f"r{i}", vector=[1, w, i, 0])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count_prefix("user:w") == 300
    assert store.max_seq() >= 300


def test_delete_then_reinsert_and_reads_during_writes(store: Store) -> None:
    rng = np.random.default_rng(3)
    for i in range(200):
        store.put("user:u1", f"r{i:03d}", vector=rng.standard_normal(4))
    store.write([Delete("user:u1", f"r{i:03d}") for i in range(0, 200, 2)])
    store.write([Put("user:u1", f"r{i:03d}", "", {}, [1, 0, 0, 0]) for i in range(0, 20, 2)])
    hits = store.search("user:u1", [1, 0, 0, 0], 10)
    assert [h.id for h in hits] == [f"r{i:03d}" for i in range(0, 20, 2)]
    assert store.count("user:u1") == 110


def test_defaults_come_from_the_settings(location: Location, backend: str) -> None:
    # Regression: a Store opened without settings (benchmarks, tests, tools) used
    # ef_construction 200 while the daemon's settings say 100: a different graph.
    from sidecar.config import StoreSettings

    defaults = StoreSettings()
    s: Any = open_store(location, embed_dims=4, fingerprint="fp-test")
    try:
        assert s.params.m == defaults.hnsw_m
        assert s.params.ef_construction == defaults.hnsw_ef_construction
        assert s.params.ef_search == defaults.hnsw_ef_search
        assert s.params.oversample == defaults.oversample
        assert s.exact_threshold == defaults.exact_threshold
        if backend == "sqlite":  # PostgreSQL has no checkpoints of its own to time
            assert s.checkpoint_idle_s == defaults.checkpoint_idle_s
    finally:
        s.close()
