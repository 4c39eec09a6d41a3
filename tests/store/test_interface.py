"""The store interface's additions for several daemons (collection versions, session locks),
the factory, and texts PostgreSQL cannot hold as they are: on both backends."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sidecar.store import Delete, DropCollection, Patch, Put, SessionLocked, Store
from sidecar.store.backend import is_store_url, open_store, sqlite_dir
from sidecar.store.interface import StoreBackend

from .conftest import Location


def test_collection_versions_move_with_every_edit(store: StoreBackend) -> None:
    v = store.collection_versions
    assert v(["user:u1"]) == {"user:u1": 0}  # missing
    store.ensure_collections(["user:u1"])
    seen = [v(["user:u1"])["user:u1"]]
    assert seen[0] != 0
    edits = [
        lambda: store.put("user:u1", "a", vector=[1, 0, 0, 0]),
        lambda: store.put("user:u1", "a", text="again", vector=[1, 0, 0, 0]),
        lambda: store.patch("user:u1", "a", {"k": 1}),
        lambda: store.write([Put("user:u1", "b", "", {}, [0, 1, 0, 0]), Delete("user:u1", "a")]),
    ]
    for edit in edits:
        edit()
        now = v(["user:u1"])["user:u1"]
        assert now not in seen, "an edit left the version unchanged"
        seen.append(now)
    # other collections' edits and bookkeeping leave it alone
    store.put("user:u2", "x", vector=[1, 0, 0, 0])
    store.increment({"user:u1": ["b"]})
    store.delete("user:u1", "missing")
    store.patch("user:u1", "missing", {"k": 1}, missing_ok=True)
    assert v(["user:u1"])["user:u1"] == seen[-1]
    # dropped: 0; re-created: a number never seen for it
    store.drop_collections(["user:u1"])
    assert v(["user:u1", "user:u2"])["user:u1"] == 0
    store.write([Put("user:u1", "c", "", {}, [1, 0, 0, 0])])
    assert v(["user:u1"])["user:u1"] not in [0, *seen]
    # a failed write changes nothing
    before = v(["user:u1"])
    with pytest.raises(Exception, match="version conflict"):
        store.write([Put("user:u1", "d", "", {}, [1, 0, 0, 0]), Patch("user:u1", "c", {}, None, 9)])
    assert v(["user:u1"]) == before
    store.write([DropCollection("user:u1"), Put("user:u1", "e", "", {}, [1, 0, 0, 0])])
    assert v(["user:u1"]) != before


def test_session_lock_excludes_other_holders(store: StoreBackend) -> None:
    order: list[str] = []
    with store.session_lock("compact:s1"):
        assert store.try_session_lock("compact:s1") is None
        other = store.try_session_lock("compact:s2")  # another key is free
        assert other is not None
        other.release()
        other.release()  # idempotent
        with (
            pytest.raises(SessionLocked, match="compact:s1"),
            store.session_lock("compact:s1", timeout=0.1),
        ):
            pass

        def waiter() -> None:
            with store.session_lock("compact:s1", timeout=30):
                order.append("waiter")

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.2)
        order.append("holder done")
    t.join(30)
    assert order == ["holder done", "waiter"]
    lease = store.try_session_lock("compact:s1")
    assert lease is not None
    lease.release()


def test_texts_and_metadata_with_nul_characters(store: StoreBackend) -> None:
    text = "before\x00after \x01 \\u0000"
    meta = {"k\x00": "v\x00", "x": "\x01\x02", "plain": "\\u0000", "n": [1, "\x00"]}
    store.put("user:u1", "a", text=text, metadata=meta, vector=[1, 0, 0, 0])
    store.put(
        "user:u1",
        "b",
        text="plain",
        metadata={"x": "\x01\x01", "plain": "\x00"},
        vector=[0, 1, 0, 0],
    )
    rec = store.get("user:u1", "a")
    assert rec is not None and rec.text == text and rec.metadata == meta
    assert list(rec.metadata) == list(meta)  # key order kept
    by = store.list_records
    assert [r.id for r in by("user:u1", where={"k\x00": "v\x00"})] == ["a"]
    assert [r.id for r in by("user:u1", where={"x": "\x01\x02"})] == ["a"]
    assert [r.id for r in by("user:u1", where={"x": "\x01\x01"})] == ["b"]
    assert [r.id for r in by("user:u1", where={"plain": "\x00"})] == ["b"]
    assert [r.id for r in by("user:u1", where={"plain": "\\u0000"})] == ["a"]
    assert [r.id for r in by("user:u1", where={"n": [1.0, "\x00"]})] == ["a"]
    hits = store.search("user:u1", [1, 0, 0, 0], 5, where={"x": "\x01\x02"})
    assert [h.text for h in hits] == [text]
    store.patch("user:u1", "a", {"more": "\x00"}, text="t\x00")
    rec = store.get("user:u1", "a")
    assert rec is not None and rec.text == "t\x00" and rec.metadata["more"] == "\x00"


def test_big_numbers_and_floats_filter_by_value(store: StoreBackend) -> None:
    store.put("user:u1", "big", metadata={"n": 2**70, "f": 1e20}, vector=[1, 0, 0, 0])
    store.put("user:u1", "small", metadata={"n": 5, "f": 0.1}, vector=[1, 0, 0, 0])
    by = store.list_records
    assert [r.id for r in by("user:u1", where={"n": 2**70})] == ["big"]
    assert [r.id for r in by("user:u1", where={"n": float(2**70)})] == ["big"]
    assert [r.id for r in by("user:u1", where={"f": 10**20})] == ["big"]
    assert [r.id for r in by("user:u1", where={"f": 0.1})] == ["small"]
    assert [r.id for r in by("user:u1", where={"n": 5.0})] == ["small"]
    assert by("user:u1", where={"n": float("nan")}) == []
    rec = store.get("user:u1", "big")
    assert rec is not None and type(rec.metadata["f"]) is float and rec.metadata["n"] == 2**70


def test_storage_bytes_and_stats(store: StoreBackend) -> None:
    store.put("user:u1", "a", text="x" * 1000, vector=[1, 0, 0, 0])
    size = store.storage_bytes()
    assert size.database > 0
    st = store.stats()
    assert st["backend"] == store.backend and st["records"] == 1 and st["collections"] == 1
    assert store.checkpoint() is not None


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    assert is_store_url("postgresql://u@h/db") and is_store_url("postgres://h/db")
    assert not is_store_url(str(tmp_path)) and not is_store_url(tmp_path)
    assert sqlite_dir(f"sqlite:{tmp_path}") == str(tmp_path)
    with open_store(f"sqlite:{tmp_path / 'd'}", embed_dims=4) as s:
        assert isinstance(s, Store) and s.backend == "sqlite"
        assert s.location == str(tmp_path / "d")


def test_location_hides_the_password(location: Location, backend: str) -> None:
    if backend == "sqlite":
        with open_store(location, embed_dims=4) as s:
            assert s.location == str(location)
        return
    url = str(location).replace("postgres:@", "postgres:secret@")
    with open_store(url, embed_dims=4) as s:  # trust auth: any password is accepted
        assert "secret" not in s.location and ":***@" in s.location


def test_lookups_of_names_with_nul_find_nothing(store: StoreBackend) -> None:
    # no collection name, id or tombstone key can hold NUL; asking for one is no error
    store.put("user:u1", "a", vector=[1, 0, 0, 0])
    store.put("user:u1", "b", vector=[0, 1, 0, 0])
    store.add_tombstones("user:u1", ["gone"])
    assert store.collection("user:u1\x00") is None
    assert store.dims_for("user:u1\x00x") == 4
    assert store.get("user:u1", "a\x00") is None and store.get("u\x00", "a") is None
    assert [r.id for r in store.get_many("user:u1", ["a", "a\x00"])] == ["a"]
    assert store.list_records("x\x00") == [] and store.count("x\x00") == 0
    assert [r.id for r in store.list_records("user:u1", after_id="a\x00")] == ["b"]
    assert store.count_prefix("user:\x00") == 0 and store.count_namespace("user:u1\x00") == 0
    assert store.collections(prefix="\x00") == [] and store.collections(namespace="u\x00") == []
    assert store.collection_versions(["x\x00"]) == {"x\x00": 0}
    assert store.search("x\x00", [1, 0, 0, 0], 3) == []
    assert [h.id for h in store.search("user:u1", [1, 0, 0, 0], 3, exclude_ids=["a\x00"])] == [
        "a",
        "b",
    ]
    assert store.tombstoned("user:u1", ["gone", "k\x00"]) == {"gone"}
    assert store.tombstoned_anywhere(["k\x00"]) == set() and store.list_tombstones("n\x00") == []
    assert store.remove_tombstones("n\x00") == 0
    with store.session_lock("s\x00"):
        assert store.try_session_lock("s\x00") is None


def test_prefetch_index_has_nothing_to_load_without_a_saved_graph(store: StoreBackend) -> None:
    # SQLite loads a saved graph ahead (tests/store/test_lazy_graph.py); PostgreSQL's index
    # lives in the server; neither has anything to load for a small or missing collection
    store.put("user:u1", "a", vector=[1, 0, 0, 0])
    assert store.prefetch_index("user:u1") is False
    assert store.prefetch_index("user:none") is False
    assert [h.id for h in store.search("user:u1", [1, 0, 0, 0], 1)] == ["a"]


def test_close_finishes_the_writes_already_submitted(location: Location) -> None:
    s = open_store(location, embed_dims=4)
    futures = [s.write_future([Put("user:u1", f"r{i}", "", {}, [1, 0, 0, 0])]) for i in range(40)]
    s.close()
    assert all(f.result(30)[0].created for f in futures)
    with pytest.raises(Exception, match="closed"):
        s.write_future([Put("user:u1", "late", "", {}, [1, 0, 0, 0])]).result(30)
    with open_store(location, embed_dims=4) as again:
        assert again.count("user:u1") == 40
