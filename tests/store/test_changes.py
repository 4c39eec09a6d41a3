"""Catching up with a collection in O(changes), on both backends: ``collection_states``
(version, count, removal counter, seq watermark) and ``changed_since`` (the records put or
patched after a watermark, in seq order), and a cache kept by them against concurrent
writers (two store instances on one PostgreSQL database)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sidecar.store import CollectionState, Delete, DropCollection, InvalidInput, Patch, Put
from sidecar.store.backend import open_store
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Record

from .conftest import Location

C = "user:u1"


def _vec(i: int) -> list[float]:
    return [1.0, float(i % 7), 0.0, 0.5]


def _state(store: StoreBackend, name: str = C) -> CollectionState:
    return store.collection_states([name])[name]


class Cache:
    """What a retrieval cache does with the two reads: catch up when only puts and patches
    happened since the state it loaded at, reload otherwise."""

    def __init__(self, store: StoreBackend, name: str = C) -> None:
        self.store, self.name = store, name
        self.state = CollectionState()
        self.records: dict[str, Record] = {}
        self.reloads = self.catch_ups = 0

    def refresh(self) -> None:
        now = _state(self.store, self.name)  # read before the records (see docs/store.md)
        if now.unchanged_since(self.state):
            return
        if now.appended_since(self.state):
            for r in self.store.changed_since(self.name, self.state.max_seq):
                self.records[r.id] = r
            self.catch_ups += 1
        else:
            self.records = {r.id: r for r in self.store.list_records(self.name)}
            self.reloads += 1
        self.state = now

    def view(self) -> dict[str, tuple[str, int]]:
        return {i: (r.text, r.version) for i, r in self.records.items()}


def _truth(store: StoreBackend, name: str = C) -> dict[str, tuple[str, int]]:
    return {r.id: (r.text, r.version) for r in store.list_records(name)}


def test_states_of_missing_and_new_collections(store: StoreBackend) -> None:
    assert store.collection_states([C, "user:u2"]) == {
        C: CollectionState(),
        "user:u2": CollectionState(),
    }
    assert not CollectionState().exists
    store.put(C, "a", vector=_vec(0))
    store.put(C, "b", vector=_vec(1))
    s = _state(store)
    assert s.exists and s.count == 2 and s.removals == 0
    assert s.version == store.collection_versions([C])[C]
    assert s.max_seq >= max(r.seq for r in store.list_records(C))
    assert store.collection_states([C, C]) == {C: s}  # a name asked twice: once


def test_changed_since_returns_puts_and_patches_in_seq_order(store: StoreBackend) -> None:
    store.put(C, "a", text="a1", vector=_vec(0))
    s0 = _state(store)
    assert store.changed_since(C, s0.max_seq) == []
    store.put_many([Put(C, f"r{i}", f"t{i}", {"i": i}, _vec(i)) for i in range(5)])
    store.patch(C, "a", {"k": 1}, text="a2")
    store.put(C, "r1", text="t1b", vector=_vec(9))
    store.patch(C, "r2", {"k": 2}, bump_version=False)
    s1 = _state(store)
    assert s1.appended_since(s0) and not s1.unchanged_since(s0)
    got = store.changed_since(C, s0.max_seq)
    assert [r.seq for r in got] == sorted(r.seq for r in got)
    assert {r.id for r in got} == {"a", "r0", "r1", "r2", "r3", "r4"}
    assert [r.id for r in got][-3:] == ["a", "r1", "r2"]  # the latest changes last
    by_id = {r.id: r for r in got}
    assert by_id["a"].text == "a2" and by_id["a"].version == 2
    assert by_id["r1"].text == "t1b" and by_id["r2"].metadata == {"i": 2, "k": 2}
    assert by_id["r1"].vector is not None and by_id["r1"].vector.tolist() == _vec(9)
    assert all(r.vector is None for r in store.changed_since(C, 0, include_vectors=False))
    assert store.changed_since(C, s1.max_seq) == []
    # paging by the last seq, a limit of 0 or less is no limit
    pages: list[str] = []
    after = s0.max_seq
    while page := store.changed_since(C, after, limit=2):
        assert len(page) <= 2
        pages += [r.id for r in page]
        after = page[-1].seq
    assert pages == [r.id for r in got]
    assert len(store.changed_since(C, 0, limit=0)) == 6
    # other collections, a missing one, bookkeeping
    store.put("user:u2", "x", vector=_vec(0))
    assert store.changed_since(C, s1.max_seq) == []
    assert store.changed_since("user:nope", 0) == []
    store.increment({C: ["a"]})
    assert _state(store).unchanged_since(s1)


def test_changed_since_refuses_bad_arguments(store: StoreBackend) -> None:
    store.put(C, "a", vector=_vec(0))
    for bad in (-1, True, 1.5, "3"):
        with pytest.raises(InvalidInput):
            store.changed_since(C, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        store.changed_since(C, 0, limit="2")  # type: ignore[arg-type]
    assert store.changed_since(C, 2**80) == []


def test_every_removal_moves_the_counter(store: StoreBackend) -> None:
    store.put_many([Put(C, f"r{i}", "", {}, _vec(i)) for i in range(6)])
    s0 = _state(store)
    assert store.delete(C, "r0")
    s1 = _state(store)
    assert (s1.removals, s1.count) == (1, 5) and not s1.appended_since(s0)
    # missing ids, a missing collection: nothing removed, nothing moves
    assert not store.delete(C, "nope")
    assert store.delete_many("user:nope", ["a"]) == 0
    assert _state(store) == s1
    assert store.delete_many(C, ["r1", "r2", "nope"]) == 2
    assert _state(store).removals == 3
    store.write([Put(C, "n", "", {}, _vec(0)), Delete(C, "r3")])
    assert _state(store).removals == 4
    # a failed write removes nothing
    with pytest.raises(Exception, match="version conflict"):
        store.write([Delete(C, "r4"), Patch(C, "r5", {}, None, 9)])
    assert _state(store).removals == 4 and store.get(C, "r4") is not None
    # other collections keep their own counter
    store.put("user:u2", "x", vector=_vec(0))
    store.delete("user:u2", "x")
    assert _state(store, "user:u2").removals == 1 and _state(store).removals == 4


def test_delete_and_put_again_of_one_id(store: StoreBackend) -> None:
    cache = Cache(store)
    store.put(C, "a", text="first", vector=_vec(0))
    store.put(C, "b", text="b", vector=_vec(1))
    cache.refresh()
    first = store.get(C, "a")
    assert first is not None
    store.delete(C, "a")
    store.put(C, "a", text="second", vector=_vec(2))
    now = _state(store)
    assert now.removals == 1 and now.count == 2 and not now.appended_since(cache.state)
    again = store.changed_since(C, cache.state.max_seq)
    assert [(r.id, r.text, r.version) for r in again] == [("a", "second", 1)]
    assert again[0].seq > first.seq
    cache.refresh()
    assert cache.reloads == 2 and cache.view() == _truth(store)


def test_drop_and_recreate(store: StoreBackend) -> None:
    store.put_many([Put(C, f"r{i}", "", {}, _vec(i)) for i in range(3)])
    store.delete(C, "r0")
    old = _state(store)
    assert store.drop_collections([C]) == 1
    assert _state(store) == CollectionState()
    store.put(C, "z", vector=_vec(0))
    new = _state(store)
    assert new.cid not in (0, old.cid) and new.removals == 0 and new.count == 1
    assert not new.appended_since(old) and not new.unchanged_since(old)
    store.write([DropCollection(C), Put(C, "y", "", {}, _vec(1))])
    assert _state(store).cid not in (old.cid, new.cid)
    assert [r.id for r in store.changed_since(C, 0)] == ["y"]


def test_removal_counter_survives_reopen(new_location: Callable[[], Location]) -> None:
    loc = new_location()
    with open_store(loc, embed_dims=4, fingerprint="fp") as s:
        s.put_many([Put(C, f"r{i}", "", {}, _vec(i)) for i in range(4)])
        s.delete_many(C, ["r0", "r1"])
        s.put("user:u2", "x", vector=_vec(0))
        before = s.collection_states([C, "user:u2"])
    with open_store(loc, embed_dims=4, fingerprint="fp") as s:
        after = s.collection_states([C, "user:u2"])
        assert after[C].removals == 2 and after["user:u2"].removals == 0
        assert (after[C].cid, after[C].count) == (before[C].cid, 2)
        assert after[C].max_seq >= before[C].max_seq
        s.delete(C, "r2")
        assert _state(s).removals == 3
        assert s.changed_since(C, before[C].max_seq) == []


def test_a_cache_follows_every_kind_of_write(store: StoreBackend) -> None:
    cache = Cache(store)
    steps: list[Callable[[], Any]] = [
        lambda: store.put_many([Put(C, f"r{i}", f"t{i}", {}, _vec(i)) for i in range(20)]),
        lambda: store.patch(C, "r3", {"k": 1}, text="patched"),
        lambda: store.put(C, "r4", text="replaced", vector=_vec(4)),
        lambda: store.delete(C, "r5"),
        lambda: store.put(C, "r5", text="back", vector=_vec(5)),
        lambda: store.increment({C: ["r6"]}),
        lambda: store.drop_collections([C]),
        lambda: store.put(C, "new", text="n", vector=_vec(0)),
    ]
    for step in steps:
        step()
        cache.refresh()
        assert cache.view() == _truth(store)
    assert cache.catch_ups >= 3 and cache.reloads >= 3


def _hammer(store: StoreBackend, tag: str, rounds: int, errors: list[BaseException]) -> None:
    try:
        for i in range(rounds):
            store.put_many([Put(C, f"{tag}{i}-{j}", f"{tag}{i}", {}, _vec(i)) for j in range(3)])
            store.patch(C, f"{tag}{i}-0", {"n": i}, text=f"{tag}{i}p")
            if i % 5 == 4:
                store.delete(C, f"{tag}{i - 2}-1")
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_cache_stays_exact_under_concurrent_writers(
    backend: str, store: StoreBackend, location: Location
) -> None:
    """Two writers (two store instances on one PostgreSQL database; two threads of one
    SQLite store, which no other process may open) and a reader keeping a cache."""
    second = (
        open_store(location, embed_dims=4, fingerprint="fp-test")
        if backend == "postgres"
        else store
    )
    try:
        store.put(C, "seed", vector=_vec(0))
        cache = Cache(store)
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_hammer, args=(w, tag, 30, errors))
            for w, tag in ((store, "a"), (second, "b"))
        ]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            cache.refresh()
        for t in threads:
            t.join()
        assert errors == []
        cache.refresh()
        assert cache.view() == _truth(store)
        assert _state(store).removals == 12 and cache.catch_ups > 0
    finally:
        if second is not store:
            second.close()


def test_a_slow_writer_committing_after_a_faster_one_is_not_missed(
    backend: str, store: StoreBackend, location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL takes a record's seq mid-transaction: a writer that took its seqs first
    but commits after another writer of the collection must still be seen by
    ``changed_since(state.max_seq)`` of a state read between the two commits. (SQLite has
    one writer thread: seqs are committed in order.)"""
    if backend != "postgres":
        pytest.skip("PostgreSQL's concurrent write transactions")
    from sidecar.store.pg import writes

    second = open_store(location, embed_dims=4, fingerprint="fp-test")
    try:
        store.put(C, "seed", vector=_vec(0))
        cache = Cache(store)
        cache.refresh()
        slow_wrote, go_on = threading.Event(), threading.Event()
        real_finish = writes.PgTx.finish

        def finish(tx: writes.PgTx) -> list[tuple[int, int]]:
            if threading.current_thread().name == "slow":
                slow_wrote.set()
                assert go_on.wait(10)
            return real_finish(tx)

        monkeypatch.setattr(writes.PgTx, "finish", finish)
        slow = threading.Thread(target=lambda: store.put(C, "slow", vector=_vec(1)), name="slow")
        slow.start()
        assert slow_wrote.wait(10)  # its record holds a seq, uncommitted
        second.put(C, "fast", vector=_vec(2))  # a greater seq, committed first
        cache.refresh()
        assert "fast" in cache.records and "slow" not in cache.records
        go_on.set()
        slow.join()
        cache.refresh()
        assert set(cache.records) == {"seed", "fast", "slow"}
        assert cache.catch_ups == 2 and cache.reloads == 1
    finally:
        second.close()


