"""What only the PostgreSQL store has: several stores (daemons) on one database, a server
that goes away and comes back, a read-only or unreachable database, advisory locks between
processes, the funnel on the partial HNSW index, and its recall. The counterparts of the
SQLite-only tests (directory lock, full or read-only file, kill -9, graph files)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
import pytest

from sidecar.store import (
    InvalidInput,
    Put,
    SessionLocked,
    StorageUnavailable,
    StoreLocked,
    VersionConflict,
    view_files,
)
from sidecar.store import index as index_mod
from sidecar.store.backend import open_store, reembed
from sidecar.store.pg.conn import register_vector
from sidecar.store.pg.store import PgStore
from tests.pg_server import PgTestServer, start_server

from .conftest import clustered, exact_topk

REPO = Path(__file__).resolve().parents[2]


def _open(url: str, **kw: Any) -> PgStore:
    args: dict[str, Any] = {"embed_dims": 4, "fingerprint": "fp"}
    args.update(kw)
    store = open_store(url, **args)
    assert isinstance(store, PgStore)
    return store


# ---- several stores on one database ---------------------------------------------------------


def test_two_stores_see_each_others_writes_at_once(pg_url: str) -> None:
    with _open(pg_url) as a, _open(pg_url) as b:
        a.put("user:u1", "x", text="from a", metadata={"k": 1}, vector=[1, 0, 0, 0])
        # no cache anywhere: b sees the collection, the record, its count, its search hit
        assert b.collection("user:u1") is not None and b.count("user:u1") == 1
        assert b.get("user:u1", "x").text == "from a"  # type: ignore[union-attr]
        assert [h.id for h in b.search("user:u1", [1, 0, 0, 0], 3)] == ["x"]
        v1 = b.collection_versions(["user:u1"])
        b.patch("user:u1", "x", {"k": 2})
        assert a.collection_versions(["user:u1"]) != v1
        assert a.list_records("user:u1", where={"k": 2})[0].id == "x"
        # b drops the collection, a writes to it again: a new collection, no stale id
        old_cid = a.collection("user:u1").cid  # type: ignore[union-attr]
        b.drop_collections(["user:u1"])
        assert a.collection("user:u1") is None and a.count("user:u1") == 0
        a.put("user:u1", "y", vector=[0, 1, 0, 0])
        assert b.collection("user:u1").cid != old_cid  # type: ignore[union-attr]
        assert [r.id for r in b.list_records("user:u1")] == ["y"]
        a.add_tombstones("user:u1", ["x"], "forget")
        assert b.tombstoned_anywhere(["x", "y"]) == {"x"}
        assert a.max_seq() == b.max_seq() > 0


def test_compare_and_swap_has_one_winner_across_stores(pg_url: str) -> None:
    with _open(pg_url) as a, _open(pg_url) as b:
        a.put("session_state:s1", "state", metadata={"g": 0})

        def cas(
            store: PgStore, who: str, version: int, barrier: threading.Barrier, out: list[str]
        ) -> None:
            barrier.wait()
            try:
                store.patch("session_state:s1", "state", {"g": who}, if_version=version)
                out.append("won")
            except VersionConflict:
                out.append("lost")

        for round_ in range(10):
            outcomes: list[str] = []
            barrier = threading.Barrier(2)
            version = a.get("session_state:s1", "state").version  # type: ignore[union-attr]
            ts = [
                threading.Thread(target=cas, args=(s, w, version, barrier, outcomes))
                for s, w in ((a, "a"), (b, "b"))
            ]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            assert sorted(outcomes) == ["lost", "won"], round_
        # "only if absent" too
        outcomes = []
        barrier = threading.Barrier(2)

        def create(store: PgStore) -> None:
            barrier.wait()
            try:
                store.put("user:u1", "new", vector=[1, 0, 0, 0], if_version=0)
                outcomes.append("won")
            except VersionConflict:
                outcomes.append("lost")

        ts = [threading.Thread(target=create, args=(s,)) for s in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(outcomes) == ["lost", "won"]
        assert a.get("user:u1", "new").version == 1  # type: ignore[union-attr]


def test_concurrent_writers_keep_counts_and_increments_exact(pg_url: str) -> None:
    with _open(pg_url) as a, _open(pg_url) as b:
        a.put("user:u1", "hot", vector=[1, 0, 0, 0])

        def work(store: PgStore, w: int) -> None:
            for i in range(40):
                store.write(
                    [
                        Put("user:u1", f"{w}-{i}", "", {}, [1, w, i, 0]),
                        Put("user:u2", f"{w}-{i}", "", {}, [1, w, i, 0]),
                    ]
                )
                store.increment({"user:u1": ["hot"]})
                if i % 4 == 0:
                    store.delete("user:u2", f"{w}-{i}")

        ts = [threading.Thread(target=work, args=(s, w)) for w, s in enumerate((a, b, a, b))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert a.count("user:u1") == 161 == len(b.list_records("user:u1"))
        assert b.count("user:u2") == 120 == len(a.list_records("user:u2"))
        assert a.get("user:u1", "hot").metadata["access_count"] == 160  # type: ignore[union-attr]
        assert a.total_records() == b.total_records() == 281


# ---- locks between processes ------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, structlog
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    from sidecar.store.backend import open_store
    store = open_store(sys.argv[1], embed_dims=4)
    with store.session_lock(sys.argv[2]):
        print("locked", flush=True)
        sys.stdin.read()
    """
)


