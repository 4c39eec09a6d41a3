"""What a delete leaves in the SQLite store's files once ``scrub_deleted`` returned (what
a forget calls): no byte of the deleted text or vector in ``store.sqlite3`` or its WAL,
and none of the vector in a saved graph after the next index save. Real stores on real
data directories; the files are read raw (scripts/stress/disk_traces.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from scripts.stress.disk_traces import stored_vector, text_needles, traces, vector_needles
from sidecar.store import AsyncStore, Put, Store
from sidecar.store.reads import _rconn

pytestmark = pytest.mark.sqlite_only("SQLite's database, log and hnswlib graph files")

DIMS = 32
SECRET = "passport X7Q-49A8-ZZ"
# a row over a page: its text spills into overflow pages, which go to the freelist
LONG = "My travel notes. " * 400 + SECRET + " kept in the blue folder." + " More notes." * 200


def _vec(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIMS).astype(np.float32)


def _open(data_dir: Path, **kw: object) -> Store:
    opts: dict[str, object] = {"embed_dims": DIMS, "background": False, "exact_threshold": 32}
    opts.update(kw)
    return Store.open(data_dir, **opts)  # type: ignore[arg-type]


def _fill(store: Store, collection: str, n: int, start: int = 0) -> None:
    store.put_many(
        [
            Put(collection, f"r{i}", f"filler {i} about glaciers and lanterns", {}, _vec(i))
            for i in range(start, start + n)
        ]
    )


def _needles(
    store: Store, data_dir: Path, collection: str, rid: str, text: str
) -> dict[str, bytes]:
    raw = stored_vector(data_dir, collection, rid)
    assert raw is not None
    dims = [store.ann_dims] if store.ann_dims < store.embed_dims else []
    return {**text_needles(SECRET, text[:64]), **vector_needles(raw, dims)}


def _index_traces(data_dir: Path, needles: dict[str, bytes]) -> list[str]:
    return [t for t in traces(data_dir, needles) if t.startswith("c")]


@contextmanager
def _old_snapshot(data_dir: Path) -> Iterator[None]:
    """A reader in the middle of a read that began now (another connection, as a long
    export or a backup would be)."""
    conn = sqlite3.connect(data_dir / "store.sqlite3", isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM records").fetchone()
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def _wait_for(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_every_connection_zeroes_deleted_rows(data_dir: Path) -> None:
    """SQLite's own default is off (some builds, as Debian's, turn it on): the store says."""
    with _open(data_dir) as store:
        for conn in (store._wconn, _rconn(store)):
            assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1


@pytest.mark.parametrize("text", [f"my {SECRET} number", LONG], ids=["short", "overflowing"])
def test_scrub_leaves_no_deleted_text_in_the_database_or_its_log(data_dir: Path, text: str) -> None:
    with _open(data_dir) as store:
        _fill(store, "notes", 200)
        store.put("notes", "secret", text=text, vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", text)
        store.checkpoint()  # the database file holds it too, not only the log
        store.increment({"notes": ["r1", "r2"]})
        assert traces(data_dir, needles, indexes=False)
        assert store.delete("notes", "secret")
        report = store.scrub_deleted()
        assert report.ran and report.complete
        assert traces(data_dir, needles, indexes=False) == []
        assert store.get("notes", "r1") is not None  # the neighbours are intact
    assert traces(data_dir, needles) == []


def test_rows_moved_by_updates_and_page_splits_leave_no_copy(data_dir: Path) -> None:
    """The secret's row is rewritten (growing metadata) and its neighbours churn, so its
    bytes move between pages; every page it left is zeroed (with ``secure_delete`` off,
    copies stayed in the database file here)."""
    rng = np.random.default_rng(3)

    def text(n: int) -> str:
        return "x" * int(rng.integers(10, n))

    with _open(data_dir, exact_threshold=100_000) as store:
        _fill(store, "notes", 500)
        store.put("notes", "secret", text=f"my {SECRET} " + text(300), vector=_vec(999))
        _fill(store, "notes", 500, start=500)
        store.checkpoint()
        for rnd in range(10):
            ids = [f"r{i}" for i in rng.integers(0, 1000, 60)]
            store.put_many([Put("notes", i, text(900), {"k": rnd}, _vec(rnd)) for i in ids])
            store.delete_many("notes", [f"r{i}" for i in rng.integers(0, 1000, 20)])
            store.patch("notes", "secret", {"pad": "p" * int(rng.integers(0, 600))})
            if rnd % 3 == 0:
                store.checkpoint()
        assert store.delete("notes", "secret")
        assert store.scrub_deleted().complete
        assert traces(data_dir, text_needles(SECRET), indexes=False) == []


def test_a_scrub_costs_nothing_when_nothing_was_deleted(data_dir: Path) -> None:
    with _open(data_dir) as store:
        _fill(store, "notes", 5)
        assert not store.scrub_deleted().ran
        assert not store.delete("notes", "missing")
        assert not store.scrub_deleted().ran
        assert store.delete("notes", "r1")
        assert store.scrub_deleted().ran
        assert not store.scrub_deleted().ran  # the first one covered it


@pytest.mark.parametrize("tiers", [(), (16,)], ids=["full-graph", "tier-graph"])
def test_the_next_index_save_holds_no_deleted_vector(
    data_dir: Path, tiers: tuple[int, ...]
) -> None:
    with _open(data_dir, tiers=tiers) as store:
        _fill(store, "notes", 100)
        store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", SECRET)
        store.run_index_work()
        store.checkpoint()
        assert _index_traces(data_dir, needles), "the graph file held the vector"
        assert store.delete("notes", "secret")
        store.checkpoint()  # in the daemon: the checkpoint thread's tick after a scrub
        assert traces(data_dir, needles) == []
        live = store.search("notes", _vec(7), 1)
    with _open(data_dir, tiers=tiers) as store:  # the scrubbed file loads and answers
        assert store.open_report["indexes_loaded"] == 1
        assert store.search("notes", _vec(7), 1) == live
        assert live[0].id == "r7"


def test_a_daemon_killed_before_the_save_is_scrubbed_at_the_next_start(data_dir: Path) -> None:
    """Killed after the delete, before any save: the start cuts the log and the
    checkpoint thread's first tick rewrites the stale graph file."""
    with _open(data_dir) as store:
        _fill(store, "notes", 100)
        store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", SECRET)
        store.run_index_work()
        store.checkpoint()
    child = textwrap.dedent(
        f"""
        import os
        from sidecar.store import Store
        s = Store.open({str(data_dir)!r}, embed_dims={DIMS}, background=False,
                       exact_threshold=32)
        assert s.delete("notes", "secret")
        os._exit(0)  # no scrub, no save, no close
        """
    )
    subprocess.run([sys.executable, "-c", child], check=True, cwd=Path(__file__).parents[2])
    assert _index_traces(data_dir, needles), "the stale graph file held the vector"
    store = _open(data_dir, background=True, checkpoint_idle_s=3600)
    try:
        assert traces(data_dir, needles, indexes=False) == []
        _wait_for(lambda: traces(data_dir, needles) == [], "the graph file was never rewritten")
    finally:
        store.close()