def _bulk_rows(url: str, name: str, n: int) -> None:
    """``n`` records in a vectorless collection of a PostgreSQL store, straight in SQL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL search_path TO libravdb, public")
        conn.execute(
            "INSERT INTO records (cid, id, text, metadata, meta, version, seq, created_ms, "
            "updated_ms, ts_ms) SELECT cid, 'r' || g, 'text ' || g, '{}', '{}', 1, "
            "nextval('seq'), 0, 0, 0 FROM collections, generate_series(1, %s) g "
            "WHERE name = %s",
            (n, name),
        )
        conn.execute(
            "UPDATE collections SET n_records = n_records + %s, version = nextval('seq') "
            "WHERE name = %s",
            (n, name),
        )


def test_changed_since_uses_the_index_at_100k_records(
    backend: str, store: StoreBackend, location: Location
) -> None:
    name = "authored:hard"  # vectorless: rows are cheap to make
    if backend == "postgres":
        import psycopg

        store.put(name, "first", text="x")
        _bulk_rows(str(location), name, 100_000)
    else:
        store.put_many([Put(name, f"r{i}", f"text {i}") for i in range(100_000)])
    before = _state(store, name)
    assert before.count == 100_001 if backend == "postgres" else before.count == 100_000
    for i in range(10):
        store.put(name, f"new{i}", text="changed")
    sent: list[tuple[str, Any]] = []
    if backend == "postgres":
        db: Any = store.db  # type: ignore[attr-defined]
        real_read = db.read

        def read(sql: str, params: Any = None, **kw: Any) -> Any:
            if "r.seq >" in str(sql):  # not the background indexer's reads
                sent.append((sql, params))
            return real_read(sql, params, **kw)

        db.read = read
    got = store.changed_since(name, before.max_seq, include_vectors=False)
    assert [r.id for r in got] == [f"new{i}" for i in range(10)]
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(Path(location) / "store.sqlite3")
        plan = " ".join(
            str(r[-1])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM records WHERE cid = 1 AND seq > 5 ORDER BY seq"
            )
        )
        conn.close()
        assert "records_cid_seq" in plan and "TEMP B-TREE" not in plan, plan
        return
    [(sql, params)] = sent
    with psycopg.connect(str(location), autocommit=True) as conn:
        conn.execute("SET search_path TO libravdb, public")
        for analyzed in (False, True):  # before autovacuum has seen the load, and after
            if analyzed:
                conn.execute("ANALYZE records")
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
            assert "records_cid_seq" in plan and "Seq Scan on records" not in plan, plan
            # (an index scan in seq order, or a bitmap scan of the range and a sort of
            # what it found: both O(changes))