@pytest.fixture
def holder(pg_url: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, pg_url, "compact:s1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"locked"
    yield pg_url, proc
    proc.kill()
    proc.wait()


def test_session_lock_excludes_another_process_until_it_dies(
    holder: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = holder
    with _open(url) as store:
        assert store.try_session_lock("compact:s1") is None
        with pytest.raises(SessionLocked), store.session_lock("compact:s1", timeout=0.3):
            pass
        with store.session_lock("compact:s2", timeout=1):  # other sessions are free
            pass
        proc.kill()  # kill -9: the server ends its session, and the lock with it
        proc.wait()
        started = time.monotonic()
        with store.session_lock("compact:s1", timeout=10):
            assert time.monotonic() - started < 10


def test_a_session_lock_waits_for_the_writes_made_under_it_by_its_last_holder(
    pg_url: str,
) -> None:
    """The write fence: a write made under a session lock may still be committing when the
    lock is gone (its holder died with the COMMIT sent). The next holder waits for it, and
    ``try_session_lock`` answers busy meanwhile; before the fence both got the lock at once
    and read the state the write was replacing."""
    gate = (0x7E57, 2)
    with _open(pg_url) as a, _open(pg_url) as b, psycopg.connect(pg_url, autocommit=True) as t:
        a.put("session_state:s1", "state", metadata={"n": 0})
        t.execute("SELECT pg_advisory_lock(%s, %s)", gate)
        lease = a.acquire_session_lock("ingest:s1")
        in_flight = threading.Event()

        def write_held_at_commit(conn: Any) -> None:
            conn.execute(
                "UPDATE records SET version = version + 1 WHERE id = 'state'"
            )  # the write under the lock, then its COMMIT waits behind the test's lock
            in_flight.set()
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", gate)

        writer = threading.Thread(target=a.db.transact, args=(write_held_at_commit,))
        writer.start()
        assert in_flight.wait(30)
        lease.release()  # the lock is free, its holder's write is not done
        assert b.try_session_lock("ingest:s1") is None
        with pytest.raises(SessionLocked), b.session_lock("ingest:s1", timeout=0.3):
            pass
        t.execute("SELECT pg_advisory_unlock(%s, %s)", gate)
        writer.join(30)
        with b.session_lock("ingest:s1", timeout=30):
            assert b.get("session_state:s1", "state").version == 2  # type: ignore[union-attr]
        again = b.try_session_lock("ingest:s1")
        assert again is not None
        again.release()


def test_reembed_waits_for_no_daemon_and_a_daemon_for_no_reembed(pg_url: str) -> None:
    def embed(texts: list[str]) -> np.ndarray[Any, Any]:
        return np.ones((len(texts), 4), dtype=np.float32)

    with _open(pg_url) as store:
        store.put("user:u1", "a", text="alpha", vector=[1, 0, 0, 0])
        state = store.collection_states(["user:u1"])["user:u1"]
        views = store.view_place()  # a saved view holds the old vectors: the re-embed drops it
        assert views is not None
        header = {"cid": state.cid, "removals": state.removals}
        assert views.write("user:u1", header, [view_files.of_buffer(memoryview(b"rows"))])
        graphs = store.graph_place()  # and so does a saved graph

        def dump(path: Path) -> None:
            path.write_bytes(b"graph")

        assert graphs is not None and graphs.write("user:u1", header, dump)
        assert graphs.exists("user:u1")
        with pytest.raises(StoreLocked, match="stop them before `libravdb reembed`"):
            reembed(pg_url, embed, "fp2", embed_dims=4)
    seen: list[str] = []

    def slow_embed(texts: list[str]) -> np.ndarray[Any, Any]:
        if not seen:  # while the re-embed holds the database, a daemon is refused
            with pytest.raises(StoreLocked, match="reembed"):
                _open(pg_url, fingerprint="")
            seen.append("refused")
        return embed(texts)

    stats = reembed(pg_url, slow_embed, "fp2", embed_dims=4)
    assert stats.records == 1 and seen == ["refused"]
    with _open(pg_url, fingerprint="fp2") as store:
        assert store.get("user:u1", "a") is not None
        views = store.view_place()
        assert views is not None
        found, _ = views.read("user:u1", lambda _m: True, lambda _i, n: memoryview(bytearray(n)))
        assert not found
        graphs = store.graph_place()
        assert graphs is not None and not graphs.exists("user:u1")


# ---- the server going away ----------------------------------------------------------------------


@pytest.fixture
def own_server(request: pytest.FixtureRequest) -> Iterator[PgTestServer]:
    """A server of the test's own: it is stopped and started under the store. (Not under
    tmp_path: a pytest starting elsewhere resets /tmp/pytest-of-<user> to 0700, which the
    server's own user, under root, could then not enter to restart.)"""
    if request.config.getoption("--backend") == "sqlite":
        pytest.skip("PostgreSQL tests deselected (--backend sqlite)")
    root = Path(tempfile.mkdtemp(prefix="libravdb-pg-own-"))
    server = start_server(root / "pg")
    yield server
    server.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_outage_is_storage_unavailable_then_recovers(
    own_server: PgTestServer, mode: str
) -> None:
    url = own_server.new_database()
    store = _open(url, timeout=1.0, background=False)
    try:
        store.put("user:u1", "before", vector=[1, 0, 0, 0])
        own_server.stop(mode)  # immediate: a crash, recovered from the WAL at restart
        with pytest.raises(StorageUnavailable, match="PostgreSQL"):
            store.put("user:u1", "during", vector=[1, 0, 0, 0])
        with pytest.raises(StorageUnavailable):
            store.get("user:u1", "before")
        with pytest.raises(StorageUnavailable):
            store.search("user:u1", [1, 0, 0, 0], 1)
        own_server.start()
        # the first call after the restart works (the dead pooled connections are purged)
        assert store.get("user:u1", "before") is not None
        store.put("user:u1", "after", vector=[0, 1, 0, 0])
        assert [r.id for r in store.list_records("user:u1")] == ["after", "before"]
        with store.session_lock("s", timeout=2):
            pass
    finally:
        store.close()


def test_unreachable_server_is_storage_unavailable(tmp_path: Path) -> None:
    url = f"postgresql://postgres@/db?host={tmp_path}/no-server"
    with pytest.raises(StorageUnavailable, match="cannot open the store database"):
        open_store(url, embed_dims=4, timeout=1.0)


def test_read_only_database_is_storage_unavailable(pg_url: str, pg_server: PgTestServer) -> None:
    name = urlsplit(pg_url).path.lstrip("/")

    def set_read_only(on: bool) -> None:
        with pg_server.admin() as admin:
            value = "on" if on else "off"
            admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = {value}')
            # the store's pooled sessions keep their setting: end them (it reconnects)
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )

    with _open(pg_url, background=False) as store:
        store.put("user:u1", "keep", vector=[1, 0, 0, 0])
        set_read_only(True)
        with pytest.raises(StorageUnavailable, match="read-only"):
            store.put("user:u1", "nope", vector=[1, 0, 0, 0])
        assert store.get("user:u1", "nope") is None
        assert [h.id for h in store.search("user:u1", [1, 0, 0, 0], 3)] == ["keep"]
        set_read_only(False)
        store.put("user:u1", "yes", vector=[1, 0, 0, 0])
        assert store.count("user:u1") == 2


# ---- vectors: the funnel on the partial HNSW index ------------------------------------------


def test_funnel_runs_on_the_collections_partial_hnsw_index(pg_url: str) -> None:
    data, queries = clustered(1500, 16, clusters=15, noise=0.5, seed=3, queries=5)
    data *= np.linspace(1.0, 0.1, 16, dtype=np.float32)  # Matryoshka-like: signal up front
    queries *= np.linspace(1.0, 0.1, 16, dtype=np.float32)
    with _open(pg_url, embed_dims=16, exact_threshold=1000, tiers=(8,), background=False) as s:
        s.put_many([Put("user:u1", f"r{i:05d}", "", {"i": i}, data[i]) for i in range(1500)])
        s.put_many([Put("user:small", f"r{i}", "", {}, data[i]) for i in range(10)])
        assert [x.mode for x in s.index_status()] == ["exact", "exact"]
        assert s.run_index_work() == 1  # only the large collection gets an index
        assert s.wait_indexed(30)
        status = {x.collection: x for x in s.index_status()}
        assert status["user:u1"].mode == "hnsw" and status["user:u1"].dims == 8  # the tier
        assert status["user:small"].mode == "exact"
        captured: list[tuple[Any, Any]] = []
        real_read = s.db.read

        def spy(sql: Any, params: Any = None, *, binary: bool = False) -> list[Any]:
            captured.append((sql, params))
            return real_read(sql, params, binary=binary)

        s.db.read = spy  # type: ignore[method-assign]
        hits = s.search("user:u1", queries[0], 10)
        s.db.read = real_read  # type: ignore[method-assign]
        (funnel_sql, funnel_params) = next(c for c in captured if "WITH cand" in str(c[0]))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SET search_path TO libravdb, public")
            oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()
            assert oid is not None
            register_vector(conn, int(oid[0]))
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + funnel_sql, funnel_params))
        cid = s.collection("user:u1").cid  # type: ignore[union-attr]
        assert f"Index Scan using records_ann_c{cid}_d8" in plan, plan
        # candidates from an 8-of-16 tier, re-ranked with the full vectors: near the exact
        # answer, ordered by the full-dimension score
        exact = [f"r{i:05d}" for i in exact_topk(data, queries[0], 10)]
        assert len({h.id for h in hits} & set(exact)) >= 8
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        # a dropped collection's index goes too
        s.drop_collections(["user:u1"])
        s.run_index_work()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE indexname ~ '^records_ann_c'"
            ).fetchone()
        assert left == (0,)