def test_a_reader_of_an_older_snapshot_defers_the_scrub_until_it_lets_go(
    data_dir: Path,
) -> None:
    with _open(data_dir) as store:
        _fill(store, "notes", 50)
        store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", SECRET)
        with _old_snapshot(data_dir):
            assert store.delete("notes", "secret")
            report = store.scrub_deleted(wait_s=0.3)
            assert report.ran and not report.complete and report.attempts > 1
            # what the report says: that reader may still read it, so SQLite keeps it
            assert traces(data_dir, needles, indexes=False)
            store.put("notes", "after", text="writes go on meanwhile", vector=_vec(1000))
        report = store.scrub_deleted()
        assert report.ran and report.complete
        assert traces(data_dir, needles, indexes=False) == []


def test_the_checkpoint_thread_finishes_a_deferred_scrub(data_dir: Path) -> None:
    with _open(data_dir, background=True, checkpoint_idle_s=3600) as store:
        _fill(store, "notes", 50)
        store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", SECRET)
        with _old_snapshot(data_dir):
            assert store.delete("notes", "secret")
            assert not store.scrub_deleted(wait_s=0.05).complete
        _wait_for(
            lambda: traces(data_dir, needles, indexes=False) == [],
            "the deferred scrub never completed",
        )


async def test_scrub_after_forget_under_a_steady_writer(data_dir: Path) -> None:
    """Writes never stop: the forget's checkpoint still empties the log of the deleted
    row, and the writes after it hold none of it."""
    store = await AsyncStore.open(
        data_dir, embed_dims=DIMS, exact_threshold=32, checkpoint_idle_s=3600
    )
    stop = threading.Event()
    written = [0]
    progress = threading.Condition()

    def write() -> None:
        while not stop.is_set():
            n = written[0]
            store.store.put("busy", f"b{n}", text=f"busy {n}", vector=_vec(n))
            with progress:
                written[0] += 1
                progress.notify_all()

    async def written_at_least(n: int) -> None:
        def wait() -> None:
            with progress:
                assert progress.wait_for(lambda: written[0] >= n, 60)

        await asyncio.to_thread(wait)

    writer = threading.Thread(target=write)
    try:
        await store.put_many(
            [Put("notes", f"r{i}", f"filler {i}", {}, _vec(i)) for i in range(100)]
        )
        await store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store.store, data_dir, "notes", "secret", SECRET)  # type: ignore[arg-type]
        store.store.wait_indexed()
        await store.checkpoint()
        writer.start()
        await written_at_least(20)
        assert await store.delete("notes", "secret")
        report = await store.scrub_after_forget()
        assert report.ran and report.complete
        assert traces(data_dir, needles, indexes=False) == []
        await written_at_least(written[0] + 20)
        assert traces(data_dir, needles, indexes=False) == []
        _wait_for(lambda: traces(data_dir, needles) == [], "the graph was never saved")
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        await store.aclose()


def test_a_dropped_collection_leaves_nothing(data_dir: Path) -> None:
    with _open(data_dir) as store:
        _fill(store, "notes", 100)
        store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", SECRET)
        store.run_index_work()
        store.checkpoint()
        assert store.drop_collections(["notes"]) == 1
        assert store.scrub_deleted().complete
        assert traces(data_dir, needles) == []


def test_the_file_of_a_graph_dropped_for_a_shrunk_collection_goes(data_dir: Path) -> None:
    with _open(data_dir) as store:
        _fill(store, "notes", 40)
        store.put("notes", "secret", text=f"my {SECRET}", vector=_vec(999))
        needles = _needles(store, data_dir, "notes", "secret", SECRET)
        store.run_index_work()
        store.checkpoint()
        assert _index_traces(data_dir, needles)
        store.delete_many("notes", ["secret", *(f"r{i}" for i in range(30))])
        store.run_index_work()  # under half the threshold: back to exact search
        assert store.index_status()[0].mode == "exact"
        store.checkpoint()
        assert traces(data_dir, needles) == []
        assert not list((data_dir / "index").glob("*.hnsw"))