def test_filtered_funnel_search_keeps_k_results(pg_url: str) -> None:
    data, queries = clustered(6000, 16, clusters=20, noise=0.5, seed=4, queries=10)
    with _open(pg_url, embed_dims=16, exact_threshold=1000) as s:
        for lo in range(0, 6000, 2000):
            s.put_many(
                [
                    Put("user:u1", f"r{i:05d}", "", {"third": i % 3 == 0, "i": i}, data[i])
                    for i in range(lo, lo + 2000)
                ]
            )
        assert s.wait_indexed(60)
        keep = np.array([i for i in range(6000) if i % 3])  # 4000: above the exact pool
        agree = 0
        for q in queries:
            hits = s.search("user:u1", q, 10, where={"third": False})
            assert len(hits) == 10 and all(not h.metadata["third"] for h in hits)
            exact = {f"r{keep[j]:05d}" for j in exact_topk(data[keep], q, 10)}
            agree += len(exact & {h.id for h in hits})
        assert agree / (10 * len(queries)) >= 0.95


def test_a_larger_collection_is_searched_wider(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hnsw.ef_search grows with the collection (sidecar.store.index.scaled_ef), set per
    # query in the funnel's transaction (filtered or not); the scaling starts at 1,000
    # records here
    monkeypatch.setattr(index_mod, "EF_SCALE_FROM", 1000)
    n = 4500
    data, queries = clustered(n, 16, clusters=12, noise=0.5, seed=5, queries=8)
    with _open(pg_url, embed_dims=16, exact_threshold=200, background=False) as s:
        s.put_many([Put("user:u1", f"r{i:05d}", "", {"odd": i % 3 > 0}, data[i]) for i in range(n)])
        s.run_index_work()
        assert s.index_status()[0].mode == "hnsw"
        sent: list[str] = []
        real_call = s.db.call

        def spy(fn: Any, action: str = "read") -> Any:
            def wrapped(conn: Any) -> Any:
                real_execute = conn.execute

                def execute(sql: Any, *a: Any, **kw: Any) -> Any:
                    sent.append(str(sql))
                    return real_execute(sql, *a, **kw)

                conn.execute = execute
                try:
                    return fn(conn)
                finally:
                    conn.execute = real_execute

            return real_call(wrapped, action)

        s.db.call = spy  # type: ignore[method-assign]
        for q in queries:
            for where in (None, {"odd": True}):
                hits = s.search("user:u1", q, 10, where=where)
                pool = [i for i in range(n) if where is None or i % 3 > 0]
                exact = {f"r{pool[j]:05d}" for j in exact_topk(data[pool], q, 10)}
                assert len(hits) == 10 and len(exact & {h.id for h in hits}) >= 9
        ef = index_mod.scaled_ef(s.params.ef_search, n, 20)
        assert ef > s.params.ef_search
        assert sum(f"SET LOCAL hnsw.ef_search = {ef}" in x for x in sent) == 2 * len(queries)


def test_hnsw_recall_5k_384d_clustered(pg_url: str) -> None:
    """Recall@10 of the PostgreSQL funnel (halfvec HNSW + exact re-rank) vs exact."""
    data, queries = clustered(5000, 384, clusters=100, noise=0.8, seed=7, queries=50)
    with _open(pg_url, embed_dims=384, exact_threshold=1000, background=False) as s:
        for lo in range(0, 5000, 2500):
            s.put_many([Put("user:u1", f"r{i:06d}", "", {}, data[i]) for i in range(lo, lo + 2500)])
        s.run_index_work()
        assert s.index_status()[0].mode == "hnsw"
        norm = data / np.linalg.norm(data, axis=1, keepdims=True)
        found = 0
        for q in queries:
            exact = set(np.argpartition(-(norm @ (q / np.linalg.norm(q))), 10)[:10].tolist())
            found += len(exact & {int(h.id[1:]) for h in s.search("user:u1", q, 10)})
        assert found / (10 * len(queries)) >= 0.98


def test_vector_dimension_is_checked_against_the_stored_collection(pg_url: str) -> None:
    with _open(pg_url) as a:
        a.ensure_collections(["user:u1"])
    with _open(pg_url, embed_dims=8, fingerprint="") as b:  # another embedder dimension
        with pytest.raises(InvalidInput, match="dimensions 8 do not match collection user:u1"):
            b.put("user:u1", "x", vector=np.ones(8))
        assert b.dims_for("user:u1") == 4 and b.dims_for("user:u2") == 8


# ---- a connection lost while committing ---------------------------------------------------


def test_lost_commit_is_settled_by_asking_the_server(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection dies around COMMIT: the store asks the server (pg_xact_status)
    whether the transaction committed instead of guessing."""
    from psycopg.transaction import Transaction

    real_exit = Transaction.__exit__
    mode = {"how": ""}

    def exit_then_fail(self: Transaction, *exc: Any) -> Any:
        if exc[0] is None and mode["how"] == "committed":
            real_exit(self, *exc)  # the commit went through; its answer was lost
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        if exc[0] is None and mode["how"] == "aborted":
            # the session dies before its COMMIT reaches the server
            with psycopg.connect(pg_url, autocommit=True) as other:
                other.execute(
                    "SELECT pg_terminate_backend(%s)", (self.connection.info.backend_pid,)
                )
            time.sleep(0.2)
        return real_exit(self, *exc)

    with _open(pg_url, background=False) as store:
        monkeypatch.setattr(Transaction, "__exit__", exit_then_fail)
        mode["how"] = "committed"
        assert store.put("user:u1", "kept", vector=[1, 0, 0, 0]).created
        mode["how"] = "aborted"
        with pytest.raises(StorageUnavailable):
            store.put("user:u1", "lost", vector=[1, 0, 0, 0])
        mode["how"] = ""
        assert [r.id for r in store.list_records("user:u1")] == ["kept"]
        assert store.count("user:u1") == 1


def test_transactions_rerun_on_deadlock_and_serialization_failure(pg_url: str) -> None:
    from psycopg import errors as pge

    with _open(pg_url, background=False) as store:
        calls = {"n": 0}

        def flaky(conn: psycopg.Connection[Any]) -> int:
            calls["n"] += 1
            conn.execute("INSERT INTO tombstones VALUES ('ns', %s, '', 0)", (f"k{calls['n']}",))
            if calls["n"] == 1:
                raise pge.DeadlockDetected("deadlock detected")
            if calls["n"] == 2:
                raise pge.SerializationFailure("could not serialize access")
            return calls["n"]

        assert store.db.transact(flaky) == 3
        # the failed attempts were rolled back: only the third one's row is there
        assert [t[1] for t in store.list_tombstones("ns")] == ["k3"]

        def always(conn: psycopg.Connection[Any]) -> None:
            raise pge.DeadlockDetected("deadlock detected")

        with pytest.raises(StorageUnavailable, match="deadlock"):
            store.db.transact(always)


def test_error_mapping_and_redaction() -> None:
    from psycopg import errors as pge

    from sidecar.store import CorruptStore
    from sidecar.store.pg.conn import map_pg_error, redact

    assert redact("postgresql://u:pw@db.example:6543/x") == "postgresql://u:***@db.example:6543/x"
    assert redact("postgresql://u@h/x") == "postgresql://u@h/x"
    assert isinstance(map_pg_error(pge.DataCorrupted("bad page"), "read", "w"), CorruptStore)
    assert isinstance(map_pg_error(pge.DiskFull("no space"), "write", "w"), StorageUnavailable)
    assert isinstance(
        map_pg_error(pge.ReadOnlySqlTransaction("ro"), "write", "w"), StorageUnavailable
    )
    plain = pge.UndefinedTable("no table")
    assert map_pg_error(plain, "read", "w") is plain  # a bug stays a bug
    err = InvalidInput("x")
    assert map_pg_error(err, "read", "w") is err


def test_lost_commit_with_the_server_gone_says_the_outcome_is_unknown(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from psycopg.transaction import Transaction

    import sidecar.store.pg.conn as conn_mod

    real_exit = Transaction.__exit__

    def exit_then_fail(self: Transaction, *exc: Any) -> Any:
        real_exit(self, *exc)
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    with _open(pg_url, background=False) as store:
        monkeypatch.setattr(Transaction, "__exit__", exit_then_fail)
        monkeypatch.setattr(conn_mod.psycopg, "connect", unreachable)
        with pytest.raises(StorageUnavailable, match="could not be asked") as exc:
            store.put("user:u1", "maybe", vector=[1, 0, 0, 0])
        assert exc.value.data["outcome"] == "unknown"
        monkeypatch.undo()
        assert store.get("user:u1", "maybe") is not None  # it had committed, in fact
